"""TensorTable on file:// and the S3 test server: every format round trips through the table,
slices read only the row groups that hold them, auto at the 10% boundary, inputs from torch
and scipy, plain deltalake reads the table, versions and time travel, overwrite, ids,
deletes, and the errors of bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tessera.errors import (
    ConfigError,
    FormatError,
    InvalidArgumentError,
    InvalidTensorIdError,
    MemoryLimitError,
    ReadOnlyError,
    SchemaError,
    SelectionError,
    TableExistsError,
    TableNotFoundError,
    TableVersionError,
    TensorExistsError,
    TensorNotFoundError,
    UnsupportedStoreError,
)
from tessera.tables import TensorTable


def _sparse(shape, density, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = np.zeros(shape, dtype)
    mask = rng.random(shape) < density
    x[mask] = rng.integers(1, 100, int(mask.sum()))
    return x


@pytest.fixture
def table(table_url):
    url, options = table_url
    return TensorTable.create(url, storage_options=options)


@pytest.mark.parametrize("fmt", ["ftsf", "coo", "csr", "csc", "csf", "bsgs"])
def test_every_format_round_trips_and_slices(table, fmt) -> None:
    x = _sparse((12, 5, 7), 0.08, seed=1)
    info = table.write(f"t/{fmt}", x, format=fmt)
    assert (info.layout, info.shape, info.dtype) == (fmt, (12, 5, 7), "float32")
    t = TensorTable.open(table.url, storage_options=table._options)[f"t/{fmt}"]
    assert (t.shape, t.dtype, t.layout, t.nnz) == ((12, 5, 7), "float32", fmt,
                                                  int(np.count_nonzero(x)))
    assert np.array_equal(t.numpy(), x)
    for sel in [(3,), (slice(2, 9, 3), 1), (-1, slice(None), slice(None, None, -2)),
                (Ellipsis, 4), (slice(5, 5),)]:
        assert np.array_equal(t[sel], x[sel]), sel
    sparse = t.to_sparse()
    assert np.array_equal(sparse.to_dense(), x)


def test_a_slice_reads_only_its_row_groups(table) -> None:
    table.config = type(table.config)(chunk_bytes=4096, sparse_row_bytes=4096)
    x = np.arange(64 * 32 * 16, dtype=np.float32).reshape(64, 32, 16)  # 2 KiB fibers
    table.write("dense", x, format="ftsf", chunk_dim=1)  # rows of 64 B: many per group
    big = np.random.default_rng(0).random((40, 1024))  # incompressible 8 KiB rows
    table.write("big", big, format="ftsf")  # one row per row group
    t = table["big"]
    assert np.array_equal(t[7:9], big[7:9])
    report = table.last_read
    assert report.row_groups == 2
    read = sum(r.nbytes for r in report.reads)
    assert 2 * 8192 <= read < 4 * 8192  # the two rows' chunks, not the 320 KiB tensor
    assert report.stats.requests <= 3
    assert "row groups" in str(t.explain(slice(7, 9)))
    assert np.array_equal(table["dense"][10, 3], x[10, 3])


def test_auto_follows_the_ten_percent_rule(table) -> None:
    n = 1000
    below = np.zeros(n, np.float32)
    below[:99] = 1.0
    above = np.zeros(n, np.float32)
    above[:101] = 1.0
    low = table.write("below", below.reshape(10, 100))
    high = table.write("above", above.reshape(10, 100))
    assert low.layout in ("bsgs", "ftsf") and "0.099" not in low.reason
    assert low.layout != "ftsf" or "dense" in low.reason
    assert high.layout == "ftsf" and ">= 10%" in high.reason
    assert table.write("w", below.reshape(10, 100), optimize_for="write").layout == "csf"
    assert table.write("none", np.zeros((4, 4), np.int16)).layout == "bsgs"
    assert table["none"].numpy().shape == (4, 4) and not table["none"].numpy().any()


def test_inputs_from_torch_and_scipy(table) -> None:
    torch = pytest.importorskip("torch")
    import scipy.sparse

    dense = torch.arange(24, dtype=torch.bfloat16).reshape(2, 3, 4)
    table.write("bf16", dense)
    back = table["bf16"].torch()
    assert back.dtype == torch.bfloat16 and torch.equal(back, dense)
    with pytest.raises(FormatError, match="numpy has no bfloat16"):
        table["bf16"].numpy()
    coo = torch.sparse_coo_tensor([[0, 1, 1], [2, 0, 0]], [1.0, 2.0, 3.0], (2, 3))  # repeats
    table.write("coo", coo)
    assert torch.equal(table["coo"].torch().to_dense(), coo.to_dense())
    sparse_rows = torch.zeros(30, 30)
    sparse_rows[0, 2], sparse_rows[2, 0], sparse_rows[29, 29] = 5.0, 7.0, 1.0
    csr = sparse_rows.to_sparse_csr()  # 0.3% dense: a CSR input stays CSR
    info = table.write("csr", csr)
    assert info.layout == "csr"
    assert np.array_equal(table["csr"].numpy(), csr.to_dense().numpy())
    csc = sparse_rows.to_sparse_csc()
    assert table.write("csc", csc).layout == "csc"
    assert np.array_equal(table["csc"][2], sparse_rows[2].numpy())
    bsr = torch.zeros(8, 8)
    bsr[0:2, 4:6] = 3.0
    table.write("bsr", bsr.to_sparse_bsr((2, 2)))
    assert np.array_equal(table["bsr"].numpy(), bsr.numpy())
    m = scipy.sparse.random(30, 40, density=0.02, random_state=1, format="csr")
    table.write("scipy", m)
    assert np.allclose(table["scipy"].numpy(), m.toarray())
    f_order = np.asfortranarray(np.arange(6, dtype=np.uint64).reshape(2, 3))[:, ::-1]
    table.write("strided", f_order)
    got = table["strided"].numpy()
    assert got.dtype == np.uint64 and np.array_equal(got, f_order)


def test_plain_deltalake_reads_the_table(table) -> None:
    from deltalake import DeltaTable

    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    table.write("plain", x, format="ftsf", metadata={"source": "test"})
    uri, options = table._uri, table._delta_options
    rows = DeltaTable(uri, storage_options=options or None).to_pyarrow_table().to_pylist()
    header = next(r for r in rows if r["kind"] == "header")
    assert header["dense_shape"] == [4, 5] and header["dtype"] == "int32"
    assert json.loads(header["metadata"]) == {"source": "test"}
    chunks = sorted((r for r in rows if r["kind"] == "data"), key=lambda r: r["chunk_index"])
    decoded = np.concatenate([np.frombuffer(r["values"], "<i4") for r in chunks])
    assert np.array_equal(decoded.reshape(4, 5), x)  # the documented schema, by hand


def test_versions_time_travel_overwrite_and_delete(table) -> None:
    table.write("a", np.ones(3))
    table.write("b", np.zeros((2, 2)))
    v2 = table.version
    table.write("a", np.full(3, 7.0), mode="overwrite")
    assert table["a"].numpy().tolist() == [7.0, 7.0, 7.0]
    with pytest.raises(TensorExistsError, match="mode='overwrite'"):
        table.write("a", np.ones(3))
    assert table.write("a", np.ones(3), mode="ignore").reason.startswith("exists")
    old = TensorTable.open(table.url, at=v2, storage_options=table._options)
    assert old["a"].numpy().tolist() == [1.0, 1.0, 1.0] and len(old) == 2
    with pytest.raises(ReadOnlyError):
        old.write("c", np.ones(1))
    assert table.delete("b") == 1
    assert table.ids() == ["a"] and "b" not in table
    assert sorted(TensorTable.open(table.url, at=v2,
                                   storage_options=table._options).ids()) == ["a", "b"]
    table.write_many({"p/1": np.ones(2), "p/2": np.ones(2), "q": np.ones(2)})
    assert table.ids(prefix="p/") == ["p/1", "p/2"]
    assert table.delete(prefix="p/") == 2 and table.ids() == ["a", "q"]
    history = table.history()
    assert history[-1].marker == table.version and history[0].operation == "create"
    assert [c.marker for c in history] == list(range(table.version + 1))
    assert history[-1].operation == "delete" and history[-1].removed >= 1
    table.restore(v2)
    assert sorted(table.ids()) == ["a", "b"]
    with pytest.raises(TableVersionError, match="no version 999"):
        TensorTable.open(table.url, at=999, storage_options=table._options)


def test_write_many_is_one_commit(table) -> None:
    before = table.version
    infos = table.write_many({f"m/{i}": np.full((2, 2), i) for i in range(5)})
    assert table.version == before + 1 and {i.version for i in infos} == {before + 1}
    assert len(table) == 5


def test_bad_inputs_get_errors_that_say_what_to_do(table, tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"[Uu]se file://"):
        TensorTable.create("memory://nope")
    with pytest.raises(TableExistsError, match="not empty"):
        TensorTable.create(table.url, storage_options=table._options)
    with pytest.raises(TableNotFoundError, match=r"TensorTable\.create"):
        TensorTable.open((tmp_path / "none").as_uri())
    for bad in ["", "/abs", "a/../b", "it's", "x" * 257, "sp ace"]:
        with pytest.raises(InvalidTensorIdError, match="1 to 256 characters"):
            table.write(bad, np.ones(1))
    with pytest.raises(FormatError, match="unknown format 'dense'"):
        table.write("x", np.ones(2), format="dense")
    with pytest.raises(FormatError, match="supported"):
        table.write("x", np.array(["a", "b"]))
    with pytest.raises(FormatError, match="dense only"):
        table.write("x", np.ones(2, np.complex64), format="coo")
    with pytest.raises(FormatError, match="block_shape must be 2"):
        table.write("x", np.ones((2, 2)), format="bsgs", block_shape=(1,))
    with pytest.raises(InvalidArgumentError, match="unknown write option"):
        table.write("x", np.ones(2), blocks=3)
    with pytest.raises(InvalidArgumentError, match="mode must be one of"):
        table.write("x", np.ones(2), mode="append")
    table.write("x", np.ones((3, 4)))
    with pytest.raises(TensorNotFoundError, match=r"no tensor 'emb/2'.*did you mean 'emb/1'"):
        table.write("emb/1", np.ones(1))
        table["emb/2"]
    with pytest.raises(SelectionError, match="index 3 is outside dimension 0's domain"):
        table["x"][3]
    with pytest.raises(SelectionError, match="must be a non-zero integer"):
        table["x"][::0]
    with pytest.raises(SelectionError, match="too many indices: 3"):
        table["x"][0, 0, 0]
    table.config = type(table.config)(max_dense_bytes=8)
    table.write("s", _sparse((10, 10), 0.03), format="coo")
    with pytest.raises(MemoryLimitError, match="output='sparse'"):
        table["s"].numpy()
    assert table["s"].read(output="sparse").nnz == table["s"].nnz
    with pytest.raises(InvalidArgumentError, match="168-hour"):
        table.vacuum(retention_hours=0)
    with pytest.raises(InvalidArgumentError, match="strings to strings"):
        table.write("m", np.ones(1), metadata={"a": 1})


def test_a_store_ignoring_create_only_puts_is_refused(tmp_path, monkeypatch) -> None:
    from tessera.storage.blocking import Store

    original = Store.put

    def careless(self, key, data, *, mode="overwrite", **kw):  # ignores If-None-Match
        return original(self, key, data, mode="overwrite", **kw)

    monkeypatch.setattr(Store, "put", careless)
    with pytest.raises(UnsupportedStoreError, match="allow_unsafe_single_writer"):
        TensorTable.create((tmp_path / "t").as_uri())
    single = TensorTable.create((tmp_path / "t").as_uri(), allow_unsafe_single_writer=True)
    assert single.version == 0


def test_a_delta_table_that_is_not_a_tensor_table_is_refused(tmp_path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "other"), pa.table({"a": [1, 2]}))
    with pytest.raises(SchemaError, match="not a tensor table"):
        TensorTable.open((tmp_path / "other").as_uri())


def test_more_bad_inputs_name_what_is_wrong(table, tmp_path, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    from deltalake import DeltaTable

    from tessera.errors import CommitConflictError, ConfigError
    from tessera.tables.tensors import coo_tensor

    with pytest.raises(TensorNotFoundError, match="no tensor 'nope'"):
        table.delete("nope")
    with pytest.raises(FormatError, match="NaN"):
        coo_tensor((3,), np.array([[np.nan]]), np.array([1.0]))
    with pytest.raises(FormatError, match=r"coordinates must be \(nnz, 2\)"):
        coo_tensor((3, 3), np.array([[0, 1], [1, 1]]), np.array([1.0]))
    with pytest.raises(FormatError, match="meta device"):
        table.write("m", torch.empty(3, device="meta"))
    q = torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8)
    with pytest.raises(FormatError, match=r"\.dequantize\(\)"):
        table.write("q", q)
    with pytest.raises(ConfigError, match=r"unknown storage option.*bogus"):
        TensorTable.create("s3://bucket/x", storage_options={"bogus": "1"})
    # a newer format version in the table's description
    url = (tmp_path / "newer").as_uri()
    TensorTable.create(url)
    dt_ = DeltaTable(str(tmp_path / "newer"))
    dt_.alter.set_table_description('{"format": "tensor-table", "version": 99}')
    with pytest.raises(SchemaError, match="format version 99, newer"):
        TensorTable.open(url)
    # a lost race on a non-append commit
    from deltalake.exceptions import CommitFailedError

    import tessera.tables.table as module

    table.write("race", np.ones(2))

    def lose(*args, **kwargs):
        raise CommitFailedError("version 7 already exists")

    monkeypatch.setattr("deltalake.write_deltalake", lose)
    with pytest.raises(CommitConflictError, match="retry"):
        table.write("race", np.zeros(2), mode="overwrite")
    assert module.COMMIT_RETRIES >= 100


FORKED = """
import os, sys, numpy as np
from tessera.tables import TensorTable
t = TensorTable.create(sys.argv[1])
t.write("a", np.ones(2))
pid = os.fork()
if pid == 0:
    try:
        TensorTable.open(sys.argv[1])["a"].numpy()
        os._exit(3)
    except Exception as err:
        print(type(err).__name__, str(err)[:60], flush=True)
        os._exit(0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_gets_a_fork_safety_error(tmp_path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FORKED, (tmp_path / "t").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "ForkSafetyError" in done.stdout, done.stdout + done.stderr


def test_without_the_extra_the_import_names_it() -> None:
    import subprocess
    import sys

    code = ("import sys; sys.modules['deltalake'] = None\n"
            "import tessera.torch, tessera.dask  # need no tables extra until used\n"
            "try:\n    import tessera.tables\nexcept ImportError as e:\n    print(e)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert "pip install 'tessera[tables]'" in done.stdout, done.stdout + done.stderr


def test_the_table_explains_a_read(table) -> None:
    table.write("e", np.arange(40.0).reshape(10, 4))
    text = str(table.explain("e", slice(2, 4)))
    assert "tensor 'e' (10, 4) float64 as ftsf" in text and "request" in text


def test_a_registered_layout_writes_and_reads(table) -> None:
    """A new format in a dozen lines: FTSF's encoding under another name, registered once;
    writes with format='halves' store it and reads find it by the name in its rows."""
    from tessera.tables import LAYOUTS, register_layout
    from tessera.tables.layouts.ftsf import FtsfLayout

    class Halves(FtsfLayout):
        name = "halves"

    register_layout(Halves())
    try:
        x = np.arange(24, dtype=np.float32).reshape(4, 6)
        info = table.write("h", x, format="halves")
        assert info.layout == "halves" and table["h"].layout == "halves"
        assert np.array_equal(table["h"].numpy(), x)
        assert np.array_equal(table["h"][1:3, ::2], x[1:3, ::2])
        with pytest.raises(FormatError, match="exists already"):
            register_layout(Halves())
        with pytest.raises(FormatError, match=r"known: 'auto'.*'halves'"):
            table.write("z", x, format="nope")
    finally:
        LAYOUTS.pop("halves")


def test_stored_bytes_are_the_files_the_commit_added(table) -> None:
    rng = np.random.default_rng(3)
    x = np.where(rng.random((64, 64)) < 0.02, rng.normal(size=(64, 64)), 0).astype(np.float32)
    before = {f.path for f in table.files()}
    info = table.write("sparse", x, format="coo")
    added = [f for f in table.files() if f.path not in before]
    assert added and info.stored_bytes == sum(f.size for f in added)
    assert info.encoded_bytes > 0 and info.encoded_bytes != info.stored_bytes
    infos = table.write_many({"a": np.ones(10), "b": np.zeros((3, 3))})
    stats = table.stats()
    assert stats.tensors == 3 and stats.version == table.version
    assert stats.stored_bytes == sum(f.size for f in table.files())
    assert infos[0].stored_bytes == infos[1].stored_bytes > 0
    assert stats.encoded_bytes >= info.encoded_bytes


def test_a_table_reads_its_settings_from_one_snapshot(table_url, monkeypatch) -> None:
    """TensorTable.open(config=) takes one Config (its tables and store parts); without one
    the environment is read once when the handle opens."""
    import dataclasses

    from tessera.config import Config, TablesConfig

    url, options = table_url
    cfg = Config.from_env({"TESSERA_TABLES_CODEC": "snappy", "TESSERA_STORE_MAX_CONCURRENCY": "5"})
    tt = TensorTable.create(url, storage_options=options, config=cfg)
    assert tt.config.codec == "snappy" and tt.store.aio.config.max_concurrency == 5
    tt.write("a", np.arange(6.0))
    assert np.array_equal(TensorTable.open(url, storage_options=options, config=cfg)["a"]
                          .numpy(), np.arange(6.0))
    own = TensorTable.open(url, storage_options=options, config=TablesConfig(codec="gzip"))
    assert own.config.codec == "gzip" and isinstance(own.settings, Config)
    monkeypatch.setenv("TESSERA_TABLES_CODEC", "lz4")
    plain = TensorTable.open(url, storage_options=options)
    monkeypatch.setenv("TESSERA_TABLES_CODEC", "gzip")  # after the open: not seen
    assert plain.config.codec == "lz4"
    assert dataclasses.replace(cfg, tables=TablesConfig()).tables.codec == "zstd"


def test_reads_of_a_folder_table_stay_on_the_calling_thread(table_url, monkeypatch) -> None:
    import tessera.tables.reader as reader

    url, options = table_url
    tt = TensorTable.create(url, storage_options=options)
    x = np.arange(600, dtype=np.float32).reshape(20, 30)
    tt.write("x", x)
    assert np.array_equal(tt["x"][3], x[3])  # the catalog and footers read once
    trips = []
    real = reader.run_sync
    monkeypatch.setattr(reader, "run_sync", lambda c: trips.append(c) or real(c))
    assert np.array_equal(tt["x"][5:7], x[5:7])
    assert (trips == []) == url.startswith("file://")  # S3: the loop's, concurrently
    assert tt.last_read.stats.requests >= 1
    before = tt.files()
    tt.write("y", x)  # a new version: its files are listed again
    assert len(tt.files()) == len(before) + 1


def test_row_groups_stream_through_the_read_window(table_url, monkeypatch) -> None:
    """On the loop, a file's column chunks take their bytes from the read's window before
    they are fetched and give them back once decoded (on a worker thread when large); the
    answer is the same."""
    import dataclasses

    import tessera.tables.reader as reader
    from tessera.config import Config
    from tessera.storage.window import ByteWindow

    windows: list[ByteWindow] = []

    class Spy(ByteWindow):
        def __init__(self, capacity: int) -> None:
            super().__init__(capacity)
            windows.append(self)

    monkeypatch.setattr(reader, "ByteWindow", Spy)
    monkeypatch.setattr(reader, "THREAD_BYTES", 1)
    url, options = table_url
    cfg = Config.from_env()
    cfg = dataclasses.replace(
        cfg, reads=dataclasses.replace(cfg.reads, window_bytes=1),
        tables=dataclasses.replace(cfg.tables, chunk_bytes=4096, sparse_row_bytes=4096))
    tt = TensorTable.create(url, storage_options=options, config=cfg)
    x = np.random.default_rng(0).random((64, 512))  # 4 KiB rows
    tt.write("x", x)
    assert np.array_equal(tt["x"][5:60], x[5:60])
    if url.startswith("file://"):  # the calling thread's reads take no window
        assert windows == []
        return
    window = windows[-1]
    assert window.held == 0  # every byte given back
    assert window.peak == sum(r.nbytes for r in tt.last_read.reads)  # larger than 1: alone
