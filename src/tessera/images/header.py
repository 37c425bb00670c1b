"""The header of an image set (``__images.json`` at its root), typed: every field checked
when it is read, with its own version check, so a damaged or foreign header is a
:class:`~tessera.errors.SchemaError` naming the field instead of a ``KeyError`` later.

>>> h = SetHeader.new(size=(64, 96), channels=3, colour="ycbcr", block=32, q=50,
...                   group=32, codec="zstd:9", fit="error", crop_tile=None)
>>> SetHeader.from_json(h.to_json(), "memory://s").size
(64, 96)
>>> SetHeader.from_json(b'{"format": "tessera.images", "version": 1}', "memory://s")
Traceback (most recent call last):
...
tessera.errors.SchemaError: memory://s/__images.json: field 'size' is missing
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

from tessera.errors import SchemaError

#: Where the header lives, below the set's URL.
HEADER_KEY = "__images.json"
#: The newest version this Tessera reads. It writes 1 for sets every earlier Tessera reads
#: as stored, 2 for sets that one which knows only version 1 would misread (chroma
#: subsampling).
HEADER_VERSION = 2


@dataclasses.dataclass(frozen=True)
class SetHeader:
    """An image set's header (see :class:`~tessera.images.columns.ImageColumns.create` for
    what each field means)."""

    uid: str
    size: tuple[int, int]
    channels: int
    colour: str
    block: int
    q: float
    transform: str
    level_shift: int
    group: int
    codec: str
    fit: str
    crop_tile: tuple[int, int] | None
    rounding: str = "half-even"
    diagonal_order: str = "d-major, i ascending"
    version: int = 1
    chroma: str = "4:4:4"

    @classmethod
    def new(cls, *, size: tuple[int, int], channels: int, colour: str, block: int, q: float,
            group: int, codec: str, fit: str, crop_tile: tuple[int, int] | None,
            transform: str = "dct2-ortho", level_shift: int = 128,
            chroma: str = "4:4:4") -> SetHeader:
        """A header for a new set (a fresh ``uid``; version 2 where the chroma is
        subsampled, so that a Tessera which does not know subsampling refuses the set)."""
        return cls(uuid.uuid4().hex, (int(size[0]), int(size[1])), channels, colour, block, q,
                   transform, level_shift, group, codec, fit,
                   None if crop_tile is None else (int(crop_tile[0]), int(crop_tile[1])),
                   version=1 if chroma == "4:4:4" else 2, chroma=chroma)

    def to_json(self) -> bytes:
        """The stored form."""
        doc: dict[str, Any] = {"format": "tessera.images", "version": self.version,
                               "uid": self.uid, "size": list(self.size),
                               "channels": self.channels, "colour": self.colour,
                               "block": self.block, "q": self.q, "transform": self.transform,
                               "level_shift": self.level_shift, "rounding": self.rounding,
                               "diagonal_order": self.diagonal_order, "group": self.group,
                               "codec": self.codec, "fit": self.fit,
                               "crop_tile": None if self.crop_tile is None
                               else list(self.crop_tile), "chroma": self.chroma}
        return json.dumps(doc, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, url: str) -> SetHeader:
        """The header stored at ``url``'s ``__images.json``, checked field by field."""
        where = f"{url.rstrip('/')}/{HEADER_KEY}"
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as err:
            raise SchemaError(f"{where} is not valid JSON: {err}") from None
        if not isinstance(doc, dict) or doc.get("format") != "tessera.images":
            raise SchemaError(f"{where} is not an image-set header")
        version = doc.get("version")
        if type(version) is not int or version < 1:
            raise SchemaError(f"{where}: field 'version' must be a positive integer, got "
                              f"{version!r}")
        if version > HEADER_VERSION:
            raise SchemaError(f"image set {url} has header version {version}, newer than this "
                              f"Tessera understands ({HEADER_VERSION}); upgrade")

        def field(name: str, kind: type | tuple[type, ...]) -> Any:
            if name not in doc:
                raise SchemaError(f"{where}: field {name!r} is missing")
            value = doc[name]
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                raise SchemaError(f"{where}: field {name!r} has the wrong type ({value!r})")
            return value

        def pair(name: str, optional: bool = False) -> tuple[int, int] | None:
            value = doc.get(name) if optional else field(name, list)
            if value is None and optional:
                return None
            if not isinstance(value, list) or len(value) != 2 or not all(
                    type(v) is int and v > 0 for v in value):
                raise SchemaError(f"{where}: field {name!r} must be two positive integers, "
                                  f"got {value!r}")
            return int(value[0]), int(value[1])

        size = pair("size")
        assert size is not None
        uid = doc.get("uid") or ""  # sets made before uids: identified by their URL
        if not isinstance(uid, str):
            raise SchemaError(f"{where}: field 'uid' has the wrong type ({uid!r})")
        return cls(uid=uid, size=size, channels=field("channels", int),
                   colour=field("colour", str), block=field("block", int),
                   q=field("q", (int, float)), transform=field("transform", str),
                   level_shift=field("level_shift", int), group=field("group", int),
                   codec=field("codec", str), fit=field("fit", str),
                   crop_tile=pair("crop_tile", optional=True),
                   rounding=str(doc.get("rounding", "half-even")),
                   diagonal_order=str(doc.get("diagonal_order", "d-major, i ascending")),
                   version=version,
                   chroma=field("chroma", str) if "chroma" in doc else "4:4:4")
