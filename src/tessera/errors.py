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
    """Root of every error raised by Tessera.

    >>> import tessera
    >>> try:
    ...     tessera.open("memory://doc-err-root")
    ... except tessera.TesseraError as err:  # every error Tessera raises
    ...     print(type(err).__name__)
    DataNotFoundError
    """


class ConfigError(TesseraError, ValueError):
    """A configuration value or environment variable is invalid.

    >>> from tessera.config import Config
    >>> Config.from_env({"TESSERA_READ_REFRESH_S": "soon"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.ConfigError: environment variable TESSERA_READ_REFRESH_S='soon' is not ...
    """


class ForkSafetyError(TesseraError, RuntimeError):
    """I/O was attempted in a process forked after its parent had done Tessera I/O (the
    I/O runtime does not survive fork); start workers with ``spawn`` (as every
    ``tessera.torch`` loader does) or ``forkserver``.

    >>> issubclass(ForkSafetyError, RuntimeError)  # raised in a forked child, not a spawned one
    True
    """


class WorkerError(TesseraError, RuntimeError):
    """A DataLoader worker could not start or died; the message says what Tessera could see
    (most often: the main script runs its work again in every worker because it lacks an
    ``if __name__ == "__main__":`` guard).

    >>> issubclass(WorkerError, RuntimeError)  # a DataLoader worker died or could not start
    True
    """


class InvalidURLError(TesseraError, ValueError):
    """A store URL cannot be parsed or names an unsupported scheme.

    >>> import tessera
    >>> tessera.open_store("ftp://host/data")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.InvalidURLError: ...
    """


class InvalidKeyError(TesseraError, ValueError):
    """An object key is malformed or would escape the store root.

    >>> import tessera
    >>> tessera.open_store("memory://doc-err-key").get("../outside")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.InvalidKeyError: invalid object key '../outside': ...
    """

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

    >>> import tessera
    >>> try:
    ...     tessera.open_store("memory://doc-err-storage").get("missing")
    ... except tessera.StorageError as err:
    ...     print(err.op, err.key)
    get missing
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
    """The object does not exist.

    >>> import tessera
    >>> try:
    ...     tessera.open_store("memory://doc-err-notfound").head("missing")
    ... except FileNotFoundError as err:
    ...     print(type(err).__name__)
    ObjectNotFoundError
    """

    hint = "Check the URL and key; list the store with `tessera ls URL`"


class ObjectExistsError(StorageError, FileExistsError):
    """A create-only put found an object already at that key.

    >>> import tessera
    >>> store = tessera.open_store("memory://doc-err-exists")
    >>> _ = store.put("a", b"1", mode="create")
    >>> store.put("a", b"2", mode="create")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.ObjectExistsError: ...
    """

    hint = "Use mode='overwrite' to replace it, or choose another key"


class PreconditionFailedError(StorageError):
    """A conditional request (for example put with a matching ETag) found another version.

    >>> issubclass(PreconditionFailedError, StorageError)  # a conditional put lost its race
    True
    """

    hint = "The object changed since it was read; read it again and retry"


class InvalidRangeError(StorageError, ValueError):
    """A byte range starts past the end of the object or is malformed.

    >>> issubclass(InvalidRangeError, ValueError)  # a byte range past the object's end
    True
    """


class AccessDeniedError(StorageError, PermissionError):
    """The store refused the credentials or the permission for this request.

    >>> issubclass(AccessDeniedError, PermissionError)  # the store refused the credentials
    True
    """

    hint = "Check the credentials (AWS_*/GOOGLE_*/AZURE_* variables or store options)"


class TransientStorageError(StorageError):
    """A failure that may succeed when retried (5xx, throttling, reset or timed-out connection).

    Raised only after the store's retry policy has given up.

    >>> issubclass(TransientStorageError, StorageError)  # raised once the retries are spent
    True
    """

    hint = "The store kept failing after retries; raise TESSERA_RETRY_MAX_ATTEMPTS or retry later"


class PermanentStorageError(StorageError):
    """A failure that retrying will not fix (bad request, unsupported operation, ...).

    >>> issubclass(PermanentStorageError, StorageError)  # retrying will not help
    True
    """


class StorageConfigError(StorageError, ConfigError):
    """The store is configured so that no request can be made (for example a plain-HTTP
    endpoint while plain HTTP is off); raised at the first request, never retried. Also a
    :class:`ConfigError` (and a ``ValueError``).

    >>> issubclass(StorageConfigError, ConfigError)  # a store option that does not fit
    True
    """

    hint = ("Retrying cannot fix this: correct the storage options or the environment "
            "variables")


class InvalidArgumentError(TesseraError, ValueError):
    """An argument of a Tessera call is invalid (a mode, a fragment name, values that do not
    fit a write, ...); the message names the argument and what would fit.

    >>> import numpy as np, tessera
    >>> _ = tessera.from_numpy("memory://doc-err-arg", np.zeros(4))
    >>> tessera.open_array("memory://doc-err-arg", mode="x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.InvalidArgumentError: mode must be 'r' ...
    """


class InvalidTypeError(TesseraError, TypeError):
    """An argument has a type Tessera cannot use (values that do not cast safely to an
    attribute's dtype, a pushdown server that is neither a URL nor a client, ...).

    >>> issubclass(InvalidTypeError, TypeError)  # an argument of the wrong type
    True
    """


class NameNotFoundError(TesseraError, KeyError):
    """A name does not exist where it was looked up (a group, dataset or attribute of the
    h5py-shaped facade, an image of a detector's index).

    >>> import numpy as np, tessera
    >>> arr = tessera.from_numpy("memory://doc-err-name", np.zeros(4))
    >>> arr.metadata["units"]  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.NameNotFoundError: "array memory://doc-err-name has no metadata key 'units'"
    """


class SchemaError(TesseraError, ValueError):
    """An array schema is invalid; the message names the field and why.

    >>> import tessera
    >>> tessera.ArraySchema([tessera.Dim("x", (5, 1), 2)], [tessera.Attr("v", "i4")])
    Traceback (most recent call last):
    ...
    tessera.errors.SchemaError: dims['x'].domain (5, 1): hi is below lo
    """


class ArrayExistsError(TesseraError, FileExistsError):
    """Something already exists where an array was to be created.

    >>> import numpy as np, tessera
    >>> _ = tessera.from_numpy("memory://doc-err-array-exists", np.zeros(4))
    >>> tessera.from_numpy("memory://doc-err-array-exists", np.zeros(4))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.ArrayExistsError: ...
    """


class ArrayNotFoundError(TesseraError, FileNotFoundError):
    """No array (no schema object) at that URI.

    >>> import tessera
    >>> tessera.open_array("memory://doc-err-no-array")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.ArrayNotFoundError: ...
    """


class DataNotFoundError(TesseraError, FileNotFoundError):
    """``tessera.open`` found no array, tensor table, image set or tessera.h5 file at a
    URL; the message says what is there instead.

    >>> import tessera
    >>> tessera.open("memory://doc-err-nothing")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.DataNotFoundError: memory://doc-err-nothing holds no array, ...
    """


class PlaceNotEmptyError(TesseraError, FileExistsError):
    """A copy's destination already holds objects (Tessera never merges two datasets).

    >>> issubclass(PlaceNotEmptyError, FileExistsError)  # a copy or import into a used place
    True
    """


class ReadOnlyError(TesseraError, PermissionError):
    """A write was attempted through an array handle opened with mode='r'.

    >>> import numpy as np, tessera
    >>> _ = tessera.from_numpy("memory://doc-err-ro", np.zeros(4))
    >>> tessera.open_array("memory://doc-err-ro")[0] = 1  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.ReadOnlyError: ...
    """


class SelectionError(TesseraError, IndexError):
    """A selection is out of the array's domain or malformed.

    >>> import numpy as np, tessera
    >>> tessera.from_numpy("memory://doc-err-sel", np.zeros(4))[7]  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.SelectionError: ...
    """


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

    >>> try:  # what a reader does with damaged bytes: name them, never return them
    ...     raise CorruptDataError("tile 3 of fragment f1: checksum mismatch")
    ... except TesseraError as err:
    ...     print(err)
    tile 3 of fragment f1: checksum mismatch
    """

    array: str | None = None
    fragment: str | None = None
    attr: str | None = None
    tile: tuple[int, ...] | None = None
    key: str | None = None


class HistoryVacuumedError(TesseraError, LookupError):
    """Time travel asked for a moment whose fragments were vacuumed after a consolidation.

    >>> issubclass(HistoryVacuumedError, LookupError)  # a point whose data vacuum removed
    True
    """


class BeforeFirstCommitError(TesseraError, LookupError):
    """An array, table or image set was opened at a point in time before its first commit;
    ``first_commit`` (an aware datetime) says when that was.

    >>> import numpy as np, tessera
    >>> _ = tessera.from_numpy("memory://doc-err-before", np.zeros(4))
    >>> tessera.open_array("memory://doc-err-before", at="2001-01-01")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tessera.errors.BeforeFirstCommitError: ...
    """

    def __init__(self, message: str, first_commit: Any = None) -> None:
        super().__init__(message)
        self.first_commit = first_commit


class TableExistsError(TesseraError, FileExistsError):
    """Something already exists where a tensor table was to be created.

    >>> issubclass(TableExistsError, FileExistsError)  # create_table on a place in use
    True
    """


class TableNotFoundError(TesseraError, FileNotFoundError):
    """No tensor table at that URL.

    >>> issubclass(TableNotFoundError, FileNotFoundError)  # open_table where none is
    True
    """


class TableVersionError(TesseraError, LookupError):
    """A tensor table has no such version (the message gives the existing range).

    >>> issubclass(TableVersionError, LookupError)  # a version the table never had
    True
    """


class TensorExistsError(TesseraError, FileExistsError):
    """A tensor with that id exists and the write asked for ``mode="error"``.

    >>> issubclass(TensorExistsError, FileExistsError)  # write(id, x) of an id already there
    True
    """


class TensorNotFoundError(TesseraError, KeyError, FileNotFoundError):
    """No tensor with that id in the table (at the handle's version).

    >>> issubclass(TensorNotFoundError, KeyError)  # table["missing"]
    True
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InvalidTensorIdError(TesseraError, ValueError):
    """A tensor id breaks the allowed pattern (the message gives it).

    >>> issubclass(InvalidTensorIdError, ValueError)  # an id a table cannot hold
    True
    """


class FormatError(TesseraError, ValueError):
    """A tensor cannot be stored as asked: an unsupported dtype or input, an unknown storage
    format, or format parameters out of their range (the message gives the valid ones).

    >>> issubclass(FormatError, ValueError)  # a tensor format or output that does not exist
    True
    """


class MemoryLimitError(TesseraError, MemoryError):
    """A read would materialize more bytes than the configured limit allows (the message
    says how to read it sparsely or raise the limit).

    >>> issubclass(MemoryLimitError, MemoryError)  # a dense read over the configured limit
    True
    """


class UnsupportedStoreError(TesseraError, ValueError):
    """A store lacks a capability a feature needs (e.g. atomic create-only puts, without
    which concurrent table commits could be lost).

    >>> issubclass(UnsupportedStoreError, ValueError)  # a store without what a kind needs
    True
    """


class CommitConflictError(TesseraError, RuntimeError):
    """A table commit conflicted with a concurrent one (retryable; the message names the
    operation).

    >>> issubclass(CommitConflictError, RuntimeError)  # a commit lost to another writer
    True
    """


class ProtocolError(TesseraError, ValueError):
    """A pushdown request or response is malformed (HTTP 400 on the server side).

    >>> issubclass(ProtocolError, ValueError)  # a pushdown request the server refused
    True
    """

    status = 400


class ForbiddenKeyError(ProtocolError):
    """A pushdown request names an object outside the served root (HTTP 403).

    >>> issubclass(ForbiddenKeyError, ProtocolError)  # a key outside the served root (403)
    True
    """

    status = 403


class LimitError(ProtocolError):
    """A pushdown request asks for more than the server's limits allow (HTTP 413).

    >>> issubclass(LimitError, ProtocolError)  # a request over a server limit (413)
    True
    """

    status = 413


class UnknownModelError(ProtocolError):
    """An infer request names a model the server does not host (HTTP 404).

    >>> issubclass(UnknownModelError, ProtocolError)  # a model the server does not host
    True
    """

    status = 404


class WeightsMismatchError(ProtocolError):
    """An infer request pins other weights than the server's (HTTP 409): features would
    differ from the client's own computation.

    >>> issubclass(WeightsMismatchError, ProtocolError)  # server weights differ from yours
    True
    """

    status = 409


class ServerBusyError(ProtocolError):
    """The server cannot take the request now (HTTP 503, with ``Retry-After``): its infer
    slots and queue are full, or memory ran out even at the smallest batch.

    >>> issubclass(ServerBusyError, ProtocolError)  # the server's queue is full (503)
    True
    """

    status = 503


class UnprocessableError(ProtocolError):
    """The request is well formed but its input cannot be used (HTTP 422): a damaged or
    missing tile of the samples, samples outside the array, an array of another shape.

    >>> issubclass(UnprocessableError, ProtocolError)  # the server could not compute (422)
    True
    """

    status = 422


class FeatureMismatchError(TesseraError):
    """Features computed beside the store differ from the same layers computed here; the
    message names the model, the split, both sides' weights and the likely cause.

    >>> issubclass(FeatureMismatchError, TesseraError)  # server and client features disagree
    True
    """


class PushdownError(TesseraError):
    """A pushdown server could not answer (unreachable, refused, timed out, or answered
    something malformed). Reads catch it and fetch the tiles themselves; the message says
    which server and why.

    Attributes:
        status: the HTTP status the server answered, or ``None`` when there was none.
        retry_after_s: the seconds its ``Retry-After`` header asked a busy server's clients
            to wait (``None`` without one).

    >>> issubclass(PushdownError, TesseraError)  # a pushdown failed and no fallback was allowed
    True
    """

    def __init__(self, message: str, status: int | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class TesseraWarning(UserWarning):
    """Root of the warnings Tessera issues (filter them with ``warnings.filterwarnings``).

    >>> import warnings
    >>> warnings.simplefilter("error", TesseraWarning)  # turn Tessera's warnings into errors
    >>> warnings.resetwarnings()
    """


class PushdownFallbackWarning(TesseraWarning):
    """Reads of an array fell back from its pushdown server to fetching tiles directly: the
    data is right, the read moved more bytes. Issued once per array handle and reason; the
    read's report (``arr.last_read``) counts the tiles by reason.

    >>> issubclass(PushdownFallbackWarning, TesseraWarning)  # tiles read directly instead
    True
    """
