"""Tessera's one exception hierarchy.

Every error Tessera raises derives from :class:`TesseraError`. Storage errors carry the
object they concern (``url`` and ``key``) and say what to do next. Where Python has a
matching builtin, the error also derives from it, so ``except FileNotFoundError`` keeps
working for code that does not know Tessera:

>>> import tessera
>>> store = tessera.open_store("memory://doc-errors")
>>> try:
...     store.get("no/such/object")
... except FileNotFoundError as err:
...     print(type(err).__name__)
ObjectNotFoundError
"""

from __future__ import annotations

from typing import Any


class TesseraError(Exception):
    """Root of every error raised by Tessera."""


class ConfigError(TesseraError, ValueError):
    """A configuration value or environment variable is invalid."""


class ForkSafetyError(TesseraError, RuntimeError):
    """I/O was attempted in a process forked after its parent had done Tessera I/O (the
    I/O runtime does not survive fork); start workers with ``spawn`` (as every
    ``tessera.torch`` loader does) or ``forkserver``."""


class WorkerError(TesseraError, RuntimeError):
    """A DataLoader worker could not start or died; the message says what Tessera could see
    (most often: the main script runs its work again in every worker because it lacks an
    ``if __name__ == "__main__":`` guard)."""


class InvalidURLError(TesseraError, ValueError):
    """A store URL cannot be parsed or names an unsupported scheme."""


class InvalidKeyError(TesseraError, ValueError):
    """An object key is malformed or would escape the store root."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(
            f"invalid object key {key!r}: {reason}. Keys are relative paths below the store "
            "root, made of non-empty segments separated by '/', without '.' or '..'."
        )


class StorageError(TesseraError):
    """A request to an object store failed.

    Attributes:
        url: the store's URL.
        key: the object key (relative to the store root), or ``None`` for store-wide calls.
        op: the operation that failed (``get``, ``range``, ``put``, ...).
    """

    hint = ""

    def __init__(self, message: str, *, url: str, key: str | None, op: str) -> None:
        self.url = url
        self.key = key
        self.op = op
        self.detail = message
        where = f"{url.rstrip('/')}/{key}" if key else url
        text = f"{op} {where}: {message}"
        if self.hint:
            text = f"{text}. {self.hint}"
        super().__init__(text)


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """The object does not exist."""

    hint = "Check the URL and key; list the store with `tessera ls URL`"


class ObjectExistsError(StorageError, FileExistsError):
    """A create-only put found an object already at that key."""

    hint = "Use mode='overwrite' to replace it, or choose another key"


class PreconditionFailedError(StorageError):
    """A conditional request (for example put with a matching ETag) found another version."""

    hint = "The object changed since it was read; read it again and retry"


class InvalidRangeError(StorageError, ValueError):
    """A byte range starts past the end of the object or is malformed."""


class AccessDeniedError(StorageError, PermissionError):
    """The store refused the credentials or the permission for this request."""

    hint = "Check the credentials (AWS_*/GOOGLE_*/AZURE_* variables or store options)"


class TransientStorageError(StorageError):
    """A failure that may succeed when retried (5xx, throttling, reset or timed-out connection).

    Raised only after the store's retry policy has given up.
    """

    hint = "The store kept failing after retries; raise TESSERA_RETRY_MAX_ATTEMPTS or retry later"


class PermanentStorageError(StorageError):
    """A failure that retrying will not fix (bad request, unsupported operation, ...)."""


class StorageConfigError(StorageError, ConfigError):
    """The store is configured so that no request can be made (for example a plain-HTTP
    endpoint while plain HTTP is off); raised at the first request, never retried. Also a
    :class:`ConfigError` (and a ``ValueError``)."""

    hint = ("Retrying cannot fix this: correct the storage options or the environment "
            "variables")


class InvalidArgumentError(TesseraError, ValueError):
    """An argument of a Tessera call is invalid (a mode, a fragment name, values that do not
    fit a write, ...); the message names the argument and what would fit."""


class InvalidTypeError(TesseraError, TypeError):
    """An argument has a type Tessera cannot use (values that do not cast safely to an
    attribute's dtype, a pushdown server that is neither a URL nor a client, ...)."""


class NameNotFoundError(TesseraError, KeyError):
    """A name does not exist where it was looked up (a group, dataset or attribute of the
    h5py-shaped facade, an image of a detector's index)."""


class SchemaError(TesseraError, ValueError):
    """An array schema is invalid; the message names the field and why."""


class ArrayExistsError(TesseraError, FileExistsError):
    """Something already exists where an array was to be created."""


class ArrayNotFoundError(TesseraError, FileNotFoundError):
    """No array (no schema object) at that URI."""


class DataNotFoundError(TesseraError, FileNotFoundError):
    """``tessera.open`` found no array, tensor table, image set or tessera.h5 file at a
    URL; the message says what is there instead."""


class PlaceNotEmptyError(TesseraError, FileExistsError):
    """A copy's destination already holds objects (Tessera never merges two datasets)."""


class ReadOnlyError(TesseraError, PermissionError):
    """A write was attempted through an array handle opened with mode='r'."""


class SelectionError(TesseraError, IndexError):
    """A selection is out of the array's domain or malformed."""


class CorruptDataError(TesseraError):
    """Stored data failed its checksum, is truncated, or is missing.

    The message names the array, fragment, attribute and tile; the fragment should be
    restored from a copy or removed (its commit marker first) so readers skip it.

    Attributes (``None`` where the error is not about one tile; set by the array engine on
    a tile's error, so callers need not parse the message):
        array: the array's URL.
        fragment: the fragment's name.
        attr: the attribute.
        tile: the space tile's index.
        key: the data object holding the tile.
    """

    array: str | None = None
    fragment: str | None = None
    attr: str | None = None
    tile: tuple[int, ...] | None = None
    key: str | None = None


class HistoryVacuumedError(TesseraError, LookupError):
    """Time travel asked for a moment whose fragments were vacuumed after a consolidation."""


class BeforeFirstCommitError(TesseraError, LookupError):
    """An array, table or image set was opened at a point in time before its first commit;
    ``first_commit`` (an aware datetime) says when that was."""

    def __init__(self, message: str, first_commit: Any = None) -> None:
        super().__init__(message)
        self.first_commit = first_commit


class TableExistsError(TesseraError, FileExistsError):
    """Something already exists where a tensor table was to be created."""


class TableNotFoundError(TesseraError, FileNotFoundError):
    """No tensor table at that URL."""


class TableVersionError(TesseraError, LookupError):
    """A tensor table has no such version (the message gives the existing range)."""


class TensorExistsError(TesseraError, FileExistsError):
    """A tensor with that id exists and the write asked for ``mode="error"``."""


class TensorNotFoundError(TesseraError, KeyError, FileNotFoundError):
    """No tensor with that id in the table (at the handle's version)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InvalidTensorIdError(TesseraError, ValueError):
    """A tensor id breaks the allowed pattern (the message gives it)."""


class FormatError(TesseraError, ValueError):
    """A tensor cannot be stored as asked: an unsupported dtype or input, an unknown storage
    format, or format parameters out of their range (the message gives the valid ones)."""


class MemoryLimitError(TesseraError, MemoryError):
    """A read would materialize more bytes than the configured limit allows (the message
    says how to read it sparsely or raise the limit)."""


class UnsupportedStoreError(TesseraError, ValueError):
    """A store lacks a capability a feature needs (e.g. atomic create-only puts, without
    which concurrent table commits could be lost)."""


class CommitConflictError(TesseraError, RuntimeError):
    """A table commit conflicted with a concurrent one (retryable; the message names the
    operation)."""


class ProtocolError(TesseraError, ValueError):
    """A pushdown request or response is malformed (HTTP 400 on the server side)."""

    status = 400


class ForbiddenKeyError(ProtocolError):
    """A pushdown request names an object outside the served root (HTTP 403)."""

    status = 403


class LimitError(ProtocolError):
    """A pushdown request asks for more than the server's limits allow (HTTP 413)."""

    status = 413


class UnknownModelError(ProtocolError):
    """An infer request names a model the server does not host (HTTP 404)."""

    status = 404


class WeightsMismatchError(ProtocolError):
    """An infer request pins other weights than the server's (HTTP 409): features would
    differ from the client's own computation."""

    status = 409


class ServerBusyError(ProtocolError):
    """The server cannot take the request now (HTTP 503, with ``Retry-After``): its infer
    slots and queue are full, or memory ran out even at the smallest batch."""

    status = 503


class UnprocessableError(ProtocolError):
    """The request is well formed but its input cannot be used (HTTP 422): a damaged or
    missing tile of the samples, samples outside the array, an array of another shape."""

    status = 422


class FeatureMismatchError(TesseraError):
    """Features computed beside the store differ from the same layers computed here; the
    message names the model, the split, both sides' weights and the likely cause."""


class PushdownError(TesseraError):
    """A pushdown server could not answer (unreachable, refused, timed out, or answered
    something malformed). Reads catch it and fetch the tiles themselves; the message says
    which server and why.

    Attributes:
        status: the HTTP status the server answered, or ``None`` when there was none.
        retry_after_s: the seconds its ``Retry-After`` header asked a busy server's clients
            to wait (``None`` without one).
    """

    def __init__(self, message: str, status: int | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class TesseraWarning(UserWarning):
    """Root of the warnings Tessera issues (filter them with ``warnings.filterwarnings``)."""


class PushdownFallbackWarning(TesseraWarning):
    """Reads of an array fell back from its pushdown server to fetching tiles directly: the
    data is right, the read moved more bytes. Issued once per array handle and reason; the
    read's report (``arr.last_read``) counts the tiles by reason."""
