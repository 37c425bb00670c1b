"""Several stateless pushdown servers behind one client: each tile goes to the server that
rendezvous hashing (highest random weight) ranks first for it, so each server's tile cache
holds a disjoint share of the tiles and a server added or removed moves only its own share;
a server that cannot be reached or answers 503 (busy) hands its tiles to the next server in
each tile's ranking. Every server must serve the same root (they are interchangeable).

>>> fleet = PushdownFleet(["http://a:8700", "http://b:8700"], token="t" * 16)
>>> [c.url for c in fleet.ranking("frag/v.data@0")] in (
...     ["http://a:8700", "http://b:8700"], ["http://b:8700", "http://a:8700"])
True
>>> fleet.ranking("frag/v.data@0") == fleet.ranking("frag/v.data@0")  # stable
True
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import httpx

from tessera.config import PushdownConfig
from tessera.errors import InvalidArgumentError, InvalidTypeError, PushdownError
from tessera.pushdown.client import PushdownClient
from tessera.pushdown.framing import ItemResult, ReadResponse
from tessera.pushdown.read_items import CellsItem, ReadItem, TileItem
from tessera.storage.stats import RequestRecord
from tessera.storage.url import StoreURL

#: Statuses after which a batch goes to the next server: the server is busy (503) or gone.
FAILOVER_STATUSES = frozenset({502, 503, 504})


class PushdownServer(Protocol):
    """What the read path needs of a pushdown server (one, or a fleet)."""

    config: PushdownConfig
    url: str

    @property
    def available(self) -> bool: ...

    async def info(self) -> dict[str, Any]: ...

    async def array_path(self, array_url: StoreURL) -> str: ...

    async def read(self, items: list[ReadItem],
                   record: Callable[[RequestRecord], None] | None = None,
                   memory_gb: float = 0.0,
                   on_result: Callable[[int, ItemResult], None] | None = None,
                   ) -> ReadResponse: ...


class PushdownFleet:
    """Stateless pushdown servers used as one (see the module docs).

    Args:
        urls: ``http://host:port`` of each server (at least one).
        token: their bearer token (default: ``TESSERA_PUSHDOWN_TOKEN``).
        config: timeouts and batch sizes (default: ``TESSERA_PUSHDOWN_*``).
        transports: per server, an ``httpx`` transport instead of the network (tests).
    """

    def __init__(self, urls: Sequence[str], token: str | None = None, *,
                 config: PushdownConfig | None = None,
                 transports: Sequence[httpx.AsyncBaseTransport | None] | None = None) -> None:
        if not urls:
            raise InvalidArgumentError("a pushdown fleet needs at least one server URL")
        if len(set(urls)) != len(urls):
            raise InvalidArgumentError(f"pushdown servers repeat in {list(urls)}")
        ways = list(transports) if transports is not None else [None] * len(urls)
        if len(ways) != len(urls):
            raise InvalidArgumentError("give one transport per server")
        self.clients = [PushdownClient(u, token, config=config, transport=t)
                        for u, t in zip(urls, ways, strict=True)]
        self.config = self.clients[0].config
        self.url = ",".join(c.url for c in self.clients)

    def __repr__(self) -> str:
        return f"PushdownFleet({[c.url for c in self.clients]!r})"

    @property
    def available(self) -> bool:
        """True while any server is (see :attr:`PushdownClient.available`)."""
        return any(c.available for c in self.clients)

    def ranking(self, key: str) -> list[PushdownClient]:
        """The servers in the order ``key`` (a tile's identity) prefers them: by a hash of
        server and key, highest first (rendezvous hashing)."""
        def weight(client: PushdownClient) -> int:
            digest = hashlib.blake2b(f"{client.url}\n{key}".encode(), digest_size=8).digest()
            return int.from_bytes(digest, "big")

        return sorted(self.clients, key=weight, reverse=True)

    async def _first(self, ask: Callable[[PushdownClient], Any]) -> Any:
        errors = []
        for client in self.clients:
            try:
                return await ask(client)
            except PushdownError as err:
                errors.append(str(err))
        raise PushdownError("no pushdown server of the fleet answered: " + "; ".join(errors))

    async def info(self) -> dict[str, Any]:
        """``/v1/info`` of the first server that answers."""
        info: dict[str, Any] = await self._first(lambda c: c.info())
        return info

    async def array_path(self, array_url: StoreURL) -> str:
        """Where the array lies below the servers' root (asked of the first that answers)."""
        path: str = await self._first(lambda c: c.array_path(array_url))
        return path

    async def read(self, items: list[ReadItem],
                   record: Callable[[RequestRecord], None] | None = None,
                   memory_gb: float = 0.0,
                   on_result: Callable[[int, ItemResult], None] | None = None,
                   ) -> ReadResponse:
        """Each item sent to the first server of its ranking that is up, the servers' parts
        concurrently; a part whose server cannot be reached or is busy goes to each item's
        next server. Raises :class:`~tessera.errors.PushdownError` when no server is left
        for some item (the reader then fetches those tiles directly). ``on_result`` as
        :meth:`PushdownClient.read`'s, with the item's index in ``items``."""
        results: list[ItemResult | None] = [None] * len(items)
        rankings = [self.ranking(_identity(i)) for i in items]
        tried: list[set[str]] = [set() for _ in items]
        pending = list(range(len(items)))
        server_s = 0.0
        while pending:
            parts: dict[str, tuple[PushdownClient, list[int]]] = {}
            for i in pending:
                client = next((c for c in rankings[i]
                               if c.url not in tried[i] and c.available), None)
                if client is None:
                    raise PushdownError(f"no pushdown server of {self.url} is left for "
                                        f"{_identity(items[i])}")
                parts.setdefault(client.url, (client, []))[1].append(i)
            answers = await asyncio.gather(
                *(c.read([items[i] for i in idx], record, memory_gb,
                         None if on_result is None else _renumbered(on_result, idx))
                  for c, idx in parts.values()), return_exceptions=True)
            pending = []
            for (client, idx), answer in zip(parts.values(), answers, strict=True):
                if isinstance(answer, PushdownError) and (
                        answer.status is None or answer.status in FAILOVER_STATUSES):
                    for i in idx:  # to each item's next server
                        tried[i].add(client.url)
                    pending += idx
                    continue
                if isinstance(answer, BaseException):
                    raise answer
                server_s = max(server_s, answer.server_s)
                for i, res in zip(idx, answer.results, strict=True):
                    results[i] = res
        assert all(r is not None for r in results)
        return ReadResponse([r for r in results if r is not None], server_s)


def _renumbered(on_result: Callable[[int, ItemResult], None], idx: list[int],
                ) -> Callable[[int, ItemResult], None]:
    """``on_result`` for one server's part: its position ``j`` is item ``idx[j]``."""
    return lambda j, result: on_result(idx[j], result)


def as_pushdown_server(server: Any) -> PushdownServer | None:
    """What an ``open_*`` verb's ``pushdown=`` takes, as a server: a URL (one
    :class:`PushdownClient`), a list of URLs (a :class:`PushdownFleet`), either of those
    objects, or ``None``; anything else raises :class:`~tessera.errors.InvalidTypeError`."""
    if server is None or isinstance(server, (PushdownClient, PushdownFleet)):
        return server
    if isinstance(server, str):
        return PushdownClient(server)
    if isinstance(server, (list, tuple)) and all(isinstance(u, str) for u in server):
        return PushdownFleet(server)
    raise InvalidTypeError(f"pushdown must be a server URL, a list of them, a PushdownClient, "
                           f"a PushdownFleet or None, got {server!r}")


def _identity(item: ReadItem) -> str:
    """What a tile is called when ranking servers for it: its object and offset."""
    if isinstance(item, TileItem):
        return f"{item.key}@{item.offset}"
    assert isinstance(item, CellsItem)
    return f"{item.coords.key}@{item.coords.offset}"
