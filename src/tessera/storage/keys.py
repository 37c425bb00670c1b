"""Object keys: relative paths confined below a store's root.

>>> from tessera.storage.keys import validate_key
>>> validate_key("arrays/a/__schema.json")
'arrays/a/__schema.json'
>>> validate_key("../secrets")
Traceback (most recent call last):
...
tessera.errors.InvalidKeyError: invalid object key '../secrets': segment '..' is not allowed...
"""

from __future__ import annotations

import re

from tessera.errors import InvalidKeyError

MAX_KEY_BYTES = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def validate_key(key: object) -> str:
    """Return ``key`` unchanged if it is a valid relative key, else raise InvalidKeyError.

    A valid key is a non-empty ``str`` of at most 1024 UTF-8 bytes, made of non-empty
    ``/``-separated segments, none of which is ``.`` or ``..``, with no leading ``/``, no
    backslash and no control characters. Such a key can never name anything outside the
    store root, whatever the backend.
    """
    if not isinstance(key, str):
        raise InvalidKeyError(repr(key), f"keys are str, got {type(key).__name__}")
    if not key:
        raise InvalidKeyError(key, "the key is empty")
    _check_text(key)
    if key.startswith("/"):
        raise InvalidKeyError(key, "absolute keys are not allowed")
    if key.endswith("/"):
        raise InvalidKeyError(key, "a key cannot end with '/'")
    _check_segments(key)
    return key


def validate_prefix(prefix: object) -> str:
    """Normalise a listing prefix: ``""`` (the whole store) or a valid key; a trailing ``/``
    is dropped. Listing is by whole path segments: prefix ``a`` lists ``a/...``, not ``ab``.
    """
    if not isinstance(prefix, str):
        raise InvalidKeyError(repr(prefix), f"prefixes are str, got {type(prefix).__name__}")
    stripped = prefix.rstrip("/")
    if not stripped:
        if prefix and set(prefix) != {"/"}:
            raise InvalidKeyError(prefix, "not a prefix")
        return ""
    return validate_key(stripped)


def join_key(root: str, key: str) -> str:
    """Join a store's root prefix (may be ``""``) and a validated key."""
    return f"{root}/{key}" if root else key


def _check_text(key: str) -> None:
    if "\\" in key:
        raise InvalidKeyError(key, "backslashes are not allowed")
    if _CONTROL.search(key):
        raise InvalidKeyError(key, "control characters are not allowed")
    if len(key.encode("utf-8", errors="surrogatepass")) > MAX_KEY_BYTES:
        raise InvalidKeyError(key, f"longer than {MAX_KEY_BYTES} bytes")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidKeyError(key, "not valid Unicode text") from None


def _check_segments(key: str) -> None:
    for seg in key.split("/"):
        if seg == "":
            raise InvalidKeyError(key, "empty path segment ('//')")
        if seg in (".", ".."):
            raise InvalidKeyError(key, f"segment {seg!r} is not allowed")
