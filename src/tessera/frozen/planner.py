"""Choosing the split: HAPI's cost model with overlap (paper section 4.3), the baselines'
rules, and the table ``explain`` prints. The model, term by term, and how it was
calibrated against measured epochs: docs/design/split-planner.md; what users see:
docs/frozen.md.

>>> p = SplitProfile(names=("a", "b", "c"), out_bytes=(400, 100, 40), input_bytes=300,
...                  freeze=2, server_fwd_s=(0.01, 0.01), client_fwd_s=(0.01, 0.01, 0.002),
...                  train_s=0.004, bandwidth=1e5)
>>> plan = choose(p, batch=8, request=4, samples=800)
>>> plan.split, [round(c.iteration_s, 3) for c in plan.candidates]
(1, [0.192, 0.112, 0.16])
>>> choose(p, 8, 4, rule="sum", samples=800).split, choose(p, 8, 4, rule="min").split
(2, 2)

Split 1 wins although its server and client sum (0.225 s) is the largest: they overlap.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from statistics import median
from typing import Literal

from tessera.errors import InvalidArgumentError
from tessera.storage.pricing import PriceTable

Rule = Literal["auto", "sum", "freeze", "min", "nosplit"]
RULES = ("auto", "sum", "freeze", "min", "nosplit")


@dataclasses.dataclass(frozen=True)
class SplitProfile:
    """What the planner knows about a job (seconds per sample, bytes per sample).

    Attributes:
        names: the model's layer names, 1..L.
        out_bytes: bytes per sample of each layer's output as sent (float32 unless fp16).
        input_bytes: bytes per sample as stored (what NoSplit fetches).
        freeze: the last frozen layer F.
        server_fwd_s: the server's forward seconds per sample of layers 1..F.
        client_fwd_s: the client's forward seconds per sample of layers 1..L (those it never
            ran may be NaN; splits needing them are then marked unprofiled).
        train_s: the client's forward + backward + optimizer seconds per sample of the
            trained layers (F+1..L and any head).
        bandwidth: link bytes per second.
        rtt_s: a request's round trip without payload.
        server_sample_s: the server's per-sample read + normalise seconds.
        server_byte_s: the server's seconds per byte of features (copy, framing).
        client_byte_s: the client's seconds per received byte (decode, collate).
        client_decode_s: the client's seconds per sample to read and normalise a stored
            sample itself (NoSplit), beyond the link.
        concurrency: requests the server computes at once.
        max_output_bytes: the server's limit of feature bytes per request.
        server_memory_bytes: the server's activation budget per request.
        server_peak_bytes: per split 1..F, the server's memory estimate per sample.
        client_peak_bytes: per split 0..F, the client's memory estimate per sample.
        client_memory_bytes: the client's budget.
        dollars_per_request: fee of one request (infer or read).
        dollars_per_byte: egress fee per byte crossing the link.
        prefetch: iterations whose requests are in flight ahead of the computing one.
        server_scale, client_scale, read_scale: the calibrations ``a_s``, ``a_c``, ``a_r``.
        server_load_s: per split 1..F, the server's seconds per request to load the
            weights of layers 1..s (zeros when it keeps models loaded; empty: not known).
        client_answer_s: the client's seconds per answer it receives beyond its modelled
            work (the answer's framing and parse, the fetch thread's share of the core):
            ``r_c``, calibrated at ``F`` (module docstring).
        server_cores: 0 for a server whose forward passes take turns on a device while
            the rest of its work runs beside them (the paper's GPU; emulated compute); else
            the CPU cores all of a CPU server's work shares (its timings are then wall times
            of the requests in flight sharing them).
    """

    names: tuple[str, ...]
    out_bytes: tuple[int, ...]
    input_bytes: int
    freeze: int
    server_fwd_s: tuple[float, ...]
    client_fwd_s: tuple[float, ...]
    train_s: float
    bandwidth: float
    rtt_s: float = 0.001
    server_sample_s: float = 0.0
    server_byte_s: float = 0.0
    client_byte_s: float = 0.0
    client_decode_s: float = 0.0
    concurrency: int = 4
    max_output_bytes: int = 256 << 20
    server_memory_bytes: int = 2 << 30
    server_peak_bytes: tuple[int, ...] = ()
    client_peak_bytes: tuple[int, ...] = ()
    client_memory_bytes: int = 16 << 30
    dollars_per_request: float = 0.0
    dollars_per_byte: float = 0.0
    prefetch: int = 1
    server_scale: float = 1.0
    client_scale: float = 1.0
    read_scale: float = 1.0
    server_cores: int = 0
    server_load_s: tuple[float, ...] = ()
    client_answer_s: float = 0.0

    def __post_init__(self) -> None:
        n = len(self.names)
        if len(self.out_bytes) != n or len(self.client_fwd_s) != n:
            raise InvalidArgumentError("names, out_bytes and client_fwd_s need one entry per "
                                       "layer")
        if not 1 <= self.freeze < n:
            raise InvalidArgumentError(f"freeze must be 1..{n - 1} (the last layer trains), "
                                       f"got {self.freeze}")
        if len(self.server_fwd_s) < self.freeze:
            raise InvalidArgumentError(f"server_fwd_s needs layers 1..{self.freeze}")
        if not self.bandwidth > 0:
            raise InvalidArgumentError(f"bandwidth must be > 0, got {self.bandwidth}")

    @property
    def priced(self) -> bool:
        """True if the profile carries prices (dollars count in plans with ``phi > 0``)."""
        return self.dollars_per_request > 0 or self.dollars_per_byte > 0

    def with_prices(self, table: PriceTable) -> SplitProfile:
        """This profile with a provider's list prices (:mod:`tessera.storage.pricing`): each
        request to the infer server (or read of a stored sample) priced as the provider's
        serverless invocation (``pushdown``), each byte crossing the link as its internet
        egress.

        >>> from tessera.storage.pricing import get_pricing
        >>> p = SplitProfile(("a", "b"), (4, 2), 12, 1, (0.1,), (0.2, 0.1), 0.5, 1e6)
        >>> q = p.with_prices(get_pricing("s3"))
        >>> q.priced, round(q.dollars_per_byte * 2**30, 2), p.priced
        (True, 0.09, False)
        """
        return dataclasses.replace(self, dollars_per_request=table.request_fee("pushdown"),
                                   dollars_per_byte=table.egress_usd(1))

    def to_json(self) -> dict[str, object]:
        """This profile as a JSON object (``tessera model profile`` saves it)."""
        return {"profile": 1, **dataclasses.asdict(self)}

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> SplitProfile:
        """A profile saved by :meth:`to_json`."""
        if doc.get("profile") != 1:
            raise InvalidArgumentError("not a split profile (version 1) of `tessera model "
                                       "profile`")
        fields = {f.name for f in dataclasses.fields(cls)}
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in doc.items() if k in fields}
        return cls(**kw)  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One split's estimate, per training iteration (seconds) and per epoch."""

    split: int
    name: str
    out_bytes: int
    feasible: bool
    why: str
    server_s: float
    network_s: float
    client_s: float
    iteration_s: float
    sum_s: float
    epoch_s: float
    dollars: float
    request_size: int


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """The chosen split, every candidate, and what they were computed for."""

    split: int
    rule: str
    candidates: tuple[Candidate, ...]
    batch: int
    request: int
    samples: int
    profile: SplitProfile
    phi: float = 0.0

    def candidate(self, split: int) -> Candidate:
        """The estimate of ``split``."""
        for c in self.candidates:
            if c.split == split:
                return c
        raise InvalidArgumentError(f"split {split} is not a candidate (0..{self.profile.freeze})")

    def explain(self, title: str = "") -> str:
        """The table of every candidate: output per sample, feasibility, server, network and
        client seconds per iteration, the epoch estimate and the ratio to NoSplit."""
        p = self.profile
        nosplit = self.candidate(0).epoch_s
        head = (f"{title}freeze {p.freeze} {p.names[p.freeze - 1]}  batch {self.batch}  "
                f"request {self.request}  concurrency {p.concurrency}  link "
                f"{p.bandwidth * 8 / 1e6:.1f} Mbit/s  rule {self.rule}"
                + (f"  phi {self.phi:g} s/$" if self.phi else "")
                + ("" if p.priced else "  (no prices: $ are 0)"))
        lines = [head, f"{'split':>5} {'layer':<22} {'out/sample':>11} {'fits':<16} "
                       f"{'server s/it':>11} {'net s/it':>9} {'client s/it':>11} "
                       f"{'est s/epoch':>11} {'vs NoSplit':>10} {'$/epoch':>9}"]
        for c in self.candidates:
            name = "(NoSplit)" if c.split == 0 else c.name
            mark = "  <- chosen" if c.split == self.split else ""
            ratio = nosplit / c.epoch_s if c.epoch_s > 0 and math.isfinite(c.epoch_s) else 0
            lines.append(f"{c.split:>5} {name[:22]:<22} {_size(c.out_bytes):>11} "
                         f"{'yes' if c.feasible else c.why:<16} {c.server_s:>11.3f} "
                         f"{c.network_s:>9.3f} {c.client_s:>11.3f} {c.epoch_s:>11.2f} "
                         f"{ratio:>9.2f}x {c.dollars:>9.4f}{mark}")
        if self.rule != "sum":
            nsg = _pick(self.candidates, "sum", p)
            lines.append(f"NSG (sum rule) would pick {nsg}")
        lines.append(self.materialise().line())
        return "\n".join(lines)

    def materialise(self, months: float = 1.0, storage_usd_per_gb_month: float = 0.0,
                    ) -> MaterialiseRule:
        """Whether to materialise the features of ``F`` (:func:`~tessera.frozen.materialize`)
        instead of recomputing the chosen split every epoch (spec 5.4): worth it, with no
        random augmentation, for ``E`` epochs when ``(E - 1) x recompute > write + storage
        + (E - 1) x read``, each side in seconds plus ``phi`` x dollars. *write*: the first
        epoch runs at ``F`` (its extra over the chosen split) and writes ``N x o_F`` bytes
        back to the store; *read*: an epoch reading them (one request per iteration) while
        the client trains; *storage*: ``months`` of ``N x o_F`` bytes at
        ``storage_usd_per_gb_month`` (0: not priced; the price tables carry no storage
        price).

        >>> p = SplitProfile(names=("a", "b", "c"), out_bytes=(4000, 40, 4),
        ...                  input_bytes=3000, freeze=2, server_fwd_s=(0.01, 0.01),
        ...                  client_fwd_s=(0.01, 0.01, 0.0), train_s=0.001, bandwidth=1e6)
        >>> rule = choose(p, batch=8, request=8, samples=800).materialise()
        >>> round(rule.break_even, 1), rule.pays(1), rule.pays(2)
        (1.9, False, True)
        """
        p = self.profile
        f = p.freeze
        chosen, at_f = self.candidate(self.split), self.candidate(f)
        o = p.out_bytes[f - 1]
        nbytes = self.samples * o
        iterations = math.ceil(self.samples / self.batch)
        write_s = max(0.0, at_f.epoch_s - chosen.epoch_s) + nbytes / p.bandwidth
        write_usd = max(0.0, at_f.dollars - chosen.dollars)
        fetch = self.batch * o / p.bandwidth + p.rtt_s  # one iteration's features
        read_s = iterations * max(at_f.client_s, fetch) + fetch  # the first one waits
        read_usd = iterations * p.dollars_per_request + nbytes * p.dollars_per_byte
        storage_usd = months * nbytes / 2**30 * storage_usd_per_gb_month
        phi = self.phi
        once = write_s + phi * (write_usd + storage_usd)
        saved = (chosen.epoch_s + phi * chosen.dollars) - (read_s + phi * read_usd)
        feasible = at_f.feasible and math.isfinite(chosen.epoch_s)
        even = 1 + once / saved if feasible and saved > 0 else math.inf
        return MaterialiseRule(f, p.names[f - 1], feasible, chosen.epoch_s, chosen.dollars,
                               write_s, write_usd, read_s, read_usd, storage_usd, even)


@dataclasses.dataclass(frozen=True)
class MaterialiseRule:
    """Materialising the features of split ``split`` against recomputing the chosen split
    every epoch (:meth:`SplitPlan.materialise`): seconds and dollars of one epoch
    recomputed, of the one-off write, of one epoch reading the features back, of storing
    them, and the number of epochs from which materialising costs less (``inf``: never)."""

    split: int
    layer: str
    feasible: bool
    recompute_s: float
    recompute_usd: float
    write_s: float
    write_usd: float
    read_s: float
    read_usd: float
    storage_usd: float
    break_even: float

    def pays(self, epochs: int) -> bool:
        """True if materialising costs less over ``epochs`` epochs."""
        return epochs >= self.break_even

    def line(self) -> str:
        """The line ``explain`` prints."""
        head = f"materialise features of {self.split} {self.layer}"
        if not self.feasible:
            return f"{head}: not possible (split {self.split} is not feasible)"
        sides = (f"write {self.write_s:.2f} s ${self.write_usd + self.storage_usd:.4f} once, "
                 f"then {self.read_s:.2f} s ${self.read_usd:.4f} per epoch against "
                 f"{self.recompute_s:.2f} s ${self.recompute_usd:.4f} recomputed")
        if math.isinf(self.break_even):
            return f"{head}: {sides}: never pays (reading them back is not cheaper)"
        return (f"{head}: {sides}: pays from {math.ceil(self.break_even)} epochs on, with no "
                "random augmentation (tessera.frozen.materialize)")


def _size(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} B"


def estimate(p: SplitProfile, split: int, batch: int, request: int, samples: int) -> Candidate:
    """The cost model for one split (see the module's docstring)."""
    iterations = math.ceil(samples / batch)
    f = p.freeze
    train = batch * p.train_s
    why = ""
    if split == 0:
        o = p.input_bytes
        server = 0.0
        net = p.read_scale * (batch * o / p.bandwidth + p.rtt_s)
        client = p.client_scale * (batch * (p.client_decode_s + sum(p.client_fwd_s[:f]))
                                   + train)
        size = batch
        requests = 1
        fill = net
        pipelined, t_fwd, t_par = False, 0.0, 0.0
    else:
        o = p.out_bytes[split - 1]
        size = max(1, min(request, p.max_output_bytes // max(o, 1)))
        if o > p.max_output_bytes:
            why = "output limit"
        if p.server_peak_bytes and p.server_peak_bytes[split - 1] > p.server_memory_bytes:
            why = "server memory"
        q = math.ceil(batch / size)
        flying = max(1, min(p.concurrency, q * (1 + p.prefetch)))
        load = p.server_load_s[split - 1] if len(p.server_load_s) >= split else 0.0
        parallel = size * (p.server_sample_s + o * p.server_byte_s) + load
        forward = size * sum(p.server_fwd_s[:split])
        if p.server_cores:
            # a CPU server: every phase of the c requests in flight shares its cores, and the
            # per-layer times it reports are wall times under that sharing (profiled at the
            # same c), so c requests' work takes one request's wall time
            t_fwd = p.server_scale * q * (forward + parallel) / flying
            t_par = 0.0
        else:
            t_fwd, t_par = p.server_scale * q * forward, q * parallel / flying
        server = t_fwd + t_par
        net = batch * o / p.bandwidth + math.ceil(q / flying) * p.rtt_s
        client = p.client_scale * (batch * (o * p.client_byte_s
                                            + sum(p.client_fwd_s[split:f])) + train) \
            + q * p.client_answer_s
        requests = q
        fill = p.server_scale * forward + parallel + size * o / p.bandwidth + p.rtt_s
        pipelined = flying >= 2
    if p.client_peak_bytes and batch * p.client_peak_bytes[split] > p.client_memory_bytes:
        why = why or "client memory"
    if math.isnan(client):
        why = why or "unprofiled"
    head = max(t_fwd, t_par, net) if pipelined else server + net
    iteration = max(client, head)
    total = client + server + net
    # the first iteration passes every stage in turn (and one request's latency more: the
    # batch is complete when its last request is); each later one at the slowest stage's pace
    epoch = (iterations - 1) * iteration + head + client + fill
    dollars = iterations * (requests * p.dollars_per_request + batch * o * p.dollars_per_byte)
    return Candidate(split, p.names[split - 1] if split else "", o, not why, why or "yes",
                     server, net, client, iteration, total,
                     epoch, dollars, size)


def calibrate(p: SplitProfile, batch: int, request: int, samples: int, early: int,
              durations: Sequence[tuple[int, float]], busy: Sequence[tuple[int, float]],
              fetches: Sequence[tuple[int, float]] = ()) -> SplitProfile:
    """``p`` with the calibrations ``a_c``, ``a_s`` and ``a_r`` (see the module's docstring)
    from the profiling epoch's iterations as ``(split, seconds)``: ``durations`` once the
    pipeline is full, ``busy`` the client's compute seconds, ``fetches`` each full batch's
    fetch in iteration order (its own time beside the fetch before it at its split:
    :class:`~tessera.frozen.profile.EpochTimes`); ``early`` is the split the client was
    profiled at. Each calibration is kept within 0.1..10.

    ``a_r`` is first the median fetch of stored samples at NoSplit over the link's model of
    it (the read path measured where it is hidden behind the client's compute, which the
    iterations cannot show), then raised if NoSplit's iterations took longer still. With
    no steady iteration at ``F`` (an epoch of two or three iterations: a batch of 512 in
    1,024 samples), ``a_s`` makes the first batch's latency at ``F`` (the first iteration
    passes every stage in turn: ``T_head`` and one request's latency) the first fetch's.

    >>> p = SplitProfile(names=("a", "b", "c"), out_bytes=(400, 100, 40), input_bytes=300,
    ...                  freeze=2, server_fwd_s=(0.01, 0.01), client_fwd_s=(0.01, 0.01, 0),
    ...                  train_s=0.0, bandwidth=1e4, rtt_s=0.0)
    >>> c = calibrate(p, 8, 8, 80, 0, [(0, 0.5)], [(0, 0.32), (0, 0.32)])
    >>> round(c.client_scale, 2), round(c.read_scale, 2), c.server_scale
    (2.0, 2.08, 1.0)

    The client computed 0.32 s where the model said 0.16 (``a_c = 2``); NoSplit took 0.5 s
    where its client (now 0.32 s) and link (0.24 s) explain 0.32 (``a_r = 0.5 / 0.24``).

    Each calibration takes the median of its iterations, the mean of the middle two when
    they are even: a batch of 64 in 512 samples leaves two iterations at ``F`` once the
    pipeline is full. With the larger of the two, real ResNet18 at 20 Mbit/s estimated its
    epoch at ``F`` 1.58x the measured one and chose layer3.0, 1.5x slower than layer4.0; with
    their mean, the next run's estimate was 1.16x and it chose layer4.0.
    """
    def clamp(v: float) -> float:
        return min(10.0, max(0.1, v))

    def warm(split: int) -> list[float]:
        """The client's compute at ``split``, less the first iteration there (it warms
        up) when there are others."""
        got = [d for s, d in busy if s == split]
        return got[1:] or got

    scales: dict[str, float] = {}
    # a_c: the client's compute at its profiled split over the model's
    seen = warm(early)
    if seen and early < p.freeze:
        c = estimate(p, early, batch, request, samples)
        if c.client_s > 0:
            scales["client_scale"] = clamp(median(seen) * p.client_scale / c.client_s)
            p = dataclasses.replace(p, client_scale=scales["client_scale"])
        # r_c: what receiving answers costs the client beyond that model, from its compute
        # at F (where it only trains on what it received), per answer
        at_f = warm(p.freeze)
        if at_f:
            c = estimate(dataclasses.replace(p, client_answer_s=0.0), p.freeze, batch,
                         request, samples)
            extra = median(at_f) - c.client_s
            if extra > 0:
                scales["client_answer_s"] = extra / math.ceil(batch / c.request_size)
                p = dataclasses.replace(p, client_answer_s=scales["client_answer_s"])
    # a_s: the iteration at F, where the server sets the pace, over the model's
    seen = [d for s, d in durations if s == p.freeze]
    if not seen and fetches and fetches[0][0] == p.freeze:
        first = _first_batch_scale(p, batch, request, samples, fetches[0][1])
        if first is not None:
            scales["server_scale"] = first
    if seen:
        measured = median(seen)
        c = estimate(p, p.freeze, batch, request, samples)
        if c.server_s > 0 and c.iteration_s > c.client_s:
            q = math.ceil(batch / c.request_size)
            forward = q * c.request_size * sum(p.server_fwd_s[:p.freeze])
            if p.server_cores:  # T_fwd holds all the server's work
                forward = c.server_s / p.server_scale
            sequential = math.isclose(c.iteration_s, c.server_s + c.network_s)
            other = (c.server_s - forward + c.network_s) if sequential else 0.0
            if forward > 0 and measured > other:
                scales["server_scale"] = clamp((measured - other) / forward)
    # a_r: NoSplit's fetches over the link's model of them, then its iteration beyond what
    # its client and link explain is the read path's too
    reads = [d for s, d in fetches if s == 0 == early]
    if reads:
        scales["read_scale"] = clamp(median(reads) / (batch * p.input_bytes / p.bandwidth
                                                      + p.rtt_s))
        p = dataclasses.replace(p, read_scale=scales["read_scale"])
    seen = [d for s, d in durations if s == 0 == early]
    if seen:
        measured = median(seen)
        c = estimate(p, 0, batch, request, samples)
        if c.network_s > 0 and measured > c.iteration_s:
            scales["read_scale"] = clamp(measured * p.read_scale / c.network_s)
    return dataclasses.replace(p, **scales)  # type: ignore[arg-type]


def _first_batch_scale(p: SplitProfile, batch: int, request: int, samples: int,
                       measured: float) -> float | None:
    """The ``a_s`` (0.1..10) whose first batch at ``F`` arrives after ``measured`` seconds
    in the model (``T_head`` and one request's latency); ``None`` when the model's latency
    without the server's forward passes (``a_s = 0.1``) is already longer: the error is
    not the server's pace."""
    iterations = math.ceil(samples / batch)

    def first(scale: float) -> float:
        c = estimate(dataclasses.replace(p, server_scale=scale), p.freeze, batch, request,
                     samples)
        return c.epoch_s - (iterations - 1) * c.iteration_s - c.client_s

    lo, hi = 0.1, 10.0
    if first(lo) >= measured:
        return None
    if first(hi) <= measured:
        return hi
    for _ in range(40):  # first() does not fall as a_s grows
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if first(mid) < measured else (lo, mid)
    return hi


def static_split(rule: str | int, freeze: int, out_bytes: Sequence[int]) -> int | None:
    """The split a rule picks without a profile, or ``None`` (``"auto"``, ``"sum"``): a
    layer index as given, ``"nosplit"`` 0, ``"freeze"`` ``freeze``, ``"min"`` the layer in
    ``1..freeze`` with the smallest output (``out_bytes[s - 1]``: layer ``s``'s), earliest
    on ties.

    >>> static_split("min", 3, [40, 8, 8, 2]), static_split("auto", 3, [40, 8, 8, 2])
    (2, None)
    """
    if isinstance(rule, int) and not isinstance(rule, bool):
        return rule
    if rule == "nosplit":
        return 0
    if rule == "freeze":
        return freeze
    if rule == "min":
        sizes = list(out_bytes[:freeze])
        return sizes.index(min(sizes)) + 1
    return None


def _pick(cands: tuple[Candidate, ...], rule: str, p: SplitProfile, phi: float = 0.0) -> int:
    ok = [c for c in cands if c.feasible]
    fixed = static_split(rule, p.freeze, [c.out_bytes for c in cands if c.split >= 1])
    if fixed is not None:
        return fixed
    if rule == "sum":  # Neurosurgeon never falls back to NoSplit (paper section 5.4)
        inner = [c for c in ok if c.split >= 1] or [c for c in cands if c.split >= 1]
        return min(inner, key=lambda c: (c.sum_s, -c.split)).split
    if not ok:
        return p.freeze  # the paper: at F the client does least; the user is told
    return min(ok, key=lambda c: (c.epoch_s + phi * c.dollars, -c.split)).split


def choose(p: SplitProfile, batch: int, request: int = 128, rule: str | int = "auto",
           samples: int | None = None, phi: float = 0.0) -> SplitPlan:
    """Estimate every split ``0..F`` and pick one by ``rule``: ``"auto"`` (least epoch time
    with overlap, plus ``phi`` x dollars), ``"sum"`` (NSG), ``"freeze"``, ``"min"`` (the
    smallest output in ``1..F``, earliest on ties), ``"nosplit"``, or a layer index."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InvalidArgumentError(f"batch must be a positive integer, got {batch!r}")
    if isinstance(request, bool) or not isinstance(request, int) or request < 1:
        raise InvalidArgumentError(f"request must be a positive integer, got {request!r}")
    samples = samples or batch
    cands = tuple(estimate(p, s, batch, request, samples) for s in range(p.freeze + 1))
    if isinstance(rule, int) and not isinstance(rule, bool):
        if not 0 <= rule <= p.freeze:
            raise InvalidArgumentError(f"split {rule} is outside 0..{p.freeze} (the frozen "
                                       f"layers {p.names[0]} ... {p.names[p.freeze - 1]})")
        split = rule
        name = str(rule)
    elif rule in RULES:
        split = _pick(cands, str(rule), p, phi)
        name = str(rule)
    else:
        raise InvalidArgumentError(f"split must be one of {', '.join(RULES)} or a layer "
                                   f"index, got {rule!r}")
    return SplitPlan(split, name, cands, batch, request, samples, p, phi)
