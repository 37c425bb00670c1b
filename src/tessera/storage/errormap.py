"""Maps what obstore (and asyncio) raise onto Tessera's error hierarchy, at one boundary.

The table in docs/storage.md lists what maps to what. Configuration mistakes are told apart
from transient failures so that they are raised at once instead of being retried:

>>> from obstore.exceptions import GenericError
>>> from tessera.errors import ConfigError
>>> err = map_error(GenericError("Generic S3 error: Error performing GET http://h/b in 7us - "
...                              "HTTP error: builder error ... source: BadScheme"),
...                 url="s3://b", key=None, op="list", networked=True, timeout_s=60)
>>> type(err).__name__, isinstance(err, ConfigError)
('StorageConfigError', True)
>>> "AWS_ALLOW_HTTP" in str(err)
True
"""

from __future__ import annotations

import re

from obstore import exceptions as obs_exc

from tessera.errors import (
    AccessDeniedError,
    InvalidRangeError,
    ObjectExistsError,
    ObjectNotFoundError,
    PermanentStorageError,
    PreconditionFailedError,
    StorageConfigError,
    StorageError,
    TransientStorageError,
)
from tessera.storage.url import ENV_PREFIXES

_STATUS = re.compile(r"status code: (\d{3})")
_RANGE_WORDS = ("StartTooLarge", "Requested range was invalid", "Invalid range", "InvalidRange")
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: Where cloud SDKs look for credentials when none are configured: the instance metadata
#: services of EC2 (and ECS), GCE and Azure.
_METADATA_HOSTS = ("169.254.169.254", "169.254.170.2", "metadata.google.internal",
                   "fd00:ec2::254")


def http_status(exc: BaseException) -> int | None:
    """The HTTP status code an obstore error reports, if any."""
    match = _STATUS.search(str(exc))
    return int(match.group(1)) if match else None


def short_detail(exc: BaseException | str) -> str:
    """The first line of an obstore message, without its debug dump and XML body."""
    text = str(exc).split("\n", 1)[0].strip()
    text = text.split("<?xml", 1)[0].rstrip(" :")
    return text[:400] or type(exc).__name__


def map_error(exc: BaseException, *, url: str, key: str | None, op: str,
              networked: bool, timeout_s: float) -> StorageError:
    """Translate one failure. ``networked`` stores treat unclassified failures as transient."""
    def make(cls: type[StorageError], message: str) -> StorageError:
        return cls(message, url=url, key=key, op=op)

    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, TimeoutError):
        return make(TransientStorageError, f"no answer within {timeout_s:g} s")
    if isinstance(exc, (FileNotFoundError, obs_exc.NotFoundError)):
        return make(ObjectNotFoundError, "no such object")
    if isinstance(exc, (FileExistsError, obs_exc.AlreadyExistsError)):
        return make(ObjectExistsError, "an object already exists at this key")
    if isinstance(exc, obs_exc.PreconditionError):
        return make(PreconditionFailedError, "the object does not match the given ETag")
    if isinstance(exc, (PermissionError, obs_exc.PermissionDeniedError,
                        obs_exc.UnauthenticatedError)):
        return make(AccessDeniedError, short_detail(exc))
    if isinstance(exc, (NotImplementedError, obs_exc.NotSupportedError)):
        return make(PermanentStorageError, f"not supported by this store: {short_detail(exc)}")
    text = str(exc)
    if networked and ("builder error" in text or "kind: Builder" in text):
        return make(StorageConfigError, _builder_problem(url, text))
    if (networked and any(host in text for host in _METADATA_HOSTS)
            and http_status(exc) not in TRANSIENT_STATUS):  # a throttled service: retry
        env = ENV_PREFIXES.get(url.split("://", 1)[0], "")
        return make(AccessDeniedError,
                    "no credentials: none were given in the storage options or the "
                    f"environment ({env}*), and the cloud's instance metadata service gave "
                    f"none either ({short_detail(exc)})")
    status = http_status(exc)
    if status == 416 or any(w in text for w in _RANGE_WORDS):
        return make(InvalidRangeError, "the range starts at or past the end of the object")
    if status is not None:
        if status in TRANSIENT_STATUS:
            return make(TransientStorageError, f"HTTP {status}: {short_detail(exc)}")
        if status in (401, 403):
            return make(AccessDeniedError, f"HTTP {status}: {short_detail(exc)}")
        return make(PermanentStorageError, f"HTTP {status}: {short_detail(exc)}")
    if networked and isinstance(exc, (obs_exc.GenericError, OSError, ConnectionError)):
        return make(TransientStorageError, short_detail(exc))
    return make(PermanentStorageError, short_detail(exc))


def _builder_problem(url: str, text: str) -> str:
    """What a request that could not even be built says about the configuration."""
    env = ENV_PREFIXES.get(url.split("://", 1)[0], "")
    if "BadScheme" in text:
        return ("the endpoint is plain HTTP, and plain HTTP is off: pass the storage option "
                f"allow_http=True (`--allow-http` on the command line) or set "
                f"{env}ALLOW_HTTP=true, or use an https:// endpoint")
    return (f"the request could not be built ({short_detail(text)}); check the storage "
            f"options and the {env}* environment variables (endpoint, proxy, headers)")
