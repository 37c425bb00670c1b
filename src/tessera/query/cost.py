"""The cost model of the ArrayMorph paper (section 4.1): ``Cost = T + phi * F``.

``T`` comes from a :class:`StoreProfile` (bandwidth as a function of concurrent requests,
interpolated between measured points; per-request handling latency ``T_R``; pushdown time
``T_lambda(size) = alpha * size + beta``; client concurrency ``t``)::

    T = bytes / BW(requests) + T_R * ceil(requests / t) + T_lambda * ceil(pushdowns / t)

``F`` comes from a :class:`~tessera.storage.pricing.PriceTable`: request fees per method,
egress per byte, and pushdown compute per GB-second (``M_lambda * T_lambda``).

>>> model = CostModel(DEFAULT_PROFILES["cloud"], "s3", phi=0.0)
>>> one = model.estimate(RequestMix(range_requests=1, range_bytes=1 << 20))
>>> round(one.seconds, 3), f"{one.dollars:.7f}"
(0.072, '0.0000883')
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from tessera.errors import ConfigError
from tessera.storage.pricing import PriceTable, get_pricing


@dataclasses.dataclass(frozen=True)
class StoreProfile:
    """What the micro-profiler measured for one store endpoint (or a built-in default).

    Attributes:
        name: where it comes from (an endpoint, or ``default:<kind>``).
        bandwidth: ``(concurrent requests N, bytes per second)`` points, ascending in N.
        request_latency_s: ``T_R``, server handling time of one Get or Range request.
        concurrency: ``t``, requests the client keeps in flight.
        pushdown_alpha_s_per_byte, pushdown_beta_s: ``T_lambda(size) = alpha*size + beta``
            as the client sees it (``beta`` includes the round trip to the server; pushdowns
            pay no ``T_R`` besides, as Lambda requests in the paper's model); ``None`` when
            no pushdown server was profiled.
        pushdown_memory_gb: ``M_lambda``, memory billed per pushdown invocation.
        call_s: the client's fixed work per read call (selection, plan, report), and
        tile_s: its work per tile the read touches (assembling and placing), beside the
            requests: what a small read costs where the link is not what it waits for.
            Added to a plan's estimate, never to the costs that choose between methods
            (they are the same whichever method is chosen). ``tessera store profile`` measures
            them through the array reader; the defaults are fixed figures of one
            measurement (docs/design/performance-history.md, "Per-call cost").
        now_request_s: the time of one request of a read made on the calling thread (a
            small read of a memory or folder store, one request after another without the
            event loop: :func:`~tessera.query.plan.plan_needs` ``now_bytes``); ``None``:
            ``request_latency_s``.
        now_bytes_per_s: the bytes per second of such a request (a copy out of memory or
            the page cache, far above what one request through the event loop moves);
            ``None``: ``BW(1)``. ``tessera store profile`` times calling-thread ranges of two
            sizes on memory and folder stores and sets both.

    >>> profile = DEFAULT_PROFILES["cloud"]
    >>> profile.request_latency_s > 0, profile.bw(8) > profile.bw(1)
    (True, True)
    """

    name: str
    bandwidth: tuple[tuple[int, float], ...]
    request_latency_s: float
    concurrency: int = 32
    pushdown_alpha_s_per_byte: float | None = None
    pushdown_beta_s: float | None = None
    pushdown_memory_gb: float = 1.0
    call_s: float = 0.0
    tile_s: float = 0.0
    now_request_s: float | None = None
    now_bytes_per_s: float | None = None

    def __post_init__(self) -> None:
        if not self.bandwidth:
            raise ConfigError(f"profile {self.name!r} has no bandwidth points")
        ns = [n for n, _ in self.bandwidth]
        if ns != sorted(ns) or len(set(ns)) != len(ns) or ns[0] < 1:
            raise ConfigError(f"profile {self.name!r}: bandwidth points need distinct, "
                              f"ascending concurrency levels >= 1, got {ns}")
        if any(bw <= 0 for _, bw in self.bandwidth):
            raise ConfigError(f"profile {self.name!r}: bandwidths must be positive")
        if self.request_latency_s < 0 or self.concurrency < 1:
            raise ConfigError(f"profile {self.name!r}: latency must be >= 0 and concurrency "
                              ">= 1")
        if not (self.call_s >= 0 and self.tile_s >= 0):
            raise ConfigError(f"profile {self.name!r}: call_s and tile_s must be >= 0")
        if self.now_request_s is not None and not self.now_request_s >= 0:
            raise ConfigError(f"profile {self.name!r}: now_request_s must be >= 0")
        if self.now_bytes_per_s is not None and not self.now_bytes_per_s > 0:
            raise ConfigError(f"profile {self.name!r}: now_bytes_per_s must be > 0")

    def client_s(self, tiles: int) -> float:
        """The client's own seconds for a read call touching ``tiles`` tiles."""
        return self.call_s + self.tile_s * tiles

    def calling_thread(self) -> StoreProfile:
        """This profile as requests made one after another on the calling thread see it:
        one in flight, each ``now_request_s`` (default ``T_R``) plus its bytes at
        ``now_bytes_per_s`` (default ``BW(1)``). A plan made with it halves no range for
        concurrency it will not have, and merges or splits ranges at what a request costs
        there (microseconds on a folder, against the event loop's hundreds: with the
        loop's ``T_R``, ranges of neighbouring tiles would be merged across large gaps).

        >>> p = DEFAULT_PROFILES["local"].calling_thread()
        >>> p.concurrency, p.request_latency_s, p.bandwidth
        (1, 5e-06, ((1, 20000000000.0),))
        """
        per = self.request_latency_s if self.now_request_s is None else self.now_request_s
        rate = self.bw(1) if self.now_bytes_per_s is None else self.now_bytes_per_s
        return dataclasses.replace(self, bandwidth=((1, rate),), request_latency_s=per,
                                   concurrency=1, pushdown_alpha_s_per_byte=None,
                                   pushdown_beta_s=None)

    def bw(self, requests: float) -> float:
        """Bytes per second with ``requests`` in flight, interpolated linearly between the
        measured points (flat beyond them)."""
        x = max(1.0, min(float(requests), float(self.concurrency)))
        pts = self.bandwidth
        if x <= pts[0][0]:
            return float(pts[0][1])
        for (n0, b0), (n1, b1) in itertools.pairwise(pts):
            if x <= n1:
                return float(b0 + (b1 - b0) * (x - n0) / (n1 - n0))
        return float(pts[-1][1])

    @property
    def min_range_bytes(self) -> int:
        """Bytes one request moves while waiting for its answer (bandwidth-delay product):
        halving a single range below this cannot pay off, latency dominates."""
        return max(1, int(self.bw(1) * self.request_latency_s))

    @property
    def has_pushdown(self) -> bool:
        """True if pushdown time was profiled."""
        return self.pushdown_alpha_s_per_byte is not None and self.pushdown_beta_s is not None

    def pushdown_s(self, tile_bytes: float) -> float:
        """``T_lambda``: server time to read and slice a tile of ``tile_bytes``."""
        if not self.has_pushdown:
            return math.inf
        assert self.pushdown_alpha_s_per_byte is not None and self.pushdown_beta_s is not None
        return self.pushdown_alpha_s_per_byte * tile_bytes + self.pushdown_beta_s

    def with_pushdown_defaults(self) -> StoreProfile:
        """This profile, with :data:`DEFAULT_PUSHDOWN` figures where pushdown was not
        profiled (a pushdown server is configured but not yet measured); ``beta`` then also
        counts one request latency ``T_R``, the round trip a pushdown makes."""
        if self.has_pushdown:
            return self
        alpha, beta = DEFAULT_PUSHDOWN
        return dataclasses.replace(self, pushdown_alpha_s_per_byte=alpha,
                                   pushdown_beta_s=beta + self.request_latency_s)

    def _peak_range(self) -> tuple[int, int]:
        peak = max(b for _, b in self.bandwidth)
        good = [n for n, b in self.bandwidth if b >= 0.9 * peak]
        return min(good), max(good)

    @property
    def n_min(self) -> int:
        """Fewest concurrent requests reaching 90% of the peak bandwidth."""
        return self._peak_range()[0]

    @property
    def n_max(self) -> int:
        """Most concurrent requests still reaching 90% of the peak bandwidth."""
        return self._peak_range()[1]


DEFAULT_PROFILES: Mapping[str, StoreProfile] = MappingProxyType({
    # A local folder or memory store: fast, ~0.15 ms per request through the async bridge
    # (measured on the first development machine), little gain from concurrency on few
    # cores. A small read made on the calling thread: ~5 us per request and ~20 GB/s
    # (now_request_s, now_bytes_per_s: tessera store profile --quick on the current development
    # machine gave 2-3 us and 20-30 GB/s on memory, 5-6 us and 18-60 GB/s on a folder),
    # and the client's own work per read call and per tile (call_s, tile_s: fitted by
    # tessera.array.calibrate.measure_calls on memory and folder stores there, 5-7 us per
    # call and 4-6 us per tile in five of six profiles). benchmarks/per_call.py measured
    # 0.015-0.018 / 0.024-0.030 / 0.043-0.054 ms for 1 / 2 / 4 tiles on memory and a folder
    # there. The machine of the earlier sessions was about 3x slower (0.05-0.08 ms for one
    # tile; these were 10 us, BW(1), 30 us and 3 us then): tessera store profile measures a
    # machine's own (docs/performance.md, "Per-call cost").
    "local": StoreProfile("default:local", ((1, 2.0e9), (2, 3.0e9)),
                          request_latency_s=150e-6, concurrency=2, call_s=6e-6,
                          tile_s=5e-6, now_request_s=5e-6, now_bytes_per_s=20e9),
    # A cloud object store seen from outside its region (the paper's Figure 4 shape: S3
    # needs several requests in flight to fill the link; ~30 ms to first byte). Its reads
    # go through the event loop: call_s and tile_s are that path's client work as fitted
    # on the first development machine before reads by recipe (0.1 and 0.12 ms), far
    # below the link's time there.
    "cloud": StoreProfile("default:cloud", ((1, 25e6), (8, 90e6), (32, 100e6), (256, 80e6)),
                          request_latency_s=0.030, concurrency=32,
                          pushdown_alpha_s_per_byte=None, pushdown_beta_s=None,
                          call_s=100e-6, tile_s=120e-6)
})
"""Built-in profiles used until a store has been profiled."""

DEFAULT_PUSHDOWN = (1e-9, 0.005)
"""``(alpha, beta)`` of an unprofiled pushdown server beside its store: tiles read and
sliced at 1 GB/s, 5 ms per call on the server, plus the profile's ``T_R`` for the round trip
(``tessera store profile URL --pushdown SERVER`` measures them)."""


@dataclasses.dataclass(frozen=True)
class RequestMix:
    """A set of requests to estimate: counts and bytes per method.

    ``pushdown_tile_bytes`` is the size of the tiles the pushdowns read on the server side
    (their ``T_lambda`` depends on it); ``pushdown_bytes`` what they send back.
    """

    get_requests: int = 0
    get_bytes: int = 0
    range_requests: int = 0
    range_bytes: int = 0
    pushdowns: int = 0
    pushdown_bytes: int = 0
    pushdown_tile_bytes: int = 0

    def __add__(self, other: RequestMix) -> RequestMix:
        return RequestMix(self.get_requests + other.get_requests,
                          self.get_bytes + other.get_bytes,
                          self.range_requests + other.range_requests,
                          self.range_bytes + other.range_bytes,
                          self.pushdowns + other.pushdowns,
                          self.pushdown_bytes + other.pushdown_bytes,
                          self.pushdown_tile_bytes + other.pushdown_tile_bytes)

    def __sub__(self, other: RequestMix) -> RequestMix:
        """Difference, floored at zero per field (a context without one tile's requests)."""
        return RequestMix(max(0, self.get_requests - other.get_requests),
                          max(0, self.get_bytes - other.get_bytes),
                          max(0, self.range_requests - other.range_requests),
                          max(0, self.range_bytes - other.range_bytes),
                          max(0, self.pushdowns - other.pushdowns),
                          max(0, self.pushdown_bytes - other.pushdown_bytes),
                          max(0, self.pushdown_tile_bytes - other.pushdown_tile_bytes))

    def __mul__(self, times: int) -> RequestMix:
        """The mix of ``times`` copies (the requests of that many tiles chosen alike).

        >>> RequestMix(get_requests=1, get_bytes=256) * 3
        RequestMix(get_requests=3, get_bytes=768, range_requests=0, range_bytes=0, \
pushdowns=0, pushdown_bytes=0, pushdown_tile_bytes=0)
        """
        return RequestMix(self.get_requests * times, self.get_bytes * times,
                          self.range_requests * times, self.range_bytes * times,
                          self.pushdowns * times, self.pushdown_bytes * times,
                          self.pushdown_tile_bytes * times)

    @property
    def requests(self) -> int:
        """Requests of every method."""
        return self.get_requests + self.range_requests + self.pushdowns

    @property
    def nbytes(self) -> int:
        """Bytes sent to the client."""
        return self.get_bytes + self.range_bytes + self.pushdown_bytes


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Estimated seconds and dollars of a request mix, and ``cost = seconds + phi*dollars``."""

    seconds: float
    dollars: float
    cost: float


class CostModel:
    """``Cost = T + phi * F`` for one store profile and price table.

    ``phi`` says how many seconds a read may take longer to save one dollar: 0 minimises
    time, a huge value minimises dollars.
    """

    def __init__(self, profile: StoreProfile, pricing: str | PriceTable = "local",
                 phi: float = 0.0) -> None:
        if not phi >= 0:
            raise ConfigError(f"phi must be a number >= 0, got {phi!r}")
        self.profile = profile
        self.prices = get_pricing(pricing)
        self.phi = float(phi)

    def dollars(self, mix: RequestMix) -> float:
        """``F``: request fees, egress and pushdown compute (Table 3 of the paper)."""
        p = self.prices
        compute_gb_s = 0.0
        if mix.pushdowns:
            per = self.profile.pushdown_s(mix.pushdown_tile_bytes / mix.pushdowns)
            compute_gb_s = self.profile.pushdown_memory_gb * per * mix.pushdowns
        return (p.request_fee("get", mix.get_requests)
                + p.request_fee("range", mix.range_requests)
                + p.request_fee("pushdown", mix.pushdowns)
                + p.egress_usd(mix.nbytes) + p.compute_usd(compute_gb_s))

    def seconds(self, mix: RequestMix) -> float:
        """``T``: transfer at the bandwidth of that many concurrent requests, plus request
        handling and pushdown execution in waves of ``t`` concurrent requests."""
        prof = self.profile
        n = mix.requests
        if n == 0:
            return 0.0
        t = prof.concurrency
        transfer = mix.nbytes / prof.bw(n)
        handling = prof.request_latency_s * math.ceil((mix.get_requests + mix.range_requests) / t)
        lam = 0.0
        if mix.pushdowns:
            lam = (prof.pushdown_s(mix.pushdown_tile_bytes / mix.pushdowns)
                   * math.ceil(mix.pushdowns / t))
        return transfer + handling + lam

    def smooth_cost(self, mix: RequestMix) -> float:
        """The cost with request handling charged per request (``T_R * requests / t``)
        rather than in whole waves: what one request more or less is worth on average.
        Greedy merging uses it, since with whole waves a single merge rarely changes the
        estimate although a run of them saves a wave."""
        prof = self.profile
        n = mix.get_requests + mix.range_requests
        step = prof.request_latency_s * (n / prof.concurrency - math.ceil(n / prof.concurrency))
        s = self.seconds(mix) + step
        return s + self.phi * self.dollars(mix) if self.phi else s

    def smooth_costs(self, gets: np.ndarray, get_bytes: np.ndarray, ranges: np.ndarray,
                     range_bytes: np.ndarray, rest: RequestMix | None = None) -> np.ndarray:
        """:meth:`smooth_cost` of many mixes at once: the mix ``i`` has ``gets[i]`` gets of
        ``get_bytes[i]`` bytes and ``ranges[i]`` ranges of ``range_bytes[i]``, beside the
        pushdowns of ``rest`` (its gets and ranges are ignored). Neighbour merging over
        many requests compares the costs of a run of merges in one call.

        >>> from tessera.query.cost import DEFAULT_PROFILES
        >>> model = CostModel(DEFAULT_PROFILES["cloud"], "s3", phi=10.0)
        >>> mix = RequestMix(get_requests=40, get_bytes=4 << 20, range_requests=3,
        ...                  range_bytes=1000)
        >>> one = model.smooth_costs(np.array([40]), np.array([4 << 20]), np.array([3]),
        ...                          np.array([1000]))
        >>> bool(np.isclose(one[0], model.smooth_cost(mix)))
        True
        """
        prof, p = self.profile, self.prices
        rest = rest or RequestMix()
        store = gets + ranges
        n = store + rest.pushdowns
        nbytes = get_bytes + range_bytes + rest.pushdown_bytes
        xs = np.clip(n.astype(np.float64), 1.0, float(prof.concurrency))
        bw = np.interp(xs, [float(a) for a, _ in prof.bandwidth],
                       [float(b) for _, b in prof.bandwidth])
        seconds = nbytes / bw + prof.request_latency_s * store / prof.concurrency
        push = rest.pushdowns
        if push:
            seconds = seconds + (prof.pushdown_s(rest.pushdown_tile_bytes / push)
                                 * math.ceil(push / prof.concurrency))
        out = np.where(n == 0, 0.0, seconds)
        if not self.phi:
            return out
        fixed = self.dollars(RequestMix(pushdowns=push,
                                        pushdown_tile_bytes=rest.pushdown_tile_bytes))
        dollars = (p.request_fee("get", 1) * gets + p.request_fee("range", 1) * ranges
                   + p.egress_usd_per_gb * nbytes / (1 << 30) + fixed)
        total: np.ndarray = out + self.phi * dollars
        return total

    def estimate(self, mix: RequestMix) -> Estimate:
        """Seconds, dollars and their combined cost."""
        s, d = self.seconds(mix), self.dollars(mix)
        return Estimate(s, d, s + self.phi * d if self.phi else s)
