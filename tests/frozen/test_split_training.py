"""SplitTrainer, FrozenFeatureDataset and materialize against the in-process server: the
training trajectory equals local training at every split (G2), order survives responses
arriving out of order (G3), failures fall back to local computation with identical results,
a damaged input or other weights stop the job, and ``auto`` profiles epoch 0 and plans."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tessera.errors import (  # noqa: E402
    CorruptDataError,
    FeatureMismatchError,
    InvalidArgumentError,
)
from tessera.frozen.inputs import crop_boxes  # noqa: E402
from tessera.frozen.materialize import materialize  # noqa: E402
from tessera.frozen.remote import FrozenModel  # noqa: E402
from tessera.pushdown.infer_items import Augment  # noqa: E402
from tessera.torch import FrozenFeatureDataset, SplitTrainer  # noqa: E402


def net_of(served: Any, transport: httpx.AsyncBaseTransport | None = None) -> FrozenModel:
    return FrozenModel.from_server(served.client(transport), "r18",
                                   served.models / "r18.safetensors")


def train(net: FrozenModel, served: Any, split: Any, steps: int | None = None,
          batch: int = 8, **kw: Any) -> tuple[SplitTrainer, list[float]]:
    torch.manual_seed(0)
    head = torch.nn.Linear(512, 4)
    tr = SplitTrainer(net, head, freeze="layer4.0", data=served.array, labels=served.labels,
                      batch_size=batch, request_size=4, split=split, **kw)
    opt = torch.optim.SGD(tr.trainable_parameters(), lr=0.01, momentum=0.9)
    losses: list[float] = []
    while steps is None or len(losses) < steps:
        losses += tr.train_epoch(opt, torch.nn.functional.cross_entropy).losses
        if steps is None:
            break
    return tr, losses[:steps] if steps else losses


@pytest.fixture
def local_losses(served: Any) -> list[float]:
    _, losses = train(net_of(served), served, "nosplit", steps=20, batch=4)
    return losses


@pytest.mark.parametrize("split", [1, 4, 8, 11])
def test_twenty_steps_equal_local_training(served: Any, local_losses: list[float],
                                           split: int) -> None:
    tr, losses = train(net_of(served), served, split, steps=20, batch=4, check="always")
    assert len(losses) == 20
    np.testing.assert_allclose(losses, local_losses, rtol=1e-5)  # G2
    assert tr.reports[0].requests == 12 and tr.reports[0].fallbacks == 0


class Delayed(httpx.AsyncBaseTransport):
    """The ASGI app, with the first request of every pair held back so that its answer
    arrives after the second's."""

    def __init__(self, app: Any) -> None:
        self.inner = httpx.ASGITransport(app)
        self.n = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.n += 1
        if request.url.path == "/v1/infer" and self.n % 2 == 1:
            await asyncio.sleep(0.05)
        return await self.inner.handle_async_request(request)


def test_order_is_kept_when_answers_arrive_out_of_order(served: Any,
                                                        local_losses: list[float]) -> None:
    _, losses = train(net_of(served, Delayed(served.app)), served, 8, steps=20, batch=4)
    np.testing.assert_allclose(losses, local_losses, rtol=1e-5)  # G3


class Failing(httpx.AsyncBaseTransport):
    """Refuses connections, or cuts infer responses short, after the first request."""

    def __init__(self, app: Any, how: str) -> None:
        self.inner = httpx.ASGITransport(app)
        self.how = how

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v1/infer":
            return await self.inner.handle_async_request(request)
        if self.how == "down":
            raise httpx.ConnectError("connection refused")
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        return httpx.Response(200, content=body[:len(body) // 2],
                              headers={"content-type": response.headers["content-type"]})


@pytest.mark.parametrize("how", ["down", "reset"])
def test_failures_fall_back_to_local_computation(served: Any, local_losses: list[float],
                                                 how: str) -> None:
    net = FrozenModel.local(net_of(served).spec, served.models)
    net.server = served.client(Failing(served.app, how))
    tr, losses = train(net, served, 8, steps=20, batch=4, check="never")
    np.testing.assert_allclose(losses, local_losses, rtol=1e-5)
    assert tr.reports[0].fallbacks == 12
    # a streamed answer cut in half says how many samples it carried
    assert ("unreachable" if how == "down" else "samples (the streamed answer stopped") in str(
        tr.reports[0].last_error)


def test_a_damaged_input_stops_the_epoch(served: Any) -> None:
    target = max((p for p in (served.root / "imgs").rglob("*") if p.is_file()),
                 key=lambda p: p.stat().st_size)
    raw = bytearray(target.read_bytes())
    for i in range(0, len(raw), 97):
        raw[i] ^= 0xFF
    target.write_bytes(bytes(raw))
    with pytest.raises(CorruptDataError, match="damaged"):
        train(net_of(served), served, 8, check="never")


def test_other_weights_are_refused(served: Any, tmp_path: Path) -> None:
    other = tmp_path / "r18.safetensors"
    other.write_bytes((served.models / "alex.safetensors").read_bytes())
    with pytest.raises(FeatureMismatchError, match="are not the ones"):
        FrozenModel.from_server(served.client(), "r18", other)
    for fleet in (["http://a:1", "http://b:1"], "http://a:1,http://b:1"):
        with pytest.raises(InvalidArgumentError, match="one pushdown server"):
            FrozenModel.from_server(fleet, "r18", other)  # type: ignore[arg-type]


def test_the_feature_check_names_model_split_and_cause(served: Any) -> None:
    net = net_of(served)
    with torch.no_grad():
        net.model.conv1.weight.mul_(1.5)  # the local copy drifted
    with pytest.raises(FeatureMismatchError, match=r"r18 \(resnet18\) at split 8 "
                                                   r"\(layer2.1\).*train mode"):
        train(net, served, 8)


def test_auto_profiles_epoch_zero_then_plans(served: Any) -> None:
    tr, _ = train(net_of(served), served, "auto", batch=8)
    assert tr.plan is not None and tr.profile is not None
    assert len(tr.plan.candidates) == 12 and 0 <= tr.split <= 11
    assert all(t >= 0 for t in tr.profile.server_fwd_s)
    assert "<- chosen" in tr.plan.explain() and "NSG (sum rule) would pick" in tr.plan.explain()
    assert tr.profiler.calibrated_on is not None
    _, times = tr.profiler.calibrated_on  # what the calibration saw, in iteration order
    n = tr.data.shape[0]
    schedule = tr.profiler.schedule(-(-n // 8))
    assert [s for s, _ in times.busy] == schedule
    assert [s for s, _ in times.fetches] == schedule[:n // 8]  # full batches only
    assert all(t > 0 for _, t in times.fetches)
    torch.manual_seed(0)
    opt = torch.optim.SGD(tr.trainable_parameters(), lr=0.01)
    report = tr.train_epoch(opt, torch.nn.functional.cross_entropy)
    assert report.estimate_s is not None and report.split == tr.split


def test_pipelined_epochs_time_each_fetch_and_the_full_pipeline() -> None:
    from tessera.frozen.profile import run_pipelined

    batches = [[0, 1], [2, 3], [4, 5], [6, 7], [8]]
    schedule = [3, 3, 3, 0, 0]
    seen: list[tuple[int, int]] = []

    def fetch(batch: list[int], split: int) -> list[int]:
        return [x * 10 for x in batch]

    def compute(i: int, fetched: list[int]) -> None:
        seen.append((i, fetched[0]))

    times = run_pipelined(batches, schedule, 1, fetch, compute)
    assert seen == [(0, 0), (1, 20), (2, 40), (3, 60), (4, 80)]  # in order, each fetched
    assert [s for s, _ in times.busy] == schedule
    assert [s for s, _ in times.fetches] == [3, 3, 3, 0]  # the short last batch left out
    assert [s for s, _ in times.durations] == [3]  # two before at the same split: only i=2
    assert times.wait >= 0 and all(t >= 0 for _, t in times.fetches)


def test_bad_arguments(served: Any) -> None:
    net = net_of(served)
    for kw, words in [({"freeze": "fc"}, "leaves nothing to train"),
                      ({"freeze": "nope"}, "no layer 'nope'"),
                      ({"split": 12}, "split 12 is outside 0..11"),
                      ({"split": "fast"}, "split must be"),
                      ({"labels": [1, 2]}, "one class per sample"),
                      ({"batch_size": 0}, "batch_size must be"),
                      ({"pushdown": ["http://a:1", "http://b:1"]}, "one pushdown server"),
                      ({"pushdown": "http://a:1,http://b:1"}, "fleets of servers")]:
        args: dict[str, Any] = dict(freeze="layer4.0", data=served.array, labels=served.labels)
        args.update(kw)
        with pytest.raises(InvalidArgumentError, match=words):
            SplitTrainer(net, **args)


def test_feature_dataset_and_materialize(served: Any, tmp_path: Path) -> None:
    net = net_of(served)
    ds = FrozenFeatureDataset(net, served.array, "layer2.1", labels=served.labels,
                              request_size=5)
    items = ds.__getitems__([7, 2, 30])
    local = net.local_features(served.stored[[7, 2, 30]], 8)
    assert torch.allclose(torch.stack([f for f, _ in items]), local, rtol=0, atol=1e-5)
    assert [y for _, y in items] == served.labels[[7, 2, 30]].tolist() and ds.fallbacks == 0
    seen: list[int] = []
    out, local_chunks = materialize(net, served.array, "layer2.1", (tmp_path / "f").as_uri(),
                                    chunk=20, progress=lambda d, n: seen.append(d))
    assert out.shape == (48, 128, 4, 4) and seen == [20, 40, 48] and local_chunks == 0
    np.testing.assert_allclose(out[[7, 2, 30]], local.numpy(), rtol=0, atol=1e-5)


def test_emulated_compute_profiles_the_emulated_times(served: Any, make_app: Any,
                                                      tmp_path: Path) -> None:
    from tessera.frozen.emulate import Emulation, ModelTimes

    emu = Emulation({"r18": ModelTimes(tuple(0.0005 * (k + 1) for k in range(14)), 0.0,
                                       0.001)})
    emu.save(tmp_path / "emu.json")
    app = make_app(served.root, served.models, emulate_compute=str(tmp_path / "emu.json"))
    net = FrozenModel.from_server(served.client(httpx.ASGITransport(app)), "r18",
                                  served.models / "r18.safetensors")
    tr, losses = train(net, served, "auto", batch=8, emulate=emu)
    assert losses == [0.0] * 6 and tr.profile is not None
    # the server reports exactly the emulated per-layer seconds (profiled at s = F)
    np.testing.assert_allclose(tr.profile.server_fwd_s, emu.models["r18"].forward_s[:11])
    # the client's sleeps are at least the emulated seconds
    assert all(m >= e for m, e in zip(tr.profile.client_fwd_s[:11],
                                      emu.models["r18"].forward_s[:11], strict=True))


def test_the_trainer_prices_its_plan_and_phi_counts(served: Any) -> None:
    tr, _ = train(net_of(served), served, "auto", batch=8)
    assert tr.profile is not None and not tr.profile.priced  # a folder store's: free
    measured = tr.profile
    costly, _ = train(net_of(served), served, "auto", batch=8, profile=measured,
                      pricing="s3", phi=1e9)
    assert costly.profile is not None and costly.profile.priced and costly.plan is not None
    assert costly.plan.phi == 1e9
    feasible = [c for c in costly.plan.candidates if c.feasible]
    assert costly.plan.candidate(costly.split).dollars == min(c.dollars for c in feasible)
    assert "$/epoch" in costly.plan.explain()
    with pytest.raises(Exception, match="pricing"):
        SplitTrainer(net_of(served), freeze="layer4.0", data=served.array,
                     labels=served.labels, pricing="nowhere")


class Busy(httpx.AsyncBaseTransport):
    """Answers the first ``times`` infer requests 503 with ``Retry-After: 0``, as a server
    whose slots are all taken does; then serves them."""

    def __init__(self, app: Any, times: int) -> None:
        self.inner = httpx.ASGITransport(app)
        self.times = times
        self.turned_away = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/infer" and self.turned_away < self.times:
            self.turned_away += 1
            return httpx.Response(503, json={"error": "busy: every slot is taken"},
                                  headers={"retry-after": "0"})
        return await self.inner.handle_async_request(request)


def test_a_busy_server_is_asked_again_as_its_retry_after_says(served: Any) -> None:
    from tessera.frozen.remote import features_of

    busy = Busy(served.app, times=2)
    net = net_of(served, busy)
    feats, error = features_of(net, served.array, [3, 1, 4], 8, net.server, request_size=5)
    assert error is None and busy.turned_away == 2  # one request, two busy answers, served
    local = net.local_features(served.stored[[3, 1, 4]], 8)
    assert torch.allclose(feats, local, rtol=0, atol=1e-5)
    # Busy past the storage layer's attempts (4 by default): computed here, the error said.
    busy = Busy(served.app, times=10)
    net = net_of(served, busy)
    feats, error = features_of(net, served.array, [3, 1, 4], 8, net.server, request_size=5)
    assert busy.turned_away == 4 and error is not None and "503" in error
    assert torch.allclose(feats, local, rtol=0, atol=1e-5)
    # The trainer asks the same way: a server busy at first serves the whole epoch.
    busy = Busy(served.app, times=3)
    tr, _ = train(net_of(served, busy), served, 8, steps=2, batch=4, check="never")
    assert busy.turned_away == 3 and tr.reports[0].fallbacks == 0


def test_profiling_a_split_refuses_what_it_cannot_profile(served: Any) -> None:
    from tessera.frozen.profile import profile_split

    net = net_of(served)
    last = len(net.layers)
    with pytest.raises(InvalidArgumentError, match=f"freeze {last} leaves nothing to train"):
        profile_split(net, served.array, last, samples=8)
    local = FrozenModel.local(net.spec, served.models)
    with pytest.raises(InvalidArgumentError, match="needs its pushdown server"):
        profile_split(local, served.array, 8, samples=8)


def test_seeded_augmentation_trains_as_it_would_here(served: Any) -> None:
    """Each epoch's crops and flips, made by the server for split 4 (each request checked
    against features computed here from the same crops) and by this process for NoSplit,
    give the same trajectory; epochs see other crops; crops that do not fit are refused."""
    aug = Augment(3, (24, 24))
    here, here_losses = train(net_of(served), served, "nosplit", steps=8, batch=4,
                              augment=aug, check="never")
    there, losses = train(net_of(served), served, 4, steps=8, batch=4, augment=aug,
                          check="always")
    np.testing.assert_allclose(losses, here_losses, rtol=1e-5)
    assert all(r.checked is not None for r in there.reports) and there.reports[0].fallbacks == 0
    _, plain_losses = train(net_of(served), served, "nosplit", steps=8, batch=4)
    assert not np.allclose(plain_losses, here_losses)  # the crops changed what was trained
    size = served.stored.shape[-1]
    first, second = (crop_boxes(range(8), (3, size, size), here.net.spec.input, None,
                                aug.for_epoch(e)) for e in (0, 1))
    assert first != second
    with pytest.raises(InvalidArgumentError, match="larger than the stored samples"):
        train(net_of(served), served, 4, steps=1, augment=Augment(3, (size + 1, 8)))
