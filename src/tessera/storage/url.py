"""Store URLs: ``file:///abs/dir``, ``memory://name``, ``s3://bucket/prefix``, ``gs://…``, ``az://…``.

>>> from tessera.storage.url import parse_store_url
>>> u = parse_store_url("s3://bucket/data/train")
>>> (u.scheme, u.bucket, u.prefix)
('s3', 'bucket', 'data/train')
"""

from __future__ import annotations

import dataclasses
import functools
import os
import urllib.parse
from pathlib import Path

from tessera.errors import InvalidKeyError, InvalidURLError
from tessera.storage.keys import validate_prefix

SCHEMES = ("file", "memory", "s3", "gs", "az")
CLOUD_SCHEMES = ("s3", "gs", "az")
#: The prefix of the environment variables that configure each cloud scheme (as obstore
#: reads them: ``AWS_ALLOW_HTTP``, ``GOOGLE_SERVICE_ACCOUNT``, ``AZURE_STORAGE_ACCOUNT_NAME``).
ENV_PREFIXES = {"s3": "AWS_", "gs": "GOOGLE_", "az": "AZURE_"}


@dataclasses.dataclass(frozen=True)
class StoreURL:
    """A parsed store URL.

    Attributes:
        scheme: ``file``, ``memory``, ``s3``, ``gs`` or ``az``.
        bucket: bucket or container (cloud stores), else ``""``.
        path: the absolute directory (file stores), else ``""``.
        prefix: the key prefix inside the bucket (cloud and memory stores), no slashes at
            either end.
    """

    scheme: str
    bucket: str = ""
    path: str = ""
    prefix: str = ""

    @property
    def is_cloud(self) -> bool:
        """True for stores reached over HTTP (s3, gs, az)."""
        return self.scheme in CLOUD_SCHEMES

    def __str__(self) -> str:
        return self._text

    @functools.cached_property
    def _text(self) -> str:
        # Made once: a file URL's Path.as_uri() costs tens of microseconds, and reads name
        # their array's URL several times each.
        if self.scheme == "file":
            return Path(self.path).as_uri()
        if self.scheme == "memory":
            return f"memory://{self.prefix}"
        tail = f"/{self.prefix}" if self.prefix else ""
        return f"{self.scheme}://{self.bucket}{tail}"

    def child(self, key: str) -> str:
        """The URL of object ``key`` below this store."""
        return f"{str(self).rstrip('/')}/{key}"


def parse_store_url(url: str) -> StoreURL:
    """Parse and check a store URL; a plain path (no scheme) means a local folder."""
    if not isinstance(url, str) or not url:
        raise InvalidURLError(f"a store URL must be a non-empty string, got {url!r}")
    if "://" not in url:
        if ":" in url.split("/")[0] and not Path(url).exists():
            raise InvalidURLError(
                f"unsupported store URL {url!r}: use one of {', '.join(s + '://' for s in SCHEMES)}"
            )
        return StoreURL("file", path=str(Path(url).expanduser().resolve()))
    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidURLError(
            f"unsupported store URL scheme {scheme!r} in {url!r}; use one of "
            f"{', '.join(s + '://' for s in SCHEMES)}"
        )
    if "?" in rest or "#" in rest:
        raise InvalidURLError(f"store URL {url!r} must not carry a query or fragment")
    if scheme == "file":
        parsed = urllib.parse.urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise InvalidURLError(
                f"file URL {url!r} names host {parsed.netloc!r}; use file:///absolute/path"
            )
        path = urllib.parse.unquote(parsed.path)
        if not path.startswith("/"):
            raise InvalidURLError(f"file URL {url!r} needs an absolute path: file:///abs/dir")
        return StoreURL("file", path=os.path.normpath(path))
    bucket, _, prefix = rest.partition("/")
    if scheme == "memory":
        return StoreURL("memory", prefix=_prefix(url, rest))
    if not bucket:
        raise InvalidURLError(f"store URL {url!r} names no bucket: use {scheme}://bucket/prefix")
    if "@" in bucket or ":" in bucket:
        raise InvalidURLError(
            f"store URL {url!r}: put credentials and endpoints in storage options, not the URL"
        )
    return StoreURL(scheme, bucket=bucket, prefix=_prefix(url, prefix))


def _prefix(url: str, prefix: str) -> str:
    try:
        return validate_prefix(prefix.strip("/"))
    except InvalidKeyError as err:
        raise InvalidURLError(f"store URL {url!r} has an invalid prefix: {err.reason}") from None
