"""An image set folded by consolidate() reads the same images, and an open afterwards loads
one fragment's bookkeeping per column array instead of every append's."""

from __future__ import annotations

import numpy as np

from tessera.array.commits import META_CACHE
from tessera.images import ImageColumns


def test_a_consolidated_set_reads_the_same_and_opens_light(store_url) -> None:
    url, options = f"{store_url[0]}/imgs", store_url[1]
    cols = ImageColumns.create(url, size=(32, 32), storage_options=options, cache=None)
    rng = np.random.default_rng(3)
    for _ in range(5):
        cols.append(rng.integers(0, 256, (7, 32, 32, 3), dtype=np.uint8),
                    labels=rng.integers(0, 4, 7))
    ids = cols.ids()
    want = cols.read(ids, k=16)
    labels = cols.labels(ids)
    cols.consolidate()
    META_CACHE().clear()
    fresh = ImageColumns.open(url, storage_options=options, cache=None)
    np.testing.assert_array_equal(fresh.read(ids, k=16), want)
    np.testing.assert_array_equal(fresh.labels(ids), labels)
    assert len(fresh.coeffs._metas) == 1 and len(fresh.meta._metas) == 1
    assert cols.vacuum(orphan_grace_s=0, force=True) > 0
    np.testing.assert_array_equal(
        ImageColumns.open(url, storage_options=options, cache=None).read(ids, k=16), want)
