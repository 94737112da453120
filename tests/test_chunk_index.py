"""The chunk index read from the file's bytes equals the one h5py walks, or is refused."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layoutkit.hdf5.chunk_index import (
    NotRecognised,
    btree_address,
    entries_in_bucket,
    read_entries,
    superblock_sizes,
)


def h5py_entries(ds: h5py.Dataset) -> dict:
    found: dict = {}
    ds.id.chunk_iter(lambda i: found.__setitem__(tuple(i.chunk_offset), (i.byte_offset, i.size, i.filter_mask)))
    return found


class Bytes:
    """A file's bytes with the reads the index makes, counted by batch."""

    def __init__(self, path: Path) -> None:
        self.raw = path.read_bytes()
        self.batches: list[int] = []

    def read(self, offset: int, size: int) -> bytes:
        return self.raw[offset : offset + size]

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        self.batches.append(len(ranges))
        return [self.raw[o : o + n] for o, n in ranges]


def native(path: Path, name: str, file: Bytes | None = None) -> dict:
    file = file or Bytes(path)
    with h5py.File(path, "r") as f:
        address = h5py.h5g.get_objinfo(f[name].id, b".").objno[0]
    sa, sl = superblock_sizes(file.read(0, 64))
    root, chunks = btree_address(file.read, address, sa, sl)
    return read_entries(file.read_ranges, root, len(chunks), sa, len(file.raw)) if root is not None else {}


def test_a_three_level_tree_is_read_in_three_batches(tmp_path):
    """200,000 chunks: the root, its internal nodes, then every leaf: one batch each."""
    path = tmp_path / "deep.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(2_000_000), chunks=(10,), compression="gzip")
    file = Bytes(path)
    got = native(path, "a", file)
    with h5py.File(path, "r") as f:
        assert got == h5py_entries(f["a"])
        assert sum(size for _, size, _ in got.values()) == f["a"].id.get_storage_size()
    # nodes hold up to 64 entries (split nodes fewer): 3,125 leaves or more below one level of internal nodes
    assert len(got) == 200_000 and len(file.batches) == 3 and file.batches[0] == 1
    assert file.batches[2] >= 200_000 // 64 and file.batches[1] >= file.batches[2] // 64


@pytest.mark.parametrize("libver", [None, ("v108", "latest")], ids=["object-header-v1", "object-header-v2"])
def test_partly_written_filtered_and_skipped_chunks(tmp_path, libver):
    """Chunks never written are absent, a chunk written with a filter skipped carries
    its mask, and both object header versions (with continuation blocks: many
    attributes, creation order tracked) lead to the same tree."""
    path = tmp_path / "mixed.h5"
    with h5py.File(path, "w", **({"libver": libver} if libver else {})) as f:
        d = f.create_dataset("b", shape=(300, 300), dtype="f4", chunks=(7, 9), fillvalue=3, compression="gzip",
                             track_order=True)
        d[::2, :100] = 1
        for i in range(60):  # the header outgrows its first block
            d.attrs[f"attr{i:02d}"] = np.arange(i + 1)
        d.id.write_direct_chunk((294, 297), np.full((7, 9), 5, "f4").tobytes(), filter_mask=1)
        f.create_dataset("c", data=np.zeros((40, 40, 40), "i2"), chunks=(3, 4, 5), shuffle=True)
    with h5py.File(path, "r") as f:
        for name in ("b", "c"):
            assert native(path, name) == h5py_entries(f[name]), name
        assert h5py_entries(f["b"])[(294, 297)][2] == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape=st.lists(st.integers(1, 60), min_size=1, max_size=3),
    data=st.data(),
)
def test_any_shape_chunking_and_written_region(tmp_path_factory, shape, data):
    chunks = tuple(data.draw(st.integers(1, n)) for n in shape)
    stop = tuple(data.draw(st.integers(0, n)) for n in shape)
    path = tmp_path_factory.mktemp("h") / "x.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=tuple(shape), dtype="i4", chunks=chunks)
        region = tuple(slice(0, s) for s in stop)
        d[region] = 7
    with h5py.File(path, "r") as f:
        assert native(path, "x") == h5py_entries(f["x"])


def test_what_it_does_not_know_is_refused(tmp_path):
    """Version-4 layouts (fixed and extensible arrays), user blocks and a damaged node
    are NotRecognised: the caller asks h5py."""
    v4, userblock, damaged = tmp_path / "v4.h5", tmp_path / "ub.h5", tmp_path / "damaged.h5"
    with h5py.File(v4, "w", libver=("v110", "latest")) as f:
        f.create_dataset("a", data=np.arange(2000), chunks=(10,))
    with h5py.File(userblock, "w", userblock_size=512) as f:
        f.create_dataset("a", data=np.arange(2000), chunks=(10,))
    with h5py.File(damaged, "w") as f:
        f.create_dataset("a", data=np.arange(2000), chunks=(10,))
    with pytest.raises(NotRecognised, match="layout message version 4"):
        native(v4, "a")
    with pytest.raises(NotRecognised, match="superblock"):
        native(userblock, "a")
    with h5py.File(damaged, "r") as f:
        first = next(iter(sorted(h5py_entries(f["a"]).values())))[0]
    raw = bytearray(damaged.read_bytes())
    tree = raw.rfind(b"TREE", 0, first)  # the leaf before the first chunk
    raw[tree : tree + 4] = b"XXXX"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(NotRecognised, match="not a chunk B-tree node"):
        native(damaged, "a")


class FakeFile:
    """What entries_in_bucket needs of a RangeFile: positional reads, batches, a size."""

    def __init__(self, path: Path) -> None:
        self.bytes = Bytes(path)
        self.size = len(self.bytes.raw)
        self.pread, self.read_ranges = self.bytes.read, self.bytes.read_ranges


def test_few_chunks_are_left_to_h5py_and_many_are_read_here(tmp_path):
    """One leaf node (at most 64 chunks) sits in a block h5py has fetched anyway, so it
    walks it; more chunks are read here; a file it does not know gives None."""
    path, v4 = tmp_path / "f.h5", tmp_path / "v4.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("few", data=np.arange(640), chunks=(10,))
        f.create_dataset("many", data=np.arange(650), chunks=(10,))
    with h5py.File(v4, "w", libver=("v110", "latest")) as f:
        f.create_dataset("many", data=np.arange(650), chunks=(10,))
    with h5py.File(path, "r") as f:
        assert entries_in_bucket(f["few"], FakeFile(path)) is None
        assert entries_in_bucket(f["many"], FakeFile(path)) == h5py_entries(f["many"])
    with h5py.File(v4, "r") as f:
        assert entries_in_bucket(f["many"], FakeFile(v4)) is None
