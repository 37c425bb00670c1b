"""The URL and options of a tensor table, for deltalake: the same URLs and storage options as
:func:`tessera.open_store`, mapped to delta-rs's (``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``,
...; every value a string). ``memory://`` is refused: delta-rs's memory store does not
survive between calls, so a table there would vanish.

>>> delta_location("s3://bucket/ds/t", {"endpoint": "http://127.0.0.1:9000",
...                                      "allow_http": True})[1]["AWS_ALLOW_HTTP"]
'true'
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from tessera.config import Config, StoreConfig, TablesConfig
from tessera.errors import ConfigError, ObjectExistsError
from tessera.storage.backends import canonical_option
from tessera.storage.blocking import Store
from tessera.storage.url import parse_store_url

#: Tessera's S3 option names -> delta-rs keys (aliases are mapped to these names by the
#: storage layer, :func:`tessera.storage.backends.canonical_option`, first).
_S3 = {"endpoint": "AWS_ENDPOINT_URL", "region": "AWS_REGION",
       "access_key_id": "AWS_ACCESS_KEY_ID", "secret_access_key": "AWS_SECRET_ACCESS_KEY",
       "session_token": "AWS_SESSION_TOKEN", "allow_http": "AWS_ALLOW_HTTP"}
_GS = {"service_account": "GOOGLE_SERVICE_ACCOUNT",
       "service_account_key": "GOOGLE_SERVICE_ACCOUNT_KEY", "allow_http": "allow_http"}
_AZ = {"account_name": "AZURE_STORAGE_ACCOUNT_NAME", "account_key": "AZURE_STORAGE_ACCOUNT_KEY",
       "sas_key": "AZURE_STORAGE_SAS_KEY", "allow_http": "allow_http"}
_COMMON = {"timeout": "timeout", "connect_timeout": "connect_timeout"}


def delta_location(url: str, options: dict[str, Any] | None = None,
                   config: StoreConfig | None = None) -> tuple[str, dict[str, str]]:
    """``(table uri, storage_options)`` for deltalake, or a ``ConfigError`` naming the
    unknown options (or the memory store)."""
    parsed = parse_store_url(url)
    options = dict(options or {})
    if parsed.scheme == "memory":
        raise ConfigError(f"{url}: tensor tables need a persistent store; deltalake's memory "
                          "store does not survive between calls, so the table would vanish. "
                          "Use file:// (or s3://, gs://, az://)")
    if parsed.scheme == "file":
        if options:
            raise ConfigError(f"a file:// table takes no storage options, got "
                              f"{', '.join(sorted(options))}")
        return parsed.path, {}
    names = {"s3": _S3, "gs": _GS, "az": _AZ}[parsed.scheme] | _COMMON
    options = {canonical_option(parsed.scheme, k): v for k, v in options.items()}
    unknown = sorted(k for k in options if k not in names)
    if unknown:
        raise ConfigError(f"unknown storage option(s) for a {parsed.scheme}:// tensor table: "
                          f"{', '.join(unknown)}; known: {', '.join(sorted(names))}")
    out: dict[str, str] = {}
    for key, value in options.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        out[names[key]] = str(value)
    if parsed.scheme == "s3" and "AWS_ENDPOINT_URL" in out and "AWS_REGION" not in out:
        out["AWS_REGION"] = "us-east-1"  # S3-compatible servers rarely care
    cfg = config or StoreConfig.from_env()
    out.setdefault("timeout", f"{int(cfg.request_timeout_s)}s")
    out.setdefault("connect_timeout", f"{int(cfg.connect_timeout_s)}s")
    return str(parsed), out


def create_only_works(store: Store) -> bool:
    """Whether the store refuses a second create-only put of one key."""
    key = f"_tessera/probe-{uuid.uuid4().hex}"
    store.put(key, b"1", mode="create")
    try:
        store.put(key, b"2", mode="create")
    except ObjectExistsError:
        return True
    finally:
        store.delete(key)
    return False


def table_settings(config: Config | TablesConfig | None) -> Config:
    """One :class:`~tessera.config.Config` snapshot for a table handle: the one given, one
    read now with the given tables' settings in it, or one read now."""
    if isinstance(config, Config):
        return config
    settings = Config.from_env()
    return settings if config is None else dataclasses.replace(settings, tables=config)
