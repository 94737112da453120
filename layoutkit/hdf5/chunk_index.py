"""The chunk index of an HDF5 dataset read from the file's bytes, level by level.

h5py learns where a dataset's chunks are by walking its B-tree one node at a time
(``H5Dchunk_iter``, and ``H5Dget_storage_size`` walks it too). On a local disk each node
is a cheap ``pread``; in a bucket each is a round trip, and h5py's global lock keeps one
walk at a time: a netCDF-4 file with 1,536 chunks took 26 GETs in a row, twice (once
for the inventory's sizes, once for the reader). Here the version-1 B-tree that
``libver="earliest"`` files (netCDF-4, most files h5py writes) index their chunks with is
read from the bytes: the object header (usually in a block the walk has fetched
already) gives the tree's root, and every node of one level is fetched in one batch of
concurrent ranged GETs, so the whole index costs one round trip per level.

Only what is recognised with certainty is read this way: a superblock at offset 0 with
base address 0, object header version 1 or 2, a layout message of version 3 with
chunked storage, nodes that carry the ``TREE`` signature, type 1 and the expected
level. Anything else (version-4 layouts with their fixed or extensible arrays and
version-2 B-trees, user blocks, damage) returns None and the caller asks h5py.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

UNDEFINED = 0xFFFFFFFFFFFFFFFF
SIGNATURE = b"\x89HDF\r\n\x1a\n"
MSG_LAYOUT, MSG_CONTINUATION = 0x0008, 0x0010
DEFAULT_K = 32  # entries per B-tree node are at most 2K; a node written with another K is fetched again
MAX_LEVELS = 64

# entries: chunk origin (element coordinates) -> (byte offset, stored size, filter mask)
Entries = dict[tuple[int, ...], tuple[int, int, int]]
ReadRanges = Callable[[list[tuple[int, int]]], list[bytes]]


class NotRecognised(Exception):
    """The bytes are not what this reader knows how to follow: ask h5py instead."""


def superblock_sizes(head: bytes) -> tuple[int, int]:
    """Sizes of offsets and lengths from the superblock at offset 0 (its first 64
    bytes); NotRecognised when there is none there or its base address is not 0."""
    if head[:8] != SIGNATURE or len(head) < 40:
        raise NotRecognised("no superblock at offset 0")
    version = head[8]
    if version in (0, 1):
        sa, sl = head[13], head[14]
        base_at = 24 if version == 0 else 28
    elif version in (2, 3):
        sa, sl = head[9], head[10]
        base_at = 12
    else:
        raise NotRecognised(f"superblock version {version}")
    if sa not in (2, 4, 8) or sl not in (2, 4, 8):
        raise NotRecognised("unusual address sizes")
    if _uint(head, base_at, sa) != 0:
        raise NotRecognised("base address is not 0")
    return sa, sl


def _uint(buf: bytes, at: int, size: int) -> int:
    if at + size > len(buf):
        raise NotRecognised("truncated structure")
    return int.from_bytes(buf[at : at + size], "little")


def btree_address(
    read: Callable[[int, int], bytes], header: int, sa: int, sl: int
) -> tuple[int | None, tuple[int, ...]]:
    """The v1 B-tree root of the chunked dataset whose object header is at ``header``
    (None when no chunk was ever written: the undefined address) and its chunk shape as
    the layout message gives it, the element size last. ``read(offset, size)`` reads
    the file."""
    version, ordered, data, start, stop = _first_block(read, header)
    # a message's own header: v1 type (2), size (2), flags (1), reserved (3); v2 type (1),
    # size (2), flags (1) and, when the object tracks creation order, 2 bytes more
    prefix = 8 if version == 1 else 6 if ordered else 4
    blocks = [(data, start, stop)]
    seen = 0
    while blocks:
        data, start, stop = blocks.pop(0)
        pos = start
        while pos + prefix <= stop:  # v2 blocks may end in a gap shorter than a message header
            if version == 1:
                mtype, size = struct.unpack_from("<HH", data, pos)
            else:
                mtype, size = data[pos], struct.unpack_from("<H", data, pos + 1)[0]
            body = pos + prefix
            if body + size > stop:
                raise NotRecognised("a header message runs past its block")
            if mtype == MSG_LAYOUT:
                return _layout(data[body : body + size], sa)
            if mtype == MSG_CONTINUATION:
                where, length = _uint(data, body, sa), _uint(data, body + sa, sl)
                blocks.append(_continuation(read, where, length, version))
            pos = body + size
            seen += 1
            if seen > 10_000:
                raise NotRecognised("too many header messages")
    raise NotRecognised("no layout message")


def _first_block(read: Callable[[int, int], bytes], at: int) -> tuple[int, bool, bytes, int, int]:
    """Version, creation order stored, the first block's bytes and where its messages lie."""
    head = read(at, 64)
    if head[:4] == b"OHDR":
        if head[4] != 2:
            raise NotRecognised("object header version")
        flags = head[5]
        pos = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 0x03)
        size = _uint(head, pos, width)
        data = read(at, pos + width + size)
        # the messages, then a 4-byte checksum
        return 2, bool(flags & 0x04), data, pos + width, pos + width + size
    if head[0] != 1:
        raise NotRecognised("object header version")
    size = _uint(head, 8, 4)
    data = read(at, 16 + size)
    return 1, False, data, 16, 16 + size


def _continuation(read: Callable[[int, int], bytes], at: int, length: int, version: int) -> tuple[bytes, int, int]:
    data = read(at, length)
    if version == 1:
        return data, 0, length
    if data[:4] != b"OCHK":
        raise NotRecognised("continuation block signature")
    return data, 4, length - 4


def _layout(msg: bytes, sa: int) -> tuple[int | None, tuple[int, ...]]:
    # version 3, class 2 (chunked): dimensionality (1), B-tree address, then a 4-byte
    # size per dimension (the chunk's shape and the element size)
    if not msg or msg[0] != 3:
        raise NotRecognised(f"layout message version {msg[0] if msg else '?'}")
    if len(msg) < 3 or msg[1] != 2:
        raise NotRecognised("not chunked")
    dims = msg[2]
    root = _uint(msg, 3, sa)
    shape = tuple(_uint(msg, 3 + sa + 4 * i, 4) for i in range(dims))
    return (None if root == (1 << (8 * sa)) - 1 else root), shape


def node_bytes(dims: int, sa: int, k: int = DEFAULT_K) -> int:
    """Bytes of a full node whose keys have ``dims`` offsets: 2K children, 2K+1 keys."""
    key = 8 + 8 * dims
    return 8 + 2 * sa + 2 * k * (key + sa) + key


def read_entries(read_ranges: ReadRanges, root: int, dims: int, sa: int, file_size: int) -> Entries:
    """Every allocated chunk under the B-tree at ``root``: one batch of reads per level."""
    key = 8 + 8 * dims
    guess = node_bytes(dims, sa)
    entries: Entries = {}
    level_nodes, level = [root], None
    for _ in range(MAX_LEVELS):
        if any(not 0 < a < file_size for a in level_nodes):
            raise NotRecognised("a B-tree node lies outside the file")
        bodies = read_ranges([(a, min(guess, file_size - a)) for a in level_nodes])
        short = []
        parsed = []
        for address, body in zip(level_nodes, bodies):
            if body[:4] != b"TREE" or body[4] != 1:
                raise NotRecognised("not a chunk B-tree node")
            used = struct.unpack_from("<H", body, 6)[0]
            need = 8 + 2 * sa + used * (key + sa) + key
            if need > len(body):
                if address + need > file_size:
                    raise NotRecognised("a B-tree node runs past the end of the file")
                short.append((address, need))
            parsed.append((address, body))
        if short:  # written with a larger K: fetch those nodes whole
            more = dict(zip([a for a, _ in short], read_ranges(short)))
            parsed = [(a, more.get(a, b)) for a, b in parsed]
        children = []
        for _, body in parsed:
            node_level, used = body[5], struct.unpack_from("<H", body, 6)[0]
            if level is not None and node_level != level:
                raise NotRecognised("B-tree levels disagree")
            pos = 8 + 2 * sa
            for _i in range(used):
                size, mask = struct.unpack_from("<II", body, pos)
                origin = struct.unpack_from(f"<{dims}Q", body, pos + 8)
                child = _uint(body, pos + key, sa)
                if node_level == 0:
                    entries[origin[:-1]] = (child, size, mask)
                else:
                    children.append(child)
                pos += key + sa
        if not children:
            return entries
        level_nodes = children
        level = parsed[0][1][5] - 1
    raise NotRecognised("B-tree deeper than expected")


def _header_address(ds: Any) -> int:
    """Where the dataset's object header starts. (``h5o.get_info`` would tell too, but it
    also sizes the object's metadata, which walks the whole chunk index.)"""
    import h5py

    try:
        low, high = h5py.h5g.get_objinfo(ds.id, b".").objno
    except (AttributeError, KeyError, RuntimeError) as exc:  # a build without deprecated symbols
        raise NotRecognised("no object address") from exc
    if high:
        raise NotRecognised("object address beyond 64 bits")
    return int(low)


MAX_CHUNKS_FOR_H5PY = 2 * DEFAULT_K  # one leaf node: h5py reads it from a block it has fetched anyway


def chunk_count(shape: tuple[int, ...], chunks: tuple[int, ...]) -> int:
    """How many chunks the grid of a dataset of ``shape`` has, allocated or not."""
    count = 1
    for n, c in zip(shape, chunks):
        count *= -(-n // c)
    return count


# a dataset declared far larger than it is written (a 10^11-element grid holding one chunk,
# a never-written contiguous dataset of 2^61 bytes) is planned from where its data lie,
# not from its extent: from SPARSE_MIN_BYTES of declared data, when at most a quarter of
# its chunks, and no more than SPARSE_MAX_REGIONS of them, are allocated
SPARSE_MIN_BYTES = 1 << 30
SPARSE_MAX_REGIONS = 1 << 20


def sparse_candidate(shape: tuple[int, ...], itemsize: int) -> bool:
    """Whether a dataset is large enough to be planned from its allocated storage."""
    count = 1
    for n in shape:
        count *= n
    return bool(shape) and count * itemsize >= SPARSE_MIN_BYTES


def stored_regions(shape: tuple[int, ...], chunks: tuple[int, ...], origins: Any) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The regions of the chunks at ``origins``, clipped to the extent, in C order."""
    return tuple(tuple((a, min(a + c, n)) for a, c, n in zip(origin, chunks, shape)) for origin in sorted(origins))


def sparse_storage(ds: Any, origins: list[tuple[int, ...]] | None = None) -> dict[str, Any]:
    """``stored_regions`` of an h5py dataset declared far larger than it is written
    (:data:`SPARSE_MIN_BYTES`), as HDF5's own chunk query reports them: none for a
    never-written one, the allocated chunks' regions when few of its chunks are
    allocated; ``{}`` for any other dataset, ``raw_fallback`` when the query reports an
    impossible index. Planning then visits those regions alone: everywhere else the
    dataset reads as its fill value, and every output leaves it unwritten too. The walk
    and verify's proof each ask HDF5 themselves. ``origins``: the allocated chunks'
    origins when already found."""
    import h5py

    shape, chunks = ds.shape, ds.chunks
    if not shape or not sparse_candidate(tuple(shape), ds.dtype.itemsize):
        return {}
    layout = ds.id.get_create_plist().get_layout()
    if layout == h5py.h5d.CONTIGUOUS:
        return {"stored_regions": ()} if ds.id.get_offset() is None else {}
    if layout != h5py.h5d.CHUNKED or not chunks:
        return {}
    shape, chunks = tuple(shape), tuple(chunks)
    count = chunk_count(shape, chunks)
    if origins is None:
        allocated = int(ds.id.get_num_chunks())
        if allocated > SPARSE_MAX_REGIONS or 4 * allocated > count:
            return {}
        found: list[tuple[int, ...]] = []
        if allocated:
            try:
                ds.id.chunk_iter(lambda c: found.append(tuple(c.chunk_offset)))
            except AttributeError:  # HDF5 older than 1.14
                return {}
        origins = found
    if len(origins) > SPARSE_MAX_REGIONS or 4 * len(origins) > count:
        return {}
    if (problem := index_problem(shape, chunks, origins)) is not None:
        return {"raw_fallback": f"HDF5's chunk index is inconsistent: {problem}"}
    return {"stored_regions": stored_regions(shape, chunks, origins)}


def index_problem(shape: tuple[int, ...], chunks: tuple[int, ...], origins: Any) -> str | None:
    """What makes a chunk index impossible for a dataset of ``shape`` and ``chunks``:
    an origin off the chunk grid, outside the dataset's extent or listed twice (None:
    nothing). HDF5's chunk queries (``H5Dchunk_iter``, ``H5Dget_chunk_info``) report
    such origins for an extensible-array index whose unlimited axis is not the first,
    while HDF5's own read of the same dataset is right: an index that fails here is
    not used to place chunks."""
    seen: set[tuple[int, ...]] = set()
    grid = chunk_count(shape, chunks)
    for origin in origins:
        origin = tuple(int(o) for o in origin)
        if len(origin) != len(shape):
            return f"a chunk at {origin} has {len(origin)} coordinates, the dataset {len(shape)} axes"
        if any(o % c for o, c in zip(origin, chunks)):
            return f"a chunk at {origin} is off the chunk grid {tuple(chunks)}"
        if any(o < 0 or o >= n for o, n in zip(origin, shape)):
            return f"a chunk at {origin} lies outside the dataset's extent {tuple(shape)}"
        if origin in seen:
            return f"the chunk at {origin} is listed twice"
        seen.add(origin)
        if len(seen) > grid:
            return f"more chunks than the grid's {grid}"
    return None


def first_unwritten(shape: tuple[int, ...], chunks: tuple[int, ...], entries: Any) -> tuple[int, ...]:
    """The first origin of the chunk grid, in C order, that ``entries`` lack (there is
    one). Counted through the grid, not built: ``itertools.product`` holds each axis's
    origins, 4 GB of them for one axis of 10^8 chunks."""
    import numpy as np

    grid = tuple(-(-n // c) for n, c in zip(shape, chunks))
    k = 0
    while True:
        origin = tuple(int(i) * c for i, c in zip(np.unravel_index(k, grid), chunks))
        if origin not in entries:
            return origin
        k += 1


def direct_chunk(ds: Any, origin: tuple[int, ...]) -> tuple[bytes | None, int]:
    """A chunk's stored bytes and filter mask as HDF5 finds them (``H5Dread_chunk``,
    its own lookup, which stays right where its chunk queries are not); None when the
    chunk was never written."""
    try:
        mask, data = ds.id.read_direct_chunk(origin)
    except (OSError, RuntimeError, ValueError, MemoryError):
        # "chunk storage is not allocated" (h5py sizes its buffer first: for a chunk never
        # written some indexes answer a size no buffer can have)
        return None, 0
    return bytes(data), int(mask)


def index_disagreement(
    shape: tuple[int, ...], chunks: tuple[int, ...], entries: dict[tuple[int, ...], tuple[int, int, int]],
    direct: Callable[[tuple[int, ...]], tuple[bytes | None, int]], pread: Callable[[int, int], bytes],
) -> tuple[str | None, dict[tuple[int, int], bytes]]:
    """Where a chunk index (origin -> offset, size, filter mask) disagrees with HDF5's own
    lookup, ``direct`` (:func:`direct_chunk`): its first and last chunks must be the bytes
    HDF5 finds at their origins, with their filter masks (``pread(size, offset)`` reads
    them from the file), and a chunk it says was never written must be unwritten for
    HDF5 too. A wrong index is caught without decoding anything. Returns the reason (None:
    they agree) and the bytes read of the chunks that agreed, by (offset, size)."""
    origins = list(entries)
    read: dict[tuple[int, int], bytes] = {}
    for origin in dict.fromkeys(origins[:1] + origins[-1:]):
        offset, size, mask = entries[origin]
        theirs, their_mask = direct(origin)
        if theirs is None or their_mask != mask or theirs != (ours := pread(size, offset)):
            return f"the chunk it places at {origin} is not the one HDF5 finds there", read
        read[(offset, size)] = ours
    if len(entries) < chunk_count(shape, chunks):
        unwritten = first_unwritten(shape, chunks, entries)
        if direct(unwritten)[0] is not None:
            return f"HDF5 holds a chunk at {unwritten}, which the index says was never written", read
    return None, read


def entries_in_bucket(ds: Any, fileobj: Any) -> Entries | None:
    """The chunk index of ``ds`` (an h5py dataset of a file read through ``fileobj``, a
    :class:`~layoutkit.storage.RangeFile`) read here, level by level; None when h5py
    should walk it (few chunks: one node, in a block already fetched) or when the bytes
    are not what this module recognises."""
    chunks, shape = ds.chunks, ds.shape
    if not chunks or not shape:
        return None
    if chunk_count(shape, chunks) <= MAX_CHUNKS_FOR_H5PY:
        return None
    try:
        sa, sl = superblock_sizes(fileobj.pread(0, 64))
        root, layout_chunks = btree_address(fileobj.pread, _header_address(ds), sa, sl)
        if layout_chunks[:-1] != tuple(chunks) or layout_chunks[-1] != ds.dtype.itemsize:
            raise NotRecognised("the layout message disagrees with h5py")
        if root is None:
            return {}
        return read_entries(fileobj.read_ranges, root, len(layout_chunks), sa, fileobj.size)
    except (NotRecognised, struct.error, IndexError):
        return None


__all__ = ["SPARSE_MAX_REGIONS", "SPARSE_MIN_BYTES", "Entries", "NotRecognised", "btree_address", "chunk_count", "direct_chunk", "entries_in_bucket", "first_unwritten", "index_disagreement", "index_problem", "node_bytes", "read_entries", "sparse_candidate", "sparse_storage", "stored_regions", "superblock_sizes"]
