"""``layoutkit.open``: one reader over every layout, and the counting under it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr

from layoutkit.verify.storage import Counter, CountingStore


def test_counting_store_counts_the_inner_chunks_of_a_partial_shard_read(tmp_path: Path) -> None:
    path = tmp_path / "sharded.zarr"
    z = zarr.create_array(path, shape=(10_000,), chunks=(100,), shards=(5_000,), dtype="f4")
    z[:] = np.arange(10_000, dtype="f4")
    counter = Counter()
    store = CountingStore(zarr.storage.LocalStore(path, read_only=True), None, counter)
    a = zarr.open_array(store, mode="r")
    counter.reset()
    np.testing.assert_array_equal(a[150:420], np.arange(150, 420, dtype="f4"))
    # the shard index, then the three inner chunks as one coalesced range
    assert counter.requests == 2
    assert counter.bytes > 3 * 100 * 4 * 0.1
