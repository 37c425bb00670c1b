"""Distributed data-parallel training over Tessera data: one process per rank (PyTorch DDP,
the gloo backend, so it runs on CPUs), each reading only its share of an image-column set
and of a tensor table through :class:`tessera.torch.DistributedGroupSampler`.

    python examples/ddp_train.py IMAGES_URL TABLE_URL [--world 2] [--epochs 1]

(``IMAGES_URL`` an image set with labels, ``TABLE_URL`` a tensor table holding a 2-D tensor
``x``; storage options from the environment, e.g. ``AWS_ENDPOINT_URL``.) Each rank writes
what it read, its requests and data bytes per epoch and the weights it ended with to ``--out``
(``rank<N>.pt``, tensors only).
``tests/integrations/test_ddp.py`` runs it on the S3 test server and checks that the ranks
read disjoint groups that together are every sample once per epoch, and that the weights
equal a single process's trained over the same global batches.

The models are deliberately small (a linear layer on reduced-resolution pixels, and one on
a tensor's rows); what matters is the data path: each rank's DataLoader reads whole groups
that no other rank reads, and one seed gives every rank the same order of groups.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import BatchSampler, DataLoader

import tessera
from tessera.torch import DistributedGroupSampler, FrequencyDataset, TensorTableDataset


@dataclasses.dataclass(frozen=True)
class Job:
    """What every rank trains on."""

    images_url: str
    table_url: str
    storage_options: dict[str, str]
    epochs: int = 1
    batch: int = 4
    lr: float = 0.05
    seed: int = 0
    scale: float = 0.25  # images read at a quarter of their size


def datasets(job: Job) -> list[tuple[str, Any]]:
    """The two phases' datasets: image columns (pixels, with labels) and a table's rows."""
    images = FrequencyDataset(job.images_url, k=8, scale=job.scale,
                              storage_options=job.storage_options)
    rows = TensorTableDataset(job.table_url, ids=["x"], storage_options=job.storage_options)
    return [("images", images), ("table", rows)]


def model(shape: tuple[int, ...]) -> nn.Module:
    """The same initial model on every rank (seeded): a linear layer on a sample's values."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(shape), 1))


def sample_shape(name: str, dataset: Any) -> tuple[int, ...]:
    """A sample's shape, from the data's bookkeeping (reading a sample here would fetch
    its group on every rank)."""
    if name == "images":
        h, w = dataset.columns.size
        return (3, round(h * dataset.scale), round(w * dataset.scale))
    return tuple(dataset.table["x"].shape[1:])


def inputs(dataset_name: str, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, target)`` of a collated batch: images regress their label from pixels, table
    rows their own sum."""
    if dataset_name == "images":
        x, y = batch
        return x.float() / 255.0, y.float().reshape(-1, 1)
    return batch, batch.sum(dim=1, keepdim=True)


def rank_batches(dataset: Any, job: Job, world: int, rank: int, epoch: int) -> list[list[int]]:
    """The positions of each of ``rank``'s batches in ``epoch``."""
    sampler = DistributedGroupSampler(dataset, num_replicas=world, rank=rank,
                                                  seed=job.seed)
    sampler.set_epoch(epoch)
    return [list(b) for b in BatchSampler(sampler, job.batch, drop_last=False)]


def train_rank(rank: int, world: int, port: int, job: Job, out: str) -> None:
    """One rank's training (the target of ``torch.multiprocessing.spawn``)."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        results: dict[str, Any] = {}
        for name, dataset in datasets(job):
            net = model(sample_shape(name, dataset))
            ddp = DistributedDataParallel(net)
            opt = torch.optim.SGD(ddp.parameters(), lr=job.lr)
            seen: list[int] = []
            requests, received = [], []
            for epoch in range(job.epochs):
                batches = rank_batches(dataset, job, world, rank, epoch)
                loader = DataLoader(dataset, batch_sampler=batches)
                with tessera.collect_stats() as stats:
                    for positions, batch in zip(batches, loader, strict=True):
                        x, target = inputs(name, batch)
                        loss = nn.functional.mse_loss(ddp(x), target)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                        seen += positions
                requests.append(stats.requests)
                # data bytes: range requests (the first epoch also gets the bookkeeping)
                data = stats.by_method.get("range")
                received.append(0 if data is None else data.bytes_received)
            results[name] = {"seen": torch.tensor(seen), "requests": torch.tensor(requests),
                             "bytes": torch.tensor(received),
                             "weights": {k: v.detach().clone()
                                         for k, v in net.state_dict().items()}}
        torch.save(results, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def replay(job: Job, world: int) -> dict[str, dict[str, torch.Tensor]]:
    """The weights one process gets training on the same global batches (each step: every
    rank's batch of that step together), which DDP's averaged gradients must equal."""
    out = {}
    for name, dataset in datasets(job):
        net = model(sample_shape(name, dataset))
        opt = torch.optim.SGD(net.parameters(), lr=job.lr)
        for epoch in range(job.epochs):
            per_rank = [rank_batches(dataset, job, world, r, epoch) for r in range(world)]
            for step in zip(*per_rank, strict=True):
                parts = [inputs(name, next(iter(DataLoader(dataset, batch_sampler=[b]))))
                         for b in step]
                x = torch.cat([p[0] for p in parts])
                target = torch.cat([p[1] for p in parts])
                loss = nn.functional.mse_loss(net(x), target)
                opt.zero_grad()
                loss.backward()
                opt.step()
        out[name] = {k: v.detach().clone() for k, v in net.state_dict().items()}
    return out


def spawn(job: Job, world: int, port: int, out: str) -> None:
    """Run ``world`` ranks on this machine (``spawn``: obstore and delta-rs do not survive
    ``fork``)."""
    torch.multiprocessing.spawn(train_rank, args=(world, port, job, out), nprocs=world,
                                join=True)


def _iter_env_options() -> Iterator[tuple[str, str]]:
    for key in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY", "AWS_ALLOW_HTTP"):
        if key in os.environ:
            yield key.removeprefix("AWS_").lower(), os.environ[key]


def main() -> None:
    from tessera.testing.pushdown import free_port

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("images_url")
    parser.add_argument("table_url")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    job = Job(args.images_url, args.table_url, dict(_iter_env_options()), epochs=args.epochs)
    spawn(job, args.world, free_port(), args.out)
    print(f"wrote {args.out}/rank0.pt .. rank{args.world - 1}.pt")


if __name__ == "__main__":
    main()
