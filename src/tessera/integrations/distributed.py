"""Sharding a dataset's samples across the ranks of a distributed job by *group*: the
samples that share stored data (the images of one image-column group, the samples of one
tile row of an array, the rows of one row group of a tensor) go to the same rank, so no two
ranks fetch the same group.

:class:`DistributedGroupSampler` is ``torch.utils.data.DistributedSampler`` with groups: one
seed shuffles the groups each epoch (the same order on every rank), groups are dealt to the
ranks in turn, each rank's list is padded with its own first samples (or cut, with
``drop_last``) to the same length on every rank (with fewer groups than ranks, a rank
without a group repeats the first rank's samples), and samples are drawn at random from a
window of ``buffer_groups`` of the rank's groups at a time. :meth:`state_dict` /
:meth:`load_state_dict` carry the epoch and the samples already consumed, with the setup that
defines the epoch's order (seed, world size, shuffle, drop_last, buffer_groups and a
fingerprint of the dataset's groups), so a restarted job resumes mid-epoch with exactly the
remaining samples, and a changed setup is refused instead of repeating or skipping samples.

>>> keys = [0, 0, 1, 1, 2, 2, 3, 3]   # or a dataset: DistributedGroupSampler(dataset, ...)
>>> s = DistributedGroupSampler(keys=keys, num_replicas=2, rank=0, seed=1)
>>> t = DistributedGroupSampler(keys=keys, num_replicas=2, rank=1, seed=1)
>>> a, b = list(s), list(t)
>>> sorted(a + b), {p // 2 for p in a} & {p // 2 for p in b}
([0, 1, 2, 3, 4, 5, 6, 7], set())
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Hashable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np
from torch.utils.data import Sampler

from tessera.errors import InvalidArgumentError, InvalidTypeError, TesseraWarning


class Grouped(Protocol):
    """A dataset that says which of its samples share stored data."""

    def group_keys(self) -> Sequence[Hashable]:
        """One key per sample: samples with the same key share stored data."""
        ...


class DistributedGroupSampler(Sampler[int]):
    """Sample positions of one rank's share of a dataset's groups (see the module docs).

    Written as PyTorch's ``DistributedSampler`` is: ``DistributedGroupSampler(dataset,
    num_replicas, rank, shuffle, seed, drop_last)``.

    Args:
        dataset: a dataset that says which samples share stored data (``group_keys()``:
            every ``tessera.torch`` dataset). Anything else is refused: it cannot be
            sharded by group (use ``torch.utils.data.DistributedSampler`` for it).
        num_replicas, rank: the job's world size and this process's rank (default: from
            ``torch.distributed`` when it is initialised, else 1 and 0).
        shuffle: shuffle the groups each epoch and the samples within a window; False keeps
            the groups' first-seen order and each group's positions in order.
        seed: the shuffle's seed; the same on every rank.
        drop_last: cut every rank's list to the shortest one instead of padding to the
            longest with the rank's own first samples.
        keys: instead of a dataset, one group key per sample position (by keyword only).
        buffer_groups: groups whose samples are mixed at a time (the memory a loader's
            cache needs to hold: about this many groups).

    >>> sampler = DistributedGroupSampler(keys=[0, 0, 1, 1, 2, 2], num_replicas=2, rank=0,
    ...                                   shuffle=False)
    >>> sorted(sampler)  # this rank's share: whole groups (same key), none split between ranks
    [0, 1, 4, 5]
    """

    def __init__(self, dataset: Grouped | None = None, num_replicas: int | None = None,
                 rank: int | None = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, *, keys: Sequence[Hashable] | np.ndarray | None = None,
                 buffer_groups: int = 16) -> None:
        keys = _group_keys(dataset, keys)
        if num_replicas is None or rank is None:
            world, me = _world()
            num_replicas = world if num_replicas is None else num_replicas
            rank = me if rank is None else rank
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) \
                or num_replicas < 1:
            raise InvalidArgumentError(f"num_replicas must be a positive integer, got "
                                       f"{num_replicas!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise InvalidArgumentError(f"rank must be 0..{num_replicas - 1}, got {rank!r}")
        if buffer_groups < 1:
            raise InvalidArgumentError(f"buffer_groups must be >= 1, got {buffer_groups}")
        self.num_replicas, self.rank = num_replicas, rank
        self.shuffle, self.seed, self.drop_last = shuffle, int(seed), drop_last
        self.buffer_groups = int(buffer_groups)
        self.epoch = 0
        self.consumed = 0  # samples of this epoch already handed out (or restored)
        ordinal: dict[Hashable, int] = {}
        codes = np.fromiter((ordinal.setdefault(_hashable(k), len(ordinal)) for k in keys),
                            dtype=np.int64, count=len(keys))
        order = np.argsort(codes, kind="stable")
        cuts = np.flatnonzero(np.diff(codes[order])) + 1
        self._groups: list[np.ndarray] = np.split(order, cuts) if len(order) else []
        self._size = len(codes)
        #: which positions share a group (the keys' first-seen numbering), as a hash
        self._fingerprint = hashlib.blake2b(codes.astype("<i8").tobytes(),
                                            digest_size=16).hexdigest()

    @classmethod
    def for_dataset(cls, dataset: Grouped, **kwargs: Any) -> DistributedGroupSampler:
        """Deprecated: ``DistributedGroupSampler(dataset, ...)`` does the same."""
        warnings.warn("DistributedGroupSampler.for_dataset(dataset, ...) is deprecated: "
                      "write DistributedGroupSampler(dataset, ...)", DeprecationWarning,
                      stacklevel=2)
        return cls(dataset, **kwargs)

    def __repr__(self) -> str:
        return (f"<tessera.torch.DistributedGroupSampler rank {self.rank} of "
                f"{self.num_replicas}, {len(self._groups)} groups of {self._size} samples, "
                f"epoch {self.epoch}>")

    def set_epoch(self, epoch: int) -> None:
        """Shuffle differently in ``epoch`` (as ``DistributedSampler.set_epoch``); the new
        epoch starts from its first sample."""
        if int(epoch) != self.epoch:
            self.epoch, self.consumed = int(epoch), 0

    def _mine(self, epoch: int | None = None) -> np.ndarray:
        """This rank's positions of the epoch (default: the current one), padded or cut to
        the common length."""
        rng = np.random.default_rng((self.seed, self.epoch if epoch is None else epoch))
        order = rng.permutation(len(self._groups)) if self.shuffle else \
            np.arange(len(self._groups))
        groups = [self._groups[i] for i in order]
        shares = [groups[r::self.num_replicas] for r in range(self.num_replicas)]
        sizes = [sum(len(g) for g in share) for share in shares]
        mine = shares[self.rank]
        windows = []
        for start in range(0, len(mine), self.buffer_groups):
            window = np.concatenate(mine[start:start + self.buffer_groups])
            windows.append(rng.permutation(window) if self.shuffle else window)
        out = np.concatenate(windows) if windows else np.zeros(0, np.int64)
        want = min(sizes) if self.drop_last else max(sizes)
        if len(out) > want:
            return out[:want]
        if len(out) < want:  # pad with this rank's own samples: no other rank's group
            # (fewer groups than ranks: a rank without one repeats the first rank's)
            pool = out if len(out) else np.concatenate(shares[0])
            out = np.tile(pool, -(-want // len(pool)))[:want]
        return out

    def __iter__(self) -> Iterator[int]:
        mine = self._mine()
        if self.consumed >= len(mine):  # the epoch was done: again, as without set_epoch
            self.consumed = 0
        start = self.consumed
        for p in mine[start:]:
            self.consumed += 1
            yield int(p)

    def __len__(self) -> int:
        """Samples this rank hands out in a whole epoch (the same on every rank)."""
        if not self._groups:
            return 0
        return len(self._mine())

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """Where the epoch stands, and what defines its order.

        The state holds ``epoch`` and ``consumed`` (samples of the epoch already used), and
        the setup the epoch's order follows from: ``seed``, ``num_replicas``, ``shuffle``,
        ``drop_last``, ``buffer_groups``, the dataset's ``size`` and ``groups`` and a
        ``fingerprint`` of which positions share a group. :meth:`load_state_dict` refuses a
        state whose setup differs, since the remaining samples would then be other ones.

        A DataLoader draws ahead of training (prefetch, workers): pass ``consumed`` (samples
        the training loop has used, e.g. ``steps * batch_size``) to save that instead of
        what was drawn."""
        return {"version": STATE_VERSION, "epoch": self.epoch, "seed": self.seed,
                "num_replicas": self.num_replicas, "rank": self.rank,
                "shuffle": self.shuffle, "drop_last": self.drop_last,
                "buffer_groups": self.buffer_groups, "size": self._size,
                "groups": len(self._groups), "fingerprint": self._fingerprint,
                "consumed": self.consumed if consumed is None else
                _count(consumed, "consumed")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume where :meth:`state_dict` said: the next iteration hands out the saved
        epoch's remaining samples only, exactly those a run without the stop would have.

        Raises :class:`~tessera.errors.InvalidArgumentError` (a ``ValueError``) naming the
        field when the state is not one :meth:`state_dict` made, or was saved with another
        setup (seed, world size, shuffle, drop_last, buffer_groups, or another dataset:
        its size, groups or grouping), or ``consumed`` is outside the saved epoch."""
        if not isinstance(state, dict):
            raise InvalidArgumentError(f"not a DistributedGroupSampler state: {state!r:.120}")
        version = state.get("version")
        if version not in (1, STATE_VERSION) or isinstance(version, bool):
            raise InvalidArgumentError(
                f"not a DistributedGroupSampler state (version {STATE_VERSION}): "
                f"{state!r:.120}")
        fields = _V1_FIELDS if version == 1 else _V2_FIELDS
        missing = sorted(fields - set(state))
        if missing:
            raise InvalidArgumentError(f"not a DistributedGroupSampler state: it has no "
                                       f"{', '.join(missing)}: {state!r:.120}")
        epoch = _count(state["epoch"], "epoch")
        consumed = _count(state["consumed"], "consumed")
        setup: dict[str, Any] = {"seed": self.seed, "num_replicas": self.num_replicas}
        if version == STATE_VERSION:
            setup.update(shuffle=self.shuffle, drop_last=self.drop_last,
                         buffer_groups=self.buffer_groups, size=self._size,
                         groups=len(self._groups), fingerprint=self._fingerprint)
        else:
            warnings.warn("this sampler state was saved by an older Tessera: it does not "
                          "say which dataset, shuffle, drop_last and buffer_groups it was "
                          "saved with, so a changed setup cannot be detected", TesseraWarning,
                          stacklevel=2)
        for name, mine in setup.items():
            saved = state[name]
            if type(saved) is not type(mine) or saved != mine:
                what = "the dataset" if name in ("size", "groups", "fingerprint") else name
                raise InvalidArgumentError(
                    f"the sampler state was saved with {name}={saved!r:.40}, this sampler "
                    f"has {mine!r:.40}: resume with the same {what}, or start the epoch "
                    "afresh (set_epoch) instead of loading the state")
        length = len(self._mine(epoch)) if self._groups else 0
        if consumed > length:
            raise InvalidArgumentError(f"consumed {consumed} is outside 0..{length}, the "
                                       f"samples of epoch {epoch} on each rank")
        self.epoch, self.consumed = epoch, consumed


STATE_VERSION = 2
_V1_FIELDS = {"epoch", "seed", "num_replicas", "consumed"}
_V2_FIELDS = _V1_FIELDS | {"shuffle", "drop_last", "buffer_groups", "size", "groups",
                           "fingerprint"}


def _count(value: Any, name: str) -> int:
    """``value`` as a count >= 0, or :class:`InvalidArgumentError` naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < 0:
        raise InvalidArgumentError(f"the sampler state's {name} must be an integer >= 0, got "
                                   f"{value!r:.40}")
    return int(value)


def _group_keys(dataset: Any, keys: Sequence[Hashable] | np.ndarray | None,
                ) -> Sequence[Hashable] | np.ndarray:
    """The group key of every sample position, from a dataset or from ``keys=``.

    Groups: ``FrequencyDataset``'s image-column groups, ``ArrayDataset`` /
    ``RegionDataset``'s tile rows along the sample dimension, ``TensorTableDataset``'s row
    groups of each tensor."""
    if keys is not None:
        if dataset is not None:
            raise InvalidArgumentError("give DistributedGroupSampler a dataset or keys=, not "
                                       "both")
        return keys
    if dataset is None:
        raise InvalidArgumentError("DistributedGroupSampler needs a dataset (one with "
                                   "group_keys(), as every tessera.torch dataset has) or "
                                   "keys=[one group key per sample]")
    if callable(getattr(dataset, "group_keys", None)):
        return dataset.group_keys()  # type: ignore[no-any-return]
    if isinstance(dataset, (list, tuple, np.ndarray)):
        warnings.warn("passing group keys as DistributedGroupSampler's first argument is "
                      "deprecated: the first argument is the dataset, as in PyTorch's "
                      "DistributedSampler; pass keys=[...] for a list of group keys",
                      DeprecationWarning, stacklevel=3)
        return dataset
    raise InvalidTypeError(
        f"DistributedGroupSampler cannot shard a {type(dataset).__name__} by group: it has "
        "no group_keys() saying which samples share stored data. Use a tessera.torch "
        "dataset, pass keys=[one group key per sample], or use "
        "torch.utils.data.DistributedSampler, which shards samples one by one")


def _hashable(key: Hashable) -> Hashable:
    return key.item() if isinstance(key, np.generic) else key


def _world() -> tuple[int, int]:
    """``(world size, rank)`` of an initialised ``torch.distributed``, else ``(1, 0)``."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0
