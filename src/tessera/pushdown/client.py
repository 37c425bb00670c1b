"""The client of the pushdown server: an ``httpx`` async client with connection pooling, used
by the read executor. Every failure (connection refused or reset, timeout, a status other
than 200, a malformed answer) raises :class:`~tessera.errors.PushdownError`, on which the
executor fetches those tiles itself.

>>> client = PushdownClient("http://127.0.0.1:8700", token="t" * 16)
>>> client.url
'http://127.0.0.1:8700'
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np

from tessera.config import PushdownConfig
from tessera.errors import ProtocolError, PushdownError
from tessera.pushdown.framing import (
    PROTOCOL_VERSION,
    ItemError,
    ItemResult,
    ReadResponse,
    StreamDecoder,
    decode_response,
    is_streamed,
)
from tessera.pushdown.infer_items import InferRequest, encode_infer_request
from tessera.pushdown.read_items import ReadItem, encode_read_request
from tessera.storage.stats import RequestRecord
from tessera.storage.url import StoreURL, parse_store_url

log = logging.getLogger("tessera.pushdown")


class PushdownClient:
    """Talks to one pushdown server.

    Args:
        url: ``http://host:port`` of the server.
        token: its bearer token (default: ``TESSERA_PUSHDOWN_TOKEN``).
        config: timeouts and batch sizes (default: ``TESSERA_PUSHDOWN_*``).
        transport: an ``httpx`` transport to use instead of the network (tests mount the
            ASGI app in-process with ``httpx.ASGITransport``).

    >>> import numpy as np, tessera
    >>> client = PushdownClient("http://127.0.0.1:8700", token="s3cret-token-123456")
    >>> arr = tessera.from_numpy("memory://doc-pushdown-client", np.zeros(4))
    >>> arr.pushdown = client  # reads may now send pushdowns to that server
    >>> arr.pushdown is client
    True
    """

    def __init__(self, url: str, token: str | None = None, *,
                 config: PushdownConfig | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        base = config or PushdownConfig.from_env()
        self.config = dataclasses.replace(
            base, url=url.rstrip("/"), token=(base.token if token is None else token).strip())
        self.url = self.config.url
        self._transport = transport
        self._clients: dict[int, httpx.AsyncClient] = {}  # one per event loop
        self._info: dict[str, Any] | None = None
        self._down_until = 0.0

    #: After a server could not be reached, seconds during which the client does not try it
    #: again (reads plan without pushdown meanwhile instead of waiting on it every time).
    RETRY_AFTER_DOWN_S = 10.0

    @property
    def available(self) -> bool:
        """False for a while after the server could not be reached."""
        return time.monotonic() >= self._down_until

    def __repr__(self) -> str:
        return f"PushdownClient({self.url!r})"

    def _client(self) -> httpx.AsyncClient:
        loop = id(asyncio.get_running_loop())
        client = self._clients.get(loop)
        if client is None:
            headers = {"Authorization": f"Bearer {self.config.token}"} if self.config.token \
                else {}
            client = self._clients[loop] = httpx.AsyncClient(
                base_url=self.url, headers=headers, transport=self._transport,
                timeout=httpx.Timeout(self.config.timeout_s, connect=min(5.0,
                                                                         self.config.timeout_s)),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))
        return client

    async def aclose(self) -> None:
        """Close the pooled connections of the running loop's client."""
        client = self._clients.pop(id(asyncio.get_running_loop()), None)
        if client is not None:
            await client.aclose()

    def _mark_down(self) -> None:
        """Leave this server out for :attr:`RETRY_AFTER_DOWN_S` (it could not be reached, or
        did not answer within ``timeout_s``)."""
        self._down_until = time.monotonic() + self.RETRY_AFTER_DOWN_S

    def _deadline(self) -> float:
        """The event loop's time by which a call starting now must be answered whole."""
        return asyncio.get_running_loop().time() + self.config.timeout_s

    def _too_slow(self, path: str) -> PushdownError:
        self._mark_down()
        return PushdownError(f"pushdown server {self.url}{path} did not answer within "
                             f"timeout_s={self.config.timeout_s:g} s; left out for "
                             f"{self.RETRY_AFTER_DOWN_S:g} s")

    async def _send(self, method: str, path: str, stream: bool = False,
                    deadline: float | None = None, **kw: Any) -> httpx.Response:
        """The server's 200 response (with ``stream``, its body not read yet: the caller
        reads and closes it; without, read whole) by ``deadline`` (default: ``timeout_s``
        from now); else a :class:`~tessera.errors.PushdownError`. A server that cannot be
        reached or misses the deadline is left out for a while (:attr:`available`)."""
        if not self.available:
            raise PushdownError(f"pushdown server {self.url} was unreachable moments ago; "
                                f"trying again after {self.RETRY_AFTER_DOWN_S:g} s")
        try:
            async with asyncio.timeout_at(self._deadline() if deadline is None else deadline):
                client = self._client()
                response = await client.send(client.build_request(method, path, **kw),
                                             stream=stream)
                if stream and response.status_code != 200:
                    await response.aread()
                    await response.aclose()
        except TimeoutError:
            raise self._too_slow(path) from None
        except httpx.HTTPError as err:
            if isinstance(err, (httpx.ConnectError, httpx.TimeoutException)):
                self._mark_down()
            raise PushdownError(f"pushdown server {self.url}: {type(err).__name__}: "
                                f"{err or 'no answer'}") from None
        if response.status_code != 200:
            try:
                detail = response.json().get("error", response.text)
            except ValueError:
                detail = response.text[:200]
            raise PushdownError(f"pushdown server {self.url}{path} answered "
                                f"{response.status_code}: {detail}", response.status_code,
                                _retry_after(response.headers.get("retry-after")))
        return response

    async def info(self) -> dict[str, Any]:
        """The server's ``/v1/info`` (fetched once)."""
        if self._info is None:
            try:
                info = (await self._send("GET", "/v1/info")).json()
            except ValueError:
                raise PushdownError(f"pushdown server {self.url}: /v1/info is not JSON") \
                    from None
            if not isinstance(info, dict) or info.get("protocol") != PROTOCOL_VERSION:
                raise PushdownError(f"pushdown server {self.url} speaks protocol "
                                    f"{info.get('protocol') if isinstance(info, dict) else '?'}"
                                    f", this client {PROTOCOL_VERSION}")
            self._info = info
        return self._info

    async def array_path(self, array_url: StoreURL) -> str:
        """Where the array at ``array_url`` lies below the server's root; raises
        :class:`~tessera.errors.PushdownError` when the server does not serve it."""
        root = parse_store_url(str((await self.info()).get("root", "")))
        path = relative_path(root, array_url)
        if path is None:
            raise PushdownError(f"pushdown server {self.url} serves {root}, which does not "
                                f"hold the array at {array_url}")
        return path

    async def read(self, items: list[ReadItem],
                   record: Callable[[RequestRecord], None] | None = None,
                   memory_gb: float = 0.0,
                   on_result: Callable[[int, ItemResult], None] | None = None,
                   ) -> ReadResponse:
        """Send one batch; ``record`` receives the request's accounting (bytes both ways,
        latency, and ``memory_gb`` x the server's seconds as compute).

        With ``on_result`` (and ``config.stream``) the answer is asked for streamed and each
        item's result is handed to ``on_result(index, result)`` as soon as it arrives. Once a
        streamed answer has begun nothing is raised: one cut short (the server's timeout, a
        reset connection) gives ``ItemError(502, ...)`` for each item it did not carry. A
        server that answers whole hands its results over at the end (an error before then
        raises, with nothing handed over)."""
        stream = on_result is not None and self.config.stream
        return await self._post("/v1/read", encode_read_request(items, stream=stream),
                                len(items), record, memory_gb, on_result)

    async def infer(self, req: InferRequest,
                    record: Callable[[RequestRecord], None] | None = None,
                    memory_gb: float = 0.0) -> ReadResponse:
        """Run a model's frozen layers beside the store (``POST /v1/infer``): the response's
        one result holds ``features``; ``extra`` holds the server's phase timings,
        ``cos_batch_used``, ``model_cache`` and ``weights_sha256``. ``record`` as
        :meth:`read` (kind ``pushdown``, priced as a pushdown request).

        With ``req.stream`` the server sends each sample's features as it computes them
        (one record per sample), gathered here into the one ``features`` array as they
        arrive; an answer that stops early raises :class:`~tessera.errors.PushdownError`
        naming how many samples it carried."""
        body = encode_infer_request(req)
        if not req.stream:
            return await self._post("/v1/infer", body, 1, record, memory_gb)
        n = len(req.samples)
        out: list[np.ndarray] = []  # the gathered features, made at the first sample

        def gather(index: int, result: ItemResult) -> None:
            if isinstance(result, ItemError):
                return
            got = result.get("features")
            if got is None:
                raise ProtocolError(f"sample {index}'s record holds no features")
            if not out:
                out.append(np.empty((n, *got.shape), got.dtype))
            if got.shape != out[0].shape[1:] or got.dtype != out[0].dtype:
                raise ProtocolError(f"sample {index}'s features are {got.dtype} {got.shape}, "
                                    f"the first sample's {out[0].dtype} {out[0].shape[1:]}")
            out[0][index] = got

        resp = await self._post("/v1/infer", body, n, record, memory_gb, gather)
        missing = [r for r in resp.results if isinstance(r, ItemError)]
        if missing or not out:
            first = missing[0].error if missing else "no samples"
            raise PushdownError(f"pushdown server {self.url}/v1/infer: the streamed answer "
                                f"carried {n - len(missing)} of {n} samples ({first})")
        return ReadResponse([{"features": out[0]}], resp.server_s, resp.extra)

    async def _post(self, path: str, body: bytes, expected: int,
                    record: Callable[[RequestRecord], None] | None, memory_gb: float,
                    on_result: Callable[[int, ItemResult], None] | None = None,
                    ) -> ReadResponse:
        """POST ``body`` and decode the answer as it arrives: a streamed one record by record
        (each result to ``on_result`` at once; cut short, the rest become ``ItemError(502)``),
        a whole one at its end (then each to ``on_result``)."""
        started = time.monotonic()
        deadline = self._deadline()  # for the whole batch, not for each read of the socket
        received, ok, server_s = 0, False, 0.0
        try:
            response = await self._send("POST", path, stream=True, deadline=deadline,
                                        content=body,
                                        headers={"Content-Type": "application/json"})
            decoder = StreamDecoder(expected)
            chunks: list[bytes] = []  # a whole answer, or the first bytes until the magic
            streamed: bool | None = None
            try:
                async with asyncio.timeout_at(deadline):
                    async for chunk in response.aiter_bytes():
                        received += len(chunk)
                        if streamed is None:
                            chunks.append(chunk)
                            if received < 4:
                                continue
                            chunk = b"".join(chunks)
                            streamed = is_streamed(chunk)
                            if not streamed:
                                continue
                            chunks = []
                        if not streamed:
                            chunks.append(chunk)
                            continue
                        for index, result in decoder.feed(chunk):
                            if on_result is not None:
                                on_result(index, result)
            except TimeoutError:
                late = self._too_slow(path)
                if not streamed:
                    raise late from None
                log.warning("the streamed answer of %s%s was cut short: %s", self.url, path,
                            late)
            except (httpx.HTTPError, ProtocolError) as err:
                if not streamed:
                    raise PushdownError(f"pushdown server {self.url}{path}: "
                                        f"{type(err).__name__}: {err}") from None
                log.warning("the streamed answer of %s%s was cut short: %s", self.url, path,
                            err)
            finally:
                await response.aclose()
            if streamed:
                decoded = decoder.finish()
            else:
                try:
                    decoded = decode_response(b"".join(chunks), expected)
                except ProtocolError as err:
                    raise PushdownError(f"pushdown server {self.url}: {err}") from None
                for index, result in enumerate(decoded.results):
                    if on_result is not None:
                        on_result(index, result)
            ok, server_s = True, decoded.server_s
            return decoded
        finally:
            if record is not None:
                record(RequestRecord("pushdown", f"{self.url}{path}", received, len(body),
                                     time.monotonic() - started, ok, started,
                                     memory_gb * server_s))


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (``None`` when absent or not
    a number of seconds; an HTTP date is not used: servers of this protocol send seconds).

    >>> _retry_after("2"), _retry_after(None), _retry_after("soon")
    (2.0, None, None)
    """
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds <= 3600 else None


def relative_path(root: StoreURL, target: StoreURL) -> str | None:
    """``target``'s path below ``root`` (``""`` when they are the same), or ``None`` when
    ``target`` is not inside ``root``. Endpoints are not compared: a server may reach the
    same bucket through another endpoint than its clients."""
    if root.scheme != target.scheme or root.bucket != target.bucket:
        return None
    if root.scheme == "file":
        base, path = root.path.rstrip("/"), target.path
        if path == base:
            return ""
        return path[len(base) + 1:] if path.startswith(base + "/") else None
    base, path = root.prefix, target.prefix
    if not base:
        return path
    if path == base:
        return ""
    return path[len(base) + 1:] if path.startswith(base + "/") else None
