"""gzip (zlib's deflate in a gzip frame) through numcodecs, levels 0 to 9."""

from __future__ import annotations

from tessera.format.codecs.registry import CodecImpl, CodecInfo


def make(level: int) -> CodecImpl:
    """numcodecs' GZip at ``level``."""
    import numcodecs

    return numcodecs.GZip(level=level)  # type: ignore[no-any-return]


INFO = CodecInfo("gzip", (0, 9), 5, make)
