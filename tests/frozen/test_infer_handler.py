"""``POST /v1/infer`` in-process: features equal local computation (G1), the limits and the
fault table of the spec (section 6.3), each with its status and message, metrics and info."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tessera.frozen.emulate import Emulation, ModelTimes  # noqa: E402
from tessera.frozen.manifest import read_manifest  # noqa: E402
from tessera.frozen.remote import FrozenModel  # noqa: E402
from tessera.pushdown.framing import decode_response  # noqa: E402
from tessera.pushdown.infer_items import (  # noqa: E402
    Augment,
    InferHeader,
    InferRequest,
    encode_infer_request,
)


def post(app: Any, body: bytes | list[bytes]) -> list[httpx.Response]:
    bodies = body if isinstance(body, list) else [body]

    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app),
                                     base_url="http://p") as c:
            return list(await asyncio.gather(*(c.post("/v1/infer", content=b)
                                               for b in bodies)))

    return asyncio.run(go())


def req(**kw: Any) -> bytes:
    base: dict[str, Any] = dict(model="r18", split=8, array="imgs", samples=(3, 1, 5))
    base.update(kw)
    return encode_infer_request(InferRequest(**base))


@pytest.mark.parametrize("split", range(1, 14))
def test_features_equal_local_computation_at_every_split(served: Any, split: int) -> None:
    [r] = post(served.app, req(split=split, cos_batch=2))
    assert r.status_code == 200, r.text
    got = decode_response(r.content, 1)
    feats = got.results[0]["features"]
    net = FrozenModel.local(read_manifest(served.models)[0], served.models)
    ref = net.local_features(served.stored[[3, 1, 5]], split)
    assert net.compare(feats, ref, split) <= 1e-4  # G1
    assert got.extra["cos_batch_used"] == 2 and got.extra["model_cache"] in ("hit", "miss")
    assert set(got.extra["phases"]) == {"queue", "read", "load", "prep", "forward", "copy"}
    header = InferHeader.from_extra(got.extra)  # the one codec, both ways
    assert header.cos_batch_used == 2 and header.layers is None
    assert header.to_json() == {k: got.extra[k] for k in header.to_json()}


def test_per_layer_timings_and_fp16(served: Any) -> None:
    [r] = post(served.app, req(timings="layers", output_dtype="<f2"))
    got = decode_response(r.content, 1)
    assert len(got.extra["layers"]) == 8
    assert len(InferHeader.from_extra(got.extra).layers or []) == 8
    assert got.results[0]["features"].dtype == np.float16


def test_features_stream_in_pieces_with_their_length(served: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tessera.server import framed

    body = req(split=1, samples=tuple(range(40)))  # 40 x 64 x 16 x 16 float32: 2.5 MiB
    [whole] = post(served.app, body)
    sent: list[int] = []
    pieces = framed.pieces

    def spy(chunks: Any) -> Any:
        for piece in pieces(chunks):
            sent.append(len(piece))
            yield piece

    monkeypatch.setattr(framed, "pieces", spy)
    [r] = post(served.app, body)
    assert r.status_code == 200
    assert int(r.headers["content-length"]) == len(r.content) == sum(sent)
    assert max(sent) == framed.PIECE_BYTES and len(sent) >= 3
    got = decode_response(r.content, 1).results[0]["features"]
    assert np.array_equal(got, decode_response(whole.content, 1).results[0]["features"])


def test_model_cache_hits_after_the_first_request(served: Any) -> None:
    first, second = post(served.app, req()), post(served.app, req(split=4))
    assert decode_response(first[0].content, 1).extra["model_cache"] == "miss"
    assert decode_response(second[0].content, 1).extra["model_cache"] == "hit"


@pytest.mark.parametrize("body, status, words", [
    (req(model="resnet19"), 404, "no model 'resnet19'; this server hosts: alex, r18"),
    (req(split=14), 400, "split 14 is outside 1..13 for r18 (layers: conv1 ... avgpool)"),
    (req(weights_sha256="9" * 64), 409, "!= client's 999999999999"),
    (req(array="../secret"), 403, "input.array"),
    (req(samples=tuple(range(600))), 413, "600 samples in one infer request"),
    (req(samples=(99,)), 422, "samples [99] are outside 0..47"),
    (req(array="nothing-here"), 422, "input.array 'nothing-here'"),
    (req().replace(b'"split"', b'"state_dict":{},"split"'), 400, "unknown field(s) 'state_dict'"),
    (req(model="alex", split=3), 422, "takes samples of (3, 64, 64)"),
])
def test_fault_table(served: Any, body: bytes, status: int, words: str) -> None:
    [r] = post(served.app, body)
    assert r.status_code == status, r.text
    assert words in r.json()["error"]


def test_output_and_memory_limits(served: Any, make_app: Any) -> None:
    app = make_app(served.root, served.models, max_output_bytes=200_000,
                   infer_memory_bytes=100_000)
    [r] = post(app, req(split=1, samples=tuple(range(8))))
    assert r.status_code == 413
    assert "at split 1 at most 3 samples fit" in r.json()["error"]  # 64 KiB per sample
    [r] = post(app, req(split=1, samples=(1,)))  # 2 x (12 + 64) KiB per sample > 100 kB
    assert r.status_code == 413 and "0.1 MiB per sample" in r.json()["error"]
    [r] = post(app, req(split=8, samples=(1,)))  # every split runs conv1 first
    assert r.status_code == 413


def test_busy_server_answers_503_with_retry_after(served: Any, make_app: Any,
                                                  tmp_path: Path) -> None:
    spec = read_manifest(served.models)[0]
    emu = tmp_path / "emu.json"
    Emulation({spec.name: ModelTimes((0.5,) * 14)}).save(emu)  # 0.5 s per sample per layer
    app = make_app(served.root, served.models, infer_concurrency=1, infer_queue=0,
                   emulate_compute=str(emu))
    first, second = post(app, [req(split=1, samples=(1,)), req(split=1, samples=(2,))])
    assert sorted([first.status_code, second.status_code]) == [200, 503]
    busy = first if first.status_code == 503 else second
    assert busy.headers["retry-after"] == "1" and "busy computing" in busy.json()["error"]


def test_emulated_compute_sends_real_bytes(served: Any, make_app: Any, tmp_path: Path) -> None:
    emu = tmp_path / "emu.json"
    Emulation({"r18": ModelTimes((0.001,) * 14)}).save(emu)
    app = make_app(served.root, served.models, emulate_compute=str(emu))
    [r] = post(app, req(split=4))
    feats = decode_response(r.content, 1).results[0]["features"]
    assert feats.shape == (3, 64, 8, 8) and not feats.any()


@pytest.mark.parametrize("stream", [False, True])
def test_damaged_input_is_422_naming_the_tile(served: Any, stream: bool) -> None:
    """Streamed or not: the samples are read before the answer starts, so a damaged input
    is a 422, not a stream cut short."""
    data = [p for p in (served.root / "imgs").rglob("*") if p.is_file()
            and p.stat().st_size > 10_000]
    target = max(data, key=lambda p: p.stat().st_size)
    raw = bytearray(target.read_bytes())
    for i in range(0, len(raw), 97):
        raw[i] ^= 0xFF
    target.write_bytes(bytes(raw))
    [r] = post(served.app, req(samples=tuple(range(48)), stream=stream))
    assert r.status_code == 422 and "damaged" in r.json()["error"]


def test_info_lists_models_and_metrics_count(served: Any) -> None:
    async def go() -> tuple[dict[str, Any], str]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(served.app),
                                     base_url="http://p") as c:
            await c.post("/v1/infer", content=req())
            info = (await c.get("/v1/info")).json()
            return info, (await c.get("/metrics")).text

    info, metrics = asyncio.run(go())
    assert info["handlers"] == ["read", "infer"]
    r18 = next(m for m in info["models"] if m["name"] == "r18")
    assert r18["layers"][10] == ["layer4.0", [512, 1, 1]] and r18["max_split"] == 13
    assert "tessera_infer_samples_total 3" in metrics
    assert "tessera_infer_seconds_count 1" in metrics
    assert json.dumps(info)  # plain JSON


def test_a_server_without_models_has_no_infer_route(served: Any) -> None:
    import tessera
    from tessera.server.app import create_app

    app = create_app(tessera.open_store(served.root.as_uri()), token=None)
    [r] = post(app, req())
    assert r.status_code == 404


class Fussy:
    """A model whose forward pass runs out of memory above 2 samples at once."""

    def forward_to(self, x: Any, split: int) -> Any:
        if x.shape[0] > 2:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to "
                               "allocate 1000000000000 bytes")
        return x * 2

    def layers(self) -> list[Any]:
        return [("double", lambda x: x * 2)]


def test_the_server_batch_halves_on_allocation_failure(served: Any, make_app: Any) -> None:
    from tessera.pushdown.infer_items import InferRequest
    from tessera.server.infer import InferService

    service = InferService(tessera_store(served), make_config(served))
    x = torch.ones(7, 3)
    got = list(service.forward_batches(Fussy(), x, InferRequest("r18", 1, "imgs", (0,)), 16))
    assert [used for _, used in got] == [2, 2, 2, 2]  # 16 -> 8 -> 4 -> 2, then 2 at a time
    assert torch.equal(torch.cat([h for h, _ in got]), x * 2)

    class Broke(Fussy):
        def forward_to(self, x: Any, split: int) -> Any:
            raise RuntimeError("can't allocate memory")

    from tessera.errors import ServerBusyError

    with pytest.raises(ServerBusyError, match="even at a server batch of 1"):
        list(service.forward_batches(Broke(), x, InferRequest("r18", 1, "imgs", (0,)), 16))


def tessera_store(served: Any) -> Any:
    import tessera

    return tessera.open_store(served.root.as_uri())


def make_config(served: Any) -> Any:
    from tessera.config import ServerConfig

    return ServerConfig(models_dir=str(served.models))


def test_weights_replaced_after_start_are_hashed_again_and_refused(served: Any,
                                                                   make_app: Any,
                                                                   tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "models"
    shutil.copytree(served.models, folder)
    app = make_app(served.root, folder, model_cache_bytes=0)
    [r] = post(app, req())
    assert r.status_code == 200
    (folder / "r18.safetensors").write_bytes((folder / "alex.safetensors").read_bytes())
    [r] = post(app, req())
    assert r.status_code == 409 and "changed on disk since it started" in r.json()["error"]
    assert "r18.safetensors has sha256" in r.json()["error"]


def test_serving_leaves_the_callers_floating_point_mode_alone(served: Any, make_app: Any) -> None:
    """Regression: the service once flushed subnormals process-wide at start, which broke
    every later hypothesis test in the same process (``allow_subnormal`` refused)."""
    from tessera.pushdown.infer_items import InferRequest
    from tessera.server.infer import InferService

    tiny = np.array([1e-40], dtype=np.float32)
    service = InferService(tessera_store(served), make_config(served))
    list(service.forward_batches(Fussy(), torch.ones(2, 3), InferRequest("r18", 1, "imgs", (0,)),
                                 16))
    assert (tiny * 1)[0] != 0
    [r] = post(make_app(served.root, served.models), req())
    assert r.status_code == 200 and (tiny * 1)[0] != 0


@pytest.mark.parametrize("split", [1, 8])
def test_streamed_features_equal_whole_ones_and_local_computation(served: Any,
                                                                  split: int) -> None:
    """A streamed answer: one record per sample, in server batches of 2; the same features
    and header keys as the whole answer, and as computing here."""
    from tessera.pushdown.framing import StreamDecoder

    samples = (3, 1, 5, 0, 2)
    [whole] = post(served.app, req(split=split, samples=samples, cos_batch=2))
    [streamed] = post(served.app, req(split=split, samples=samples, cos_batch=2, stream=True))
    assert streamed.status_code == 200 and streamed.content[:4] == b"TSPS"
    dec = StreamDecoder(len(samples))
    arrived = [i for i, _ in dec.feed(streamed.content)]
    assert arrived == list(range(len(samples))) and dec.ended  # in sample order, batch by batch
    done = dec.finish()
    feats = np.stack([r["features"] for r in done.results])
    want = decode_response(whole.content, 1)
    assert np.array_equal(feats, want.results[0]["features"])
    net = FrozenModel.local(read_manifest(served.models)[0], served.models)
    assert net.compare(feats, net.local_features(served.stored[list(samples)], split),
                       split) <= 1e-4
    header = InferHeader.from_extra(done.extra)
    assert header.cos_batch_used == 2 and set(header.phases) == set(want.extra["phases"])


def test_the_client_gathers_a_streamed_answer(served: Any) -> None:
    import dataclasses

    from tessera.pushdown.framing import ReadResponse

    client = served.client()
    request = InferRequest("r18", 4, "imgs", (2, 0, 4), cos_batch=2)
    whole: ReadResponse = asyncio.run(client.infer(request))
    got: ReadResponse = asyncio.run(client.infer(dataclasses.replace(request, stream=True)))
    assert np.array_equal(got.results[0]["features"], whole.results[0]["features"])
    assert got.extra["cos_batch_used"] == 2 and got.server_s > 0


def test_a_streamed_answer_that_stops_early_is_a_pushdown_error(
        served: Any, make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's forward pass fails after the first batch (the status is sent): the
    client names how many samples came; the slots are given back (one compute slot and no
    queue: a slot kept by the failed stream would turn the next request away with 503)."""
    from tessera.errors import PushdownError
    from tessera.pushdown.client import PushdownClient
    from tessera.server.infer import InferService

    app = make_app(served.root, served.models, infer_concurrency=1, infer_queue=0)
    real = InferService.forward_batches

    def failing(self: Any, *args: Any, **kw: Any) -> Any:
        for k, got in enumerate(real(self, *args, **kw)):
            if k == 1:
                raise RuntimeError("the device went away")
            yield got

    monkeypatch.setattr(InferService, "forward_batches", failing)
    client = PushdownClient("http://pushdown", token="", transport=httpx.ASGITransport(app))
    request = InferRequest("r18", 4, "imgs", (2, 0, 4, 1), cos_batch=2, stream=True)
    with pytest.raises(PushdownError, match="carried 2 of 4 samples"):
        asyncio.run(client.infer(request))
    state = app.state.pushdown
    assert (state.in_flight, state.active) == (0, 0)
    monkeypatch.setattr(InferService, "forward_batches", real)
    [again] = post(app, req(samples=(1,), stream=True))
    assert again.status_code == 200


SIZE = 32  # the r18 test model's input (conftest)


def _remote(served: Any) -> FrozenModel:
    net = FrozenModel.local(read_manifest(served.models)[0], served.models)
    net.server = served.client()
    return net


@pytest.mark.parametrize("split", [2, 8])
def test_region_inputs_equal_local_computation_on_the_same_crops(served: Any,
                                                                 split: int) -> None:
    """Crops of different sizes, resized to the model's input on the server, give the
    features the client computes from the same crops; a full-size region is the whole
    sample, exactly."""
    net = _remote(served)
    samples = [3, 1, 5]
    regions = ((2, 3, 20, 24), (0, 0, SIZE, SIZE), (10, 4, 22, 9))
    got = asyncio.run(net.remote_features("imgs", samples, split, regions=regions)).features
    local = net.local_crop_features(served.array, samples, split, regions=regions)
    assert net.compare(got, local, split) <= 1e-4
    whole = asyncio.run(net.remote_features("imgs", samples, split)).features
    assert np.array_equal(got[1], whole[1]) and not np.allclose(got[0], whole[0])


@pytest.mark.parametrize("split", [2, 8])
def test_seeded_augmentation_is_reproduced_here(served: Any, split: int) -> None:
    """Random crops and flips drawn per sample from (seed, sample): the server's features
    equal the client's on the same seed; another seed gives other features."""
    net = _remote(served)
    samples = [0, 7, 9, 2]
    aug = Augment(seed=11, crop=(24, 24))
    got = asyncio.run(net.remote_features("imgs", samples, split, augment=aug)).features
    local = net.local_crop_features(served.array, samples, split, augment=aug)
    assert net.compare(got, local, split) <= 1e-4
    draws = [aug.draw(s, SIZE, SIZE) for s in samples]
    assert len({d[2] for d in draws}) == 2  # some flipped, some not (seeded: always so)
    other = asyncio.run(net.remote_features("imgs", samples, split,
                                            augment=Augment(12, (24, 24)))).features
    assert not np.allclose(got, other)


@pytest.mark.parametrize("change, status, words", [
    ({"regions": ((0, 0, 40, 8),) * 3}, 422, "outside its 32 x 32"),
    ({"regions": ((0, 0, 8, 8),)}, 400, "one [top, left, height, width] per sample"),
    ({"augment": Augment(1, (99, 99))}, 422, "larger than the stored samples"),
    ({"regions": ((0, 0, 8, 8),) * 3, "augment": Augment(1, (8, 8))}, 400,
     "exclude each other"),
])
def test_bad_crops_are_refused_naming_what_is_wrong(served: Any, change: dict[str, Any],
                                                     status: int, words: str) -> None:
    [r] = post(served.app, req(**change))
    assert r.status_code == status and words in r.json()["error"], r.text
