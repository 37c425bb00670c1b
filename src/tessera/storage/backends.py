"""Builds the obstore object behind a :class:`StoreURL` from user options.

Cloud stores are configured, as obstore configures them, by the standard environment
variables (``AWS_*`` for S3, ``GOOGLE_*`` for GCS, ``AZURE_*`` for Azure) and by explicit
storage options, which win. One catch is handled here: obstore reads the HTTP client's
settings (``AWS_ALLOW_HTTP``, ``AWS_TIMEOUT``, ``AWS_PROXY_URL``, ...) from the environment
only when it is given no ``client_options`` at all, and Tessera always gives some (its
timeouts). So the client settings of the environment are read here and merged under the
explicit ones:

>>> env = {"AWS_ALLOW_HTTP": "true", "AWS_REGION": "eu-west-1", "GOOGLE_TIMEOUT": "9s"}
>>> environment_client_options("s3", env)
{'allow_http': 'true'}
>>> environment_client_options("gs", env)
{'timeout': '9s'}
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from obstore.store import AzureStore, GCSStore, LocalStore, MemoryStore, ObjectStore, S3Store

from tessera.config import StoreConfig, environment
from tessera.errors import ConfigError, InvalidURLError
from tessera.storage.errormap import short_detail
from tessera.storage.url import ENV_PREFIXES, StoreURL

# Option names Tessera documents for S3, mapped onto obstore's S3 config keys.
_S3_ALIASES = {"endpoint_url": "endpoint", "aws_access_key_id": "access_key_id",
               "aws_secret_access_key": "secret_access_key", "aws_session_token": "session_token",
               "token": "session_token"}
#: The keys of obstore's documented ``ClientConfig`` (``obstore.store.ClientConfig``, a
#: type that exists only for type checkers): HTTP client settings, given as top-level
#: storage options or in ``client_options=``, and read from the environment with the
#: scheme's prefix (``AWS_ALLOW_HTTP``). A test checks this list against obstore's stub.
CLIENT_OPTION_KEYS = frozenset({
    "allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type",
    "default_headers", "http1_only", "http2_keep_alive_interval", "http2_keep_alive_timeout",
    "http2_keep_alive_while_idle", "http2_max_frame_size", "http2_only", "pool_idle_timeout",
    "pool_max_idle_per_host", "proxy_ca_certificate", "proxy_excludes", "proxy_url",
    "randomize_addresses", "read_timeout", "root_certificate", "timeout", "user_agent"})
#: Environment variables that name an S3 region or endpoint (obstore reads them itself).
_S3_REGION_VARS = ("AWS_REGION", "AWS_DEFAULT_REGION")
_S3_ENDPOINT_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")

_memory_lock = threading.Lock()
_memory_store: MemoryStore | None = None


def process_memory_store() -> MemoryStore:
    """The one in-memory store of this process: every ``memory://`` URL shares it."""
    global _memory_store
    with _memory_lock:
        if _memory_store is None:
            _memory_store = MemoryStore()
        return _memory_store


def canonical_option(scheme: str, key: str) -> str:
    """A storage option's canonical name: the aliases a store accepts (``endpoint_url``,
    ``aws_access_key_id``, ``token``, ... for S3) map to one name, the one the storage layer
    and every other consumer of storage options (tensor tables' delta-rs mapping) use.

    >>> canonical_option("s3", "aws_access_key_id"), canonical_option("gs", "token")
    ('access_key_id', 'token')
    """
    return _S3_ALIASES.get(key, key) if scheme == "s3" else key


def environment_client_options(scheme: str, environ: Mapping[str, str] | None = None,
                               ) -> dict[str, str]:
    """The HTTP client settings the environment gives a ``scheme`` store (``s3``, ``gs``,
    ``az``): each ``PREFIX_KEY`` variable whose ``KEY`` is a client option, by option name.
    Other variables (credentials, region, endpoint) obstore reads itself."""
    prefix = ENV_PREFIXES.get(scheme)
    env = environment() if environ is None else environ
    out: dict[str, str] = {}
    if prefix is None:
        return out
    for name, value in env.items():
        if name.upper().startswith(prefix):
            key = name[len(prefix):].lower()
            if key in CLIENT_OPTION_KEYS:
                out[key] = value
    return out


def environment_endpoint(scheme: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint the environment names (``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT``), if any.

    >>> environment_endpoint("s3", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
    'http://127.0.0.1:9000'
    """
    env = environment() if environ is None else environ
    if scheme != "s3":
        return None
    return next((env[v] for v in _S3_ENDPOINT_VARS if env.get(v)), None)


def _check_path_length(url: StoreURL, path: Path) -> None:
    """Refuse a folder whose name (or any name on its path) this file system cannot hold,
    with the part named, instead of the operating system's ``OSError`` later."""
    try:
        name_max = os.pathconf(path.anchor or "/", "PC_NAME_MAX")
        path_max = os.pathconf(path.anchor or "/", "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):
        name_max, path_max = 255, 4096
    for part in path.parts:
        if len(os.fsencode(part)) > name_max:
            raise InvalidURLError(f"{url}: the name {part[:40]!r}... has "
                                  f"{len(os.fsencode(part))} bytes; this file system holds "
                                  f"names of at most {name_max}")
    if len(os.fsencode(str(path))) >= path_max:
        raise InvalidURLError(f"{url}: the path has {len(os.fsencode(str(path)))} bytes; this "
                              f"file system holds paths of fewer than {path_max}")


def build_backend(
    url: StoreURL, config: StoreConfig, options: dict[str, Any],
    environ: Mapping[str, str] | None = None,
) -> ObjectStore | None:
    """The obstore store at the bucket (or folder) root; Tessera applies the prefix itself.

    For a file store whose folder does not exist yet, ``None``: the folder is created by the
    first write (:func:`local_backend`), so that reading or listing a mistyped path leaves
    nothing behind. Cloud stores take their settings from ``options``, then from the
    environment (``environ``, default: the process's, ``tessera.config.environment()``),
    then from Tessera's ``config`` (timeouts).
    """
    if url.scheme == "memory":
        _no_options(url, options)
        return process_memory_store()
    if url.scheme == "file":
        _no_options(url, options)
        path = Path(url.path)
        _check_path_length(url, path)
        if path.exists() and not path.is_dir():
            raise InvalidURLError(f"{url} is a file, not a folder; a file store is a folder")
        return local_backend(url, create=False)
    env = environment() if environ is None else environ
    config_opts, client_options = _split_options(options)
    for key, value in environment_client_options(url.scheme, env).items():
        client_options.setdefault(key, value)  # explicit options win over the environment
    client: Any = client_options
    client_options.setdefault("timeout", dt.timedelta(seconds=config.request_timeout_s))
    client_options.setdefault("connect_timeout", dt.timedelta(seconds=config.connect_timeout_s))
    # Tessera retries (and counts every try) itself; obstore must not retry behind its back.
    retry: Any = {"max_retries": 0, "retry_timeout": dt.timedelta(seconds=config.request_timeout_s)}
    try:
        if url.scheme == "s3":
            s3_opts = {canonical_option("s3", k): v for k, v in config_opts.items()}
            if (s3_opts.get("endpoint") and "region" not in s3_opts
                    and not any(env.get(v) for v in _S3_REGION_VARS)):
                s3_opts["region"] = "us-east-1"  # S3-compatible servers rarely care
            return S3Store(url.bucket, client_options=client, retry_config=retry,
                           **s3_opts)
        if url.scheme == "gs":
            return GCSStore(url.bucket, client_options=client, retry_config=retry,
                            **config_opts)
        return AzureStore(url.bucket, client_options=client, retry_config=retry,
                          **config_opts)
    except Exception as err:  # obstore's builder errors are terse: say what to check
        env_prefix = ENV_PREFIXES[url.scheme]
        plain_http = any(isinstance(v, str) and v.startswith("http://")
                         for v in (*options.values(), *env.values()))
        raise ConfigError(
            f"cannot open {url}: {short_detail(err)}. Check the storage options "
            f"({', '.join(sorted(options)) or 'none given'}) and the standard environment "
            f"variables ({env_prefix}*)"
            + (f"; a plain-HTTP endpoint needs allow_http=True or {env_prefix}ALLOW_HTTP=true"
               if plain_http else "")
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
        if key in CLIENT_OPTION_KEYS:
            client[key] = value
        else:
            config[key] = value
    return config, client


def _no_options(url: StoreURL, options: dict[str, Any]) -> None:
    if options:
        raise ConfigError(
            f"{url.scheme}:// stores take no storage options, got {', '.join(sorted(options))}"
        )
