"""Simulated object storage: request counts checked against hand-computed counts, and
latency checked by what would have been slept, never by timing."""

from __future__ import annotations

import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from zarr.storage import LocalStore

from layoutkit.errors import InvalidOptionError
from layoutkit.storage.counting import CountingFile, CountingStore, LatencyModel


def test_latency_model():
    model = LatencyModel(latency=0.010, bandwidth=100e6)
    assert model.cost(0) == pytest.approx(0.010)
    assert model.cost(1_000_000) == pytest.approx(0.020)
    assert LatencyModel().cost(10**9) == 0
    with pytest.raises(InvalidOptionError, match="latency of 0 or more"):
        LatencyModel(latency=-1)


def test_requests_sent_together_overlap_up_to_the_limit_in_flight():
    from layoutkit.storage.counting import overlapped

    assert overlapped([]) == 0
    assert overlapped([0.01, 0.03, 0.02]) == 0.03  # all in flight at once: the slowest
    assert overlapped([1, 1, 1], in_flight=2) == 2  # the third waits for a free slot
    assert overlapped([3, 1, 1, 1], in_flight=2) == 3  # the short ones follow each other beside the long one
    assert LatencyModel(latency=0.01).round_trip([0] * 200, in_flight=128) == pytest.approx(0.02)
    assert LatencyModel(latency=0.01, bandwidth=1e6).round_trip([1000, 10_000]) == pytest.approx(0.02)


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


def test_a_read_only_store_reads_a_shard_s_index_once(tmp_path: Path) -> None:
    """zarr reads a shard's index again for every read of the shard: a read-only store
    keeps it, so reading two inner chunks of one shard one after the other is the index
    once and each chunk (3 requests, where it was 4), with the same values; a store opened
    to be written keeps nothing (its shards may change)."""
    values = np.arange(4000, dtype="f8")
    zarr.create_array(tmp_path / "s.zarr", shape=(4000,), chunks=(500,), shards=(2000,), dtype="f8")[:] = values
    store = CountingStore(LocalStore(tmp_path / "s.zarr", read_only=True))
    arr = zarr.open_array(store, mode="r")
    store.counter.reset()
    np.testing.assert_array_equal(arr[0:500], values[0:500])
    assert store.counter.requests == 2  # the index, then the chunk
    np.testing.assert_array_equal(arr[600:900], values[600:900])
    np.testing.assert_array_equal(arr[100:200], values[100:200])
    assert store.counter.requests == 4  # two chunks more, no index
    np.testing.assert_array_equal(arr[2500:2600], values[2500:2600])
    assert store.counter.requests == 6  # the other shard: its index, its chunk
    writable = CountingStore(LocalStore(tmp_path / "s.zarr"))
    arr = zarr.open_array(writable, mode="r+")
    writable.counter.reset()
    arr[0:500]
    arr[600:900]
    assert writable.counter.requests == 4


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


# -- coalescing the byte ranges of a source in a bucket ------------------------------------


def test_coalesce_merges_neighbours_within_the_gap_and_size_limits():
    from layoutkit.storage.buckets import coalesce

    ranges = [(0, 10), (15, 10), (100, 10), (30, 5)]
    assert coalesce(ranges, gap=5, limit=1000) == [(0, 35), (100, 10)]
    assert coalesce(ranges, gap=0, limit=1000) == [(0, 10), (15, 10), (30, 5), (100, 10)]
    assert coalesce(ranges, gap=100, limit=1000) == [(0, 110)]
    assert coalesce(ranges, gap=100, limit=40) == [(0, 35), (100, 10)]  # a merged GET stays under the limit
    assert coalesce([(0, 500), (500, 10)], gap=0, limit=100) == [(0, 500), (500, 10)]  # a big range stays whole
    # within a window: ranges that start in the window the last one ends in, however far apart
    assert coalesce(ranges, gap=0, limit=1000, window=64) == [(0, 35), (100, 10)]
    assert coalesce([(0, 10), (60, 10), (130, 5)], gap=0, limit=1000, window=64) == [(0, 70), (130, 5)]
    assert coalesce([(0, 10), (60, 10)], gap=0, limit=50, window=64) == [(0, 10), (60, 10)]  # the limit still holds


@pytest.mark.parametrize("options, gets", [
    ((), 1),  # default: gaps under 1 MiB are read through
    ((("coalesce_gap", "0"),), 4),
    ((("coalesce_gap", "64KiB"), ("coalesce_max", "150KiB")), 2),
])
def test_a_bucket_source_reads_ranges_with_as_many_gets_as_its_limits_allow(monkeypatch, options, gets):
    import obstore

    from layoutkit.storage import ObjectSource

    blob = bytes(range(256)) * 4096  # 1 MiB
    calls = []

    async def fake_get_range_async(store, key, *, start, length=None, end=None):  # noqa: ANN001, ANN202
        calls.append((start, length))
        return blob[start:start + length]

    monkeypatch.setattr(obstore, "get_range_async", fake_get_range_async)
    monkeypatch.setattr(ObjectSource, "store_and_key", property(lambda self: (None, "key")))
    source = ObjectSource("s3://bucket/key.h5", options)
    ranges = [(0, 50_000), (100_000, 50_000), (200_000, 50_000), (300_000, 50_000)]
    assert source.read_ranges(ranges) == [blob[o:o + n] for o, n in ranges]
    assert len(calls) == gets


def test_bad_coalescing_options_are_one_sentence():
    from layoutkit.errors import InvalidOptionError
    from layoutkit.storage import ObjectSource

    with pytest.raises(InvalidOptionError, match="coalesce_gap"):
        ObjectSource("s3://b/k.h5", (("coalesce_gap", "lots"),)).coalescing()


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_store_is_kept_for_the_same_url_options_and_credentials(monkeypatch) -> None:
    """Opening the same bucket again reuses its store (its client and connections); other
    options, other credentials in the environment, another bucket or a forked child get a
    store of their own, and a bad option is still one sentence naming the URL."""
    from layoutkit.storage.buckets import store_at

    options = {"endpoint_url": "http://127.0.0.1:9", "access_key_id": "a", "secret_access_key": "b",
               "region": "us-east-1"}
    first = store_at("s3://bucket", options)
    assert store_at("s3://bucket/", dict(options)) is first
    assert store_at("s3://other", options) is not first
    assert store_at("s3://bucket", {**options, "secret_access_key": "c"}) is not first
    monkeypatch.setenv("AWS_SESSION_TOKEN", "t")
    assert store_at("s3://bucket", options) is not first
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    assert store_at("s3://bucket", options) is first
    with pytest.raises(InvalidOptionError, match="s3://bucket/k.h5: the store cannot be set up"):
        store_at("s3://bucket", {**options, "no_such_option": "1"}, named="s3://bucket/k.h5")
    # a forked child does not use its parent's store (its client's threads stayed behind)
    import os

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: say whether it was handed the parent's store, and leave
        try:
            os.write(write, b"parent's" if store_at("s3://bucket", options) is first else b"its own")
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 60
    while os.waitpid(pid, os.WNOHANG) == (0, 0):  # a child stuck after the fork fails the test, not the suite
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child did not finish in 60 s")
        time.sleep(0.05)
    assert os.read(read, 64) == b"its own"
    os.close(read)
    assert store_at("s3://bucket", options) is first


class _Blocks:
    """An object in a bucket, as RangeFile sees it: counts the ranged GETs."""

    def __init__(self) -> None:
        self.gets: list[int] = []

    def read_range(self, offset: int, size: int) -> bytes:
        self.gets.append(offset)
        return bytes(size)


def test_the_walk_keeps_more_blocks_and_trims_back_after(monkeypatch) -> None:
    from layoutkit.storage import sources

    monkeypatch.setattr(sources, "READ_BLOCK_BYTES", 1024)
    source = _Blocks()
    f = sources.RangeFile(source, 100 * 1024)  # type: ignore[arg-type]
    try:
        with f.walking():
            for i in range(40):
                f.pread(i * 1024, 8)
            f.pread(0, 8)  # 40 blocks are within the walk's 64: block 0 is still there
            assert len(source.gets) == 40
        assert len(f._blocks.blocks) == sources.READ_CACHE_BLOCKS  # trimmed back, the most recent kept
        f.pread(0, 8)
        assert len(source.gets) == 40
        for i in range(40, 80):  # outside the walk only 32 are kept
            f.pread(i * 1024, 8)
        f.pread(40 * 1024, 8)
        assert len(source.gets) == 81
    finally:
        f.close()


def test_blocks_follow_the_pages_of_a_paged_file(monkeypatch) -> None:
    """On a paged file a block is whole pages, aligned with them: an 8 MiB page is one
    GET, not two 4 MiB blocks fetched one after the other; small pages are grouped to at
    least READ_BLOCK_BYTES; the cache keeps the bytes it held."""
    from layoutkit.storage import sources

    monkeypatch.setattr(sources, "READ_BLOCK_BYTES", 1024)
    source = _Blocks()
    f = sources.RangeFile(source, 100 * 1024)  # type: ignore[arg-type]
    try:
        f.pread(0, 8)
        f.follow_pages(2048)
        assert f._blocks.block_bytes == 2048 and f._blocks.limit == sources.READ_CACHE_BLOCKS // 2
        assert f.pread(3000, 2000) == bytes(2000)  # spans pages 1 and 2: two GETs, page-aligned
        assert source.gets[1:] == [2048, 4096]
        f.pread(4096, 10)  # in a page read already
        assert len(source.gets) == 3
        f.follow_pages(300)  # small pages: as many as make READ_BLOCK_BYTES, rounded up
        assert f._blocks.block_bytes == 1200
    finally:
        f.close()


def test_reading_on_fetches_the_blocks_ahead_in_the_same_get(monkeypatch) -> None:
    """With readahead, a miss just after the last one (h5py reading on) brings the next
    blocks in its GET; a miss elsewhere fetches its block alone, and a cached block ahead
    is not fetched again."""
    from layoutkit.storage import sources

    monkeypatch.setattr(sources, "READ_BLOCK_BYTES", 1024)
    source = _Blocks()
    f = sources.RangeFile(source, 100 * 1024)  # type: ignore[arg-type]
    f.readahead = 2
    try:
        f.pread(10 * 1024, 8)  # the first miss: alone
        f.pread(50 * 1024, 8)  # elsewhere: alone
        assert source.gets == [10 * 1024, 50 * 1024] and f.requests == 2
        f.pread(51 * 1024, 8)  # reading on: blocks 51, 52 and 53 in one GET
        assert source.gets[-1] == 51 * 1024 and f.requests == 3 and f.blocks_fetched == 5
        f.pread(52 * 1024, 8), f.pread(53 * 1024, 8)
        assert f.requests == 3  # cached
        f.pread(54 * 1024, 8)  # on again: blocks 54, 55 and 56
        f.pread(20 * 1024, 8)
        assert f.requests == 5
        assert f.pread(55 * 1024, 1024) == bytes(1024) and f.requests == 5
    finally:
        f.close()


def test_an_object_given_in_parts_is_written_whole_in_order(tmp_path: Path, monkeypatch) -> None:
    """A shard is handed to the store as its parts (chunks and index, never joined); the
    file holds them in order, also when the system writes fewer bytes than asked."""
    import os

    import layoutkit.storage.kv as kv

    parts = [b"index", b"", bytes(range(256)) * 40, memoryview(b"tail")]
    kv.FolderKV(tmp_path / "s").put("a/c/0", parts)
    assert (tmp_path / "s" / "a" / "c" / "0").read_bytes() == b"".join(bytes(p) for p in parts)
    real = os.writev

    def short(fd: int, buffers) -> int:  # noqa: ANN001 - at most 7 bytes a call
        first = bytes(buffers[0])[:7]
        return real(fd, [first])

    monkeypatch.setattr(kv.os, "writev", short)
    kv.FolderKV(tmp_path / "s").put("b/c/0", parts)
    assert (tmp_path / "s" / "b" / "c" / "0").read_bytes() == b"".join(bytes(p) for p in parts)
    assert kv.joined(parts) == b"".join(bytes(p) for p in parts) and kv.joined(b"one") == b"one"


def test_an_object_is_written_at_most_write_max_bytes_a_call(tmp_path: Path, monkeypatch) -> None:
    """A shard of megabytes is written in calls of at most ``WRITE_MAX`` bytes (larger
    writes get page-cache folios the host of a virtual machine faults in page by page),
    and the file is still its parts in order."""
    import os

    import layoutkit.storage.kv as kv

    rng = np.random.default_rng(0)
    parts = [rng.bytes(100), rng.bytes(3 * kv.WRITE_MAX + 5), rng.bytes(kv.WRITE_MAX - 1), b"tail"]
    sizes = []
    real = os.writev

    def counted(fd: int, buffers) -> int:  # noqa: ANN001
        sizes.append(sum(len(b) for b in buffers))
        return real(fd, buffers)

    monkeypatch.setattr(kv.os, "writev", counted)
    kv.FolderKV(tmp_path / "s").put("a/c/0", parts)
    assert (tmp_path / "s" / "a" / "c" / "0").read_bytes() == b"".join(parts)
    assert max(sizes) == kv.WRITE_MAX and len(sizes) == -(-sum(map(len, parts)) // kv.WRITE_MAX)
