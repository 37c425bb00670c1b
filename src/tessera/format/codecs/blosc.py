"""Blosc with zstd inside and byte shuffle, through numcodecs, levels 0 to 9."""

from __future__ import annotations

from tessera.format.codecs.registry import CodecImpl, CodecInfo


def make(level: int) -> CodecImpl:
    """numcodecs' Blosc (zstd, byte shuffle) at ``level``."""
    import numcodecs

    return numcodecs.Blosc(cname="zstd", clevel=level,  # type: ignore[no-any-return]
                           shuffle=numcodecs.Blosc.SHUFFLE)


INFO = CodecInfo("blosc", (0, 9), 5, make)
