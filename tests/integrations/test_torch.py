"""tessera.torch: datasets read what numpy holds, a batch is one plan, workers are safe."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tessera  # noqa: E402
from tessera.torch import (  # noqa: E402
    ArrayDataset,
    RegionDataset,
    Resize,
    regions_from_megadetector,
)


@pytest.fixture
def images(store_url):
    """A stack of 12 RGB images (N, 3, H, W) in (1, 3, 16, 16) tiles on each backend."""
    url, options = store_url
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, (12, 3, 40, 48), dtype=np.uint8)
    uri = f"{url.rstrip('/')}/imgs"
    tessera.from_numpy(uri, data, tile=(1, 3, 16, 16), storage_options=options)
    return uri, options, data


def random_regions(data, n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        i = int(rng.integers(0, data.shape[0]))
        y0 = int(rng.integers(0, data.shape[2] - 1))
        x0 = int(rng.integers(0, data.shape[3] - 1))
        y1 = int(rng.integers(y0 + 1, data.shape[2] + 1))
        x1 = int(rng.integers(x0 + 1, data.shape[3] + 1))
        out.append((i, (slice(None), slice(y0, y1), slice(x0, x1))))
    return out


def crop(data, region):
    i, box = region
    return data[(i, *box)]


def test_array_dataset_samples_equal_numpy(images):
    uri, options, data = images
    ds = ArrayDataset(uri, storage_options=options)
    assert len(ds) == 12
    for i in (0, 5, 11, -1):
        item = ds[i]
        assert isinstance(item, torch.Tensor)
        np.testing.assert_array_equal(item.numpy(), data[i])
    batch = ds.__getitems__([3, 1, 3])
    for t, i in zip(batch, [3, 1, 3], strict=True):
        np.testing.assert_array_equal(t.numpy(), data[i])
    with pytest.raises(IndexError, match="sample 12 is out of range"):
        ds[12]


def test_array_dataset_along_another_dimension(images):
    uri, options, data = images
    ds = ArrayDataset(uri, sample_dim=2, storage_options=options)
    assert len(ds) == 40
    np.testing.assert_array_equal(ds[17].numpy(), data[:, :, 17, :])
    with pytest.raises(ValueError, match="sample_dim 4 is out of range"):
        ArrayDataset(uri, sample_dim=4, storage_options=options)


def test_region_dataset_crops_equal_numpy(images):
    uri, options, data = images
    regions = random_regions(data, 40, seed=1)
    ds = RegionDataset(uri, regions, storage_options=options)
    assert len(ds) == 40
    got = ds.__getitems__(list(range(40)))
    for t, r in zip(got, regions, strict=True):
        np.testing.assert_array_equal(t.numpy(), crop(data, r))
    np.testing.assert_array_equal(ds[7].numpy(), crop(data, regions[7]))


def test_a_batch_is_one_plan_sharing_tiles(images):
    uri, options, _ = images
    # Eight crops of the same image corner: one tile serves them all.
    regions = [(2, (slice(None), slice(0, 8 + k), slice(0, 8))) for k in range(8)]
    ds = RegionDataset(uri, regions, storage_options=options, method="get")
    ds[0]  # loads the fragment's bookkeeping once
    before = ds.io.requests
    ds.__getitems__(list(range(8)))
    assert data_requests(ds.array.last_read.stats) == 1
    singles = 0
    for i in range(8):
        ds[i]
        singles += data_requests(ds.array.last_read.stats)
    assert singles == 8
    assert ds.io.requests > before


def data_requests(stats):
    """Requests for tiles (not the listing of commits each read makes)."""
    return stats.requests - sum(m.requests for k, m in stats.by_method.items() if k == "list")


def test_labels_and_transform(images):
    uri, options, data = images
    regions = random_regions(data, 6, seed=2)
    ds = RegionDataset(uri, regions, Resize((8, 8)), labels=list("abcdef"),
                       storage_options=options)
    x, y = ds[4]
    assert y == "e" and x.shape == (3, 8, 8) and x.dtype == torch.float32
    assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0
    with pytest.raises(ValueError, match="2 labels for 6 regions"):
        RegionDataset(uri, regions, labels=[0, 1], storage_options=options)


def test_bad_regions_name_the_region(images):
    uri, options, _ = images
    with pytest.raises(tessera.SelectionError, match=r"region 1 .*outside"):
        RegionDataset(uri, [(0, (slice(None),)), (1, (slice(None), slice(0, 99)))],
                      storage_options=options)
    with pytest.raises(tessera.SelectionError, match="region 0: the box has 4 entries"):
        RegionDataset(uri, [(0, (0, 0, 0, 0))], storage_options=options)
    with pytest.raises(IndexError, match="sample 40 is out of range"):
        RegionDataset(uri, [(40, ())], storage_options=options)
    with pytest.raises(ValueError, match="regions are \\(sample index, box\\) pairs"):
        RegionDataset(uri, [5], storage_options=options)


def test_megadetector_boxes(images, tmp_path):
    uri, options, data = images
    md = {"images": [
        {"file": "cam/0001.jpg", "detections": [
            {"category": "1", "conf": 0.91, "bbox": [0.25, 0.5, 0.5, 0.25]},
            {"category": "2", "conf": 0.05, "bbox": [0.0, 0.0, 1.0, 1.0]}]},
        {"file": "cam/0002.jpg", "detections": []},
        {"file": "cam/0003.jpg", "detections": [
            {"category": "3", "conf": 0.8, "bbox": [0.9, 0.9, 0.5, 0.5]}]},
    ]}
    path = tmp_path / "md.json"
    path.write_text(json.dumps(md))
    ds = RegionDataset.from_megadetector(uri, path, min_conf=0.1, storage_options=options,
                                         index_of={"cam/0001.jpg": 4, "cam/0002.jpg": 5,
                                                   "cam/0003.jpg": 9})
    assert ds.labels == [1, 3]
    x, label = ds[0]
    assert label == 1
    np.testing.assert_array_equal(x.numpy(), data[4, :, 20:30, 12:36])
    x, label = ds[1]
    assert label == 3
    np.testing.assert_array_equal(x.numpy(), data[9, :, 36:40, 43:48])  # clipped to the image
    regions, labels = regions_from_megadetector(md, (40, 48, 3), layout="HWC")
    assert regions[0] == (0, (slice(20, 30), slice(12, 36))) and labels == [1, 2, 3]
    with pytest.raises(ValueError, match="bbox"):
        regions_from_megadetector({"images": [{"detections": [{"bbox": [1]}]}]}, (3, 4, 4))
    with pytest.raises(ValueError, match="layout"):
        regions_from_megadetector(md, (3, 4, 4), layout="WH")


def test_datasets_pickle_as_references(images):
    uri, options, data = images
    ds = RegionDataset(uri, random_regions(data, 3, seed=3), storage_options=options)
    ds[0]
    clone = pickle.loads(pickle.dumps(ds))
    assert clone.ref._handle is None
    for i in range(3):
        np.testing.assert_array_equal(clone[i].numpy(), ds[i].numpy())


def test_an_open_array_is_pinned_to_its_snapshot(images):
    uri, options, data = images
    arr = tessera.open_array(uri, "w", storage_options=options)
    ds = ArrayDataset(arr, storage_options=options)
    arr[0:1] = np.zeros((1, 3, 40, 48), np.uint8)
    np.testing.assert_array_equal(ds[0].numpy(), data[0])


@pytest.fixture
def shared_images(request, tmp_path):
    """Images on a store other processes can reach (file and S3)."""
    if request.param == "file":
        url, options = (tmp_path / "store").as_uri(), {}
    else:
        server = request.getfixturevalue("s3_server")
        url, options = server.unique_url(), dict(server.storage_options())
    data = np.random.default_rng(5).integers(0, 256, (10, 3, 24, 24), dtype=np.uint8)
    uri = f"{url.rstrip('/')}/imgs"
    tessera.from_numpy(uri, data, tile=(1, 3, 8, 8), storage_options=options)
    return uri, options, data


@pytest.mark.parametrize("shared_images", ["file", "s3"], indirect=True)
def test_dataloader_with_two_workers(shared_images):
    uri, options, data = shared_images
    regions = random_regions(data, 24, seed=9)
    ds = RegionDataset(uri, regions, Resize((6, 6)), labels=list(range(24)),
                       storage_options=options)
    expected = {i: ds[i][0] for i in range(24)}
    seen = []
    for x, y in ds.loader(batch_size=5, num_workers=2):
        assert x.shape[1:] == (3, 6, 6)
        for xi, yi in zip(x, y.tolist(), strict=True):
            torch.testing.assert_close(xi, expected[yi])
            seen.append(yi)
    assert sorted(seen) == list(range(24))


def test_forked_worker_after_io_fails_clearly(tmp_path):
    data = np.arange(4 * 8, dtype=np.int16).reshape(4, 8)
    uri = (tmp_path / "a").as_uri()
    tessera.from_numpy(uri, data)
    ds = ArrayDataset(uri)
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=1,
                                         multiprocessing_context="fork")
    with pytest.raises(tessera.ForkSafetyError, match="forkserver"):
        list(loader)


@pytest.mark.parametrize("shared_images", ["file"], indirect=True)
def test_distributed_sampler_over_two_ranks(shared_images):
    uri, options, data = shared_images
    ds = ArrayDataset(uri, storage_options=options)
    seen: list[int] = []
    for rank in range(2):
        sampler = torch.utils.data.distributed.DistributedSampler(
            ds, num_replicas=2, rank=rank, shuffle=True, seed=3)
        indices = list(sampler)
        got = [t for batch in ds.loader(batch_size=3, sampler=sampler) for t in batch]
        assert len(got) == len(indices) == 5
        for t, i in zip(got, indices, strict=True):
            np.testing.assert_array_equal(t.numpy(), data[i])
        seen += indices
    assert sorted(seen) == list(range(10))


@pytest.mark.parametrize("shared_images", ["s3"], indirect=True)
def test_an_open_array_brings_its_store_options_to_workers(shared_images):
    uri, options, data = shared_images
    arr = tessera.open_array(uri, storage_options=options)
    ds = ArrayDataset(arr)  # no storage_options given: the array's own travel with it
    assert ds.ref.storage_options == options
    got = [t for batch in ds.loader(batch_size=4, num_workers=2) for t in batch]
    np.testing.assert_array_equal(np.stack([t.numpy() for t in got]), data)
