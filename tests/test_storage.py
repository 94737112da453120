"""Simulated object storage: request counts checked against hand-computed counts, and
latency checked by what would have been slept, never by timing."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from zarr.storage import LocalStore

from layoutkit.errors import InvalidOptionError
from layoutkit.verify.storage import CountingFile, CountingStore, LatencyModel


def test_latency_model():
    model = LatencyModel(latency=0.010, bandwidth=100e6)
    assert model.cost(0) == pytest.approx(0.010)
    assert model.cost(1_000_000) == pytest.approx(0.020)
    assert LatencyModel().cost(10**9) == 0
    with pytest.raises(InvalidOptionError, match="latency of 0 or more"):
        LatencyModel(latency=-1)


def test_zarr_requests_match_a_hand_count(tmp_path: Path) -> None:
    """A (4, 6) array in (2, 3) chunks has 4 chunk objects; reading it all is 4 requests,
    a slice within one chunk is 1, and each request is delayed once."""
    zarr.create_array(tmp_path / "a.zarr", shape=(4, 6), chunks=(2, 3), dtype="i4")[:] = np.arange(24).reshape(4, 6)
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    store = CountingStore(LocalStore(tmp_path / "a.zarr", read_only=True), LatencyModel(0.01), sleep=record)
    arr = zarr.open_array(store, mode="r")
    store.counter.reset()
    slept.clear()
    np.testing.assert_array_equal(arr[:], np.arange(24).reshape(4, 6))
    assert store.counter.requests == 4
    assert len(slept) == 4 and sum(slept) == pytest.approx(0.04)
    store.counter.reset()
    arr[0:2, 0:3]
    assert store.counter.requests == 1
    assert store.counter.bytes > 0


def test_hdf5_requests_match_a_hand_count(tmp_path: Path) -> None:
    """A contiguous dataset read whole is one request past the metadata; with a page
    buffer, a paged file is read in whole pages, each page once."""
    plain = tmp_path / "plain.h5"
    with h5py.File(plain, "w") as f:
        f["x"] = np.arange(100_000, dtype="f8")  # 800 kB, contiguous
    cf = CountingFile(plain)
    with h5py.File(cf, "r") as f:
        ds = f["x"]
        cf.reset()
        ds[...]
        assert cf.requests == 1 and cf.bytes == 800_000

    paged = tmp_path / "paged.h5"
    page = 64 * 1024
    with h5py.File(paged, "w", fs_strategy="page", fs_page_size=page) as f:
        f["x"] = np.arange(100_000, dtype="f8")
    slept: list[float] = []
    cf = CountingFile(paged, LatencyModel(latency=0.01), sleep=slept.append)
    with h5py.File(cf, "r", page_buf_size=16 * page) as f:
        ds = f["x"]
        cf.reset()
        slept.clear()
        ds[...]  # larger than a page: read straight through
        first = cf.requests
        ds[:10]  # a small read afterwards is a page-buffer hit or one page
        assert cf.requests - first <= 1
    assert len(slept) == cf.requests and sum(slept) == pytest.approx(0.01 * cf.requests)
