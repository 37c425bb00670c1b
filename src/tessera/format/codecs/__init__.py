"""Tile codecs: ``None`` (raw little-endian), and the registered codecs (``zstd``, ``lz4``,
``gzip``, ``blosc`` today), one module each in this package.

A spec is a name, optionally with a level: ``"zstd:5"``, ``"gzip:9"``, ``"blosc:3"``.
Everything that lists, checks or builds codecs (schemas, the CLI's help, the h5 facade, the
importers, the pushdown wire) reads the registry (:mod:`tessera.format.codecs.registry`), so
adding a codec is one module with its ``INFO`` (:class:`CodecInfo`), one registration line
below, and its tests. Raw tiles stay byte-addressable, so a reader can fetch part of a tile
with a range request.

>>> from tessera.format.codecs import codec_names, get_codec
>>> codec = get_codec("zstd:3")
>>> codec.decode(codec.encode(b"abc" * 100)) == b"abc" * 100
True
>>> codec_names()
('zstd', 'lz4', 'gzip', 'blosc')
"""

from tessera.format.codecs import blosc, gzip, lz4, zstd
from tessera.format.codecs.registry import Codec as Codec
from tessera.format.codecs.registry import CodecImpl as CodecImpl
from tessera.format.codecs.registry import CodecInfo as CodecInfo
from tessera.format.codecs.registry import codec_info as codec_info
from tessera.format.codecs.registry import codec_names as codec_names
from tessera.format.codecs.registry import get_codec as get_codec
from tessera.format.codecs.registry import normalize_codec_spec as normalize_codec_spec
from tessera.format.codecs.registry import register_codec as register_codec
from tessera.format.codecs.zstd import ZstdCodec as ZstdCodec

register_codec(zstd.INFO)
register_codec(lz4.INFO)
register_codec(gzip.INFO)
register_codec(blosc.INFO)
