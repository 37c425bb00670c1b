"""The codec registry: :class:`CodecInfo` per codec (name, level bounds, default level,
factory), :func:`register_codec`, and :func:`get_codec`, which builds a spec's
:class:`Codec`. A spec is ``None`` (raw little-endian tiles, range-readable) or a name,
optionally with a level: ``"zstd:5"``, ``"gzip:9"``. The codecs themselves are one module
each beside this one, registered by :mod:`tessera.format.codecs`.

>>> from tessera.format.codecs import get_codec
>>> normalize_codec_spec("ZSTD:5"), get_codec(None).is_raw
('zstd:5', True)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Protocol

from tessera.errors import SchemaError


class CodecImpl(Protocol):
    """What a registered codec's factory builds (numcodecs' codec interface)."""

    def encode(self, buf: Any) -> Any:
        """The encoded bytes of ``buf``."""

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The decoded bytes of ``buf``; with ``out``, written into that buffer."""


@dataclasses.dataclass(frozen=True)
class CodecInfo:
    """One registered codec.

    Attributes:
        name: the spec's name (lower case).
        levels: the inclusive range of levels its spec may name.
        default_level: the level of a spec without one.
        make: builds the codec for a level (imports its library only then).
    """

    name: str
    levels: tuple[int, int]
    default_level: int
    make: Callable[[int], CodecImpl]


_REGISTRY: dict[str, CodecInfo] = {}


def register_codec(info: CodecInfo) -> None:
    """Add a codec to the registry (its name must be new and its default level in range)."""
    if info.name in _REGISTRY or info.name != info.name.lower() or ":" in info.name:
        raise SchemaError(f"codec name {info.name!r} is taken or not a lower-case name")
    if not info.levels[0] <= info.default_level <= info.levels[1]:
        raise SchemaError(f"codec {info.name}: default level {info.default_level} is outside "
                          f"{info.levels}")
    _REGISTRY[info.name] = info
    get_codec.cache_clear()


def codec_names() -> tuple[str, ...]:
    """The registered codecs' names, in registration order."""
    return tuple(_REGISTRY)


def codec_info(name: str) -> CodecInfo:
    """The registration of codec ``name`` (``SchemaError`` naming the choices if none)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise SchemaError(f"unknown codec {name!r}; choose None or one of "
                          f"{', '.join(_REGISTRY)} (optionally with a level, e.g. "
                          "'zstd:5')") from None


@dataclasses.dataclass(frozen=True)
class Codec:
    """One tile codec. ``spec`` is the canonical text (``None`` for raw tiles)."""

    spec: str | None
    _impl: Any = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def is_raw(self) -> bool:
        """True if tiles are stored as raw little-endian bytes (range-readable)."""
        return self.spec is None

    def encode(self, data: bytes | memoryview) -> bytes | memoryview:
        """Compress one tile's bytes (raw tiles pass through without a copy)."""
        if self._impl is None:
            return data
        return bytes(self._impl.encode(data))

    def decode(self, data: bytes | memoryview) -> bytes:
        """Decompress one tile's bytes."""
        if self._impl is None:
            return bytes(data)
        return bytes(self._impl.decode(data))

    def decode_into(self, data: bytes | memoryview, out: Any) -> None:
        """Decompress one encoded block into ``out`` (a writable buffer of exactly its
        decoded size; a smaller one raises ``ValueError``)."""
        if self._impl is None:
            memoryview(out).cast("B")[:] = memoryview(data).cast("B")
            return
        self._impl.decode(data, out=out)


def normalize_codec_spec(spec: str | None) -> str | None:
    """Check a codec spec and return its canonical form (``"ZSTD"`` -> ``"zstd"``)."""
    if spec is None or spec in ("", "none", "raw"):
        return None
    if not isinstance(spec, str):
        raise SchemaError(f"codec must be a string like 'zstd' or 'zstd:5', got {spec!r}")
    name, _, level = spec.strip().lower().partition(":")
    info = codec_info(name)
    if level:
        if not level.lstrip("-").isdigit():
            raise SchemaError(f"codec level in {spec!r} must be an integer")
        lv = int(level)
        bounds = info.levels
        if not bounds[0] <= lv <= bounds[1]:
            raise SchemaError(f"codec level {lv} out of range {bounds} for {name}")
        return f"{name}:{lv}"
    return name


@functools.lru_cache(maxsize=64)
def get_codec(spec: str | None) -> Codec:
    """The codec for a spec (cached; codecs are stateless)."""
    canonical = normalize_codec_spec(spec)
    if canonical is None:
        return Codec(None)
    name, _, level = canonical.partition(":")
    info = _REGISTRY[name]
    return Codec(canonical, info.make(int(level) if level else info.default_level))
