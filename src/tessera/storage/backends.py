"""Builds the obstore object behind a :class:`StoreURL` from user options."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Any

from obstore.store import AzureStore, GCSStore, LocalStore, MemoryStore, ObjectStore, S3Store

from tessera.config import StoreConfig
from tessera.errors import ConfigError, InvalidURLError
from tessera.storage.errormap import short_detail
from tessera.storage.url import StoreURL

# Option names Tessera documents for S3, mapped onto obstore's S3 config keys.
_S3_ALIASES = {"endpoint_url": "endpoint", "aws_access_key_id": "access_key_id",
               "aws_secret_access_key": "secret_access_key", "aws_session_token": "session_token",
               "token": "session_token"}
_CLIENT_OPTION_KEYS = {"allow_http", "allow_invalid_certificates", "user_agent", "proxy_url",
                       "pool_idle_timeout", "pool_max_idle_per_host", "http1_only", "http2_only"}

_memory_lock = threading.Lock()
_memory_store: MemoryStore | None = None


def process_memory_store() -> MemoryStore:
    """The one in-memory store of this process: every ``memory://`` URL shares it."""
    global _memory_store
    with _memory_lock:
        if _memory_store is None:
            _memory_store = MemoryStore()
        return _memory_store


def build_backend(
    url: StoreURL, config: StoreConfig, options: dict[str, Any]
) -> ObjectStore | None:
    """The obstore store at the bucket (or folder) root; Tessera applies the prefix itself.

    For a file store whose folder does not exist yet, ``None``: the folder is created by the
    first write (:func:`local_backend`), so that reading or listing a mistyped path leaves
    nothing behind.
    """
    if url.scheme == "memory":
        _no_options(url, options)
        return process_memory_store()
    if url.scheme == "file":
        _no_options(url, options)
        path = Path(url.path)
        if path.exists() and not path.is_dir():
            raise InvalidURLError(f"{url} is a file, not a folder; a file store is a folder")
        return local_backend(url, create=False)
    config_opts, client_options = _split_options(options)
    client: Any = client_options
    client_options.setdefault("timeout", dt.timedelta(seconds=config.request_timeout_s))
    client_options.setdefault("connect_timeout", dt.timedelta(seconds=config.connect_timeout_s))
    # Tessera retries (and counts every try) itself; obstore must not retry behind its back.
    retry: Any = {"max_retries": 0, "retry_timeout": dt.timedelta(seconds=config.request_timeout_s)}
    try:
        if url.scheme == "s3":
            s3_opts = {_S3_ALIASES.get(k, k): v for k, v in config_opts.items()}
            if s3_opts.get("endpoint") and "region" not in s3_opts:
                s3_opts["region"] = "us-east-1"
            return S3Store(url.bucket, client_options=client, retry_config=retry,
                           **s3_opts)
        if url.scheme == "gs":
            return GCSStore(url.bucket, client_options=client, retry_config=retry,
                            **config_opts)
        return AzureStore(url.bucket, client_options=client, retry_config=retry,
                          **config_opts)
    except Exception as err:  # obstore's builder errors are terse: say what to check
        raise ConfigError(
            f"cannot open {url}: {short_detail(err)}. Check the storage options "
            f"({', '.join(sorted(options)) or 'none given'}) and the standard environment "
            "variables; a plain-HTTP endpoint needs allow_http=True"
        ) from err


def local_backend(url: StoreURL, *, create: bool) -> LocalStore | None:
    """The folder store for ``url``, creating the folder only when ``create`` is set."""
    if not create and not Path(url.path).is_dir():
        return None
    return LocalStore(url.path, mkdir=True)


def _split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    config: dict[str, Any] = {}
    client: dict[str, Any] = dict(options.pop("client_options", None) or {})
    for key, value in options.items():
        if key in _CLIENT_OPTION_KEYS:
            client[key] = value
        else:
            config[key] = value
    return config, client


def _no_options(url: StoreURL, options: dict[str, Any]) -> None:
    if options:
        raise ConfigError(
            f"{url.scheme}:// stores take no storage options, got {', '.join(sorted(options))}"
        )
