"""LZ4 through numcodecs; the level is LZ4's acceleration (higher: faster, larger)."""

from __future__ import annotations

from tessera.format.codecs.registry import CodecImpl, CodecInfo


def make(level: int) -> CodecImpl:
    """numcodecs' LZ4 with acceleration ``level``."""
    import numcodecs

    return numcodecs.LZ4(acceleration=level)  # type: ignore[no-any-return]


INFO = CodecInfo("lz4", (1, 65537), 1, make)
