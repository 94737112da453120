"""The source as the HDF5 library itself reads it: the reference every comparator checks a
variant against.

The converters read raw chunk bytes and decode them themselves
(:mod:`layoutkit.hdf5.raw`): fast, and written by the same hands as the writers. The
proof must not share those eyes (a wrong chunk index would write wrong data and then
read the same wrong data back as "equal"), so it reads every block through h5py's
``Dataset`` reads: HDF5's own chunk lookup, its own filters, its own type conversion.
``tests/test_architecture.py`` holds that no comparator imports the raw path.

HDF5 runs one call at a time in a process, so with ``processes`` the blocks are read in
worker processes that each open the source themselves, while the comparing threads of
this process read the variant.
"""

from __future__ import annotations

import collections
import os
import random
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future
from typing import Any

import numpy as np

from layoutkit.hdf5.chunk_index import sparse_candidate, sparse_storage
from layoutkit.hdf5.files import Members
from layoutkit.hdf5.library_read import read_block
from layoutkit.hdf5.model import ArrayInfo
from layoutkit.hdf5.walkers import spawn_pool
from layoutkit.plan import Region, blocks_over, iter_blocks
from layoutkit.storage import ObjectSource, SourceSet

PROCESS_MIN_BYTES = 256 << 20
"""Below this much data a worker process costs more to start (about a second, h5py and
numpy imported) than it saves: the blocks are read in this process."""

READ_AHEAD = 2
"""Reads of one dataset under way in the worker processes while a block is compared."""

UNIFORM_MIN = 1 << 16
"""Blocks of at least this many values come back from a worker as one value when they
hold one (:class:`Uniform`)."""


# -- worker processes: each opens the source once --------------------------------------

_WORKER: dict[str, Any] = {}


def _start_worker(source: Any) -> None:
    _WORKER["files"] = Members(source)


def _read_in_worker(info: ArrayInfo, region: Region) -> np.ndarray | Uniform:
    block = read_block(_WORKER["files"], info, region)
    return Uniform.of(block) or block


class Uniform:
    """A block whose every value is one number, sent back from a worker as that number
    (a 4 MiB block of zeros is 4 MiB to pickle, pipe and unpickle; an unwritten stretch
    of a large dataset is many such blocks): :meth:`array` is the block again, a
    read-only broadcast of the one value."""

    __slots__ = ("dtype", "shape", "value")

    def __init__(self, value: np.ndarray, shape: tuple[int, ...]) -> None:
        self.value, self.dtype, self.shape = value, value.dtype, shape

    @classmethod
    def of(cls, block: np.ndarray) -> Uniform | None:
        """The block as one value, or None: numbers only (a NaN is unequal to itself,
        so a block of NaN goes whole), checked first on a stride of the block so that
        varied data cost a few comparisons, not a pass."""
        if block.dtype.kind not in "biuf" or block.size < UNIFORM_MIN or not block.flags.c_contiguous:
            return None
        flat = block.reshape(-1)
        first = flat[:1]
        if not (flat[:: max(1, flat.size // 64)] == first).all() or not (flat == first).all():
            return None
        return cls(first.copy(), block.shape)

    def array(self) -> np.ndarray:
        return np.broadcast_to(self.value.reshape(()), self.shape)


def _received(result: np.ndarray | Uniform) -> np.ndarray:
    return result.array() if isinstance(result, Uniform) else result


class ReferenceReader:
    """Reads regions of a source's datasets through HDF5's own read; safe to share
    between threads.

    Parameters
    ----------
    source
        A file, a file in a bucket, or a set of files.
    arrays
        The inventory entries of the datasets that will be read.
    processes
        Worker processes that read (HDF5 reads one block at a time per process): 0
        reads here. ``None`` chooses: ``os.cpu_count()`` for a local source of at least
        :data:`PROCESS_MIN_BYTES`, else 0.
    """

    def __init__(self, source: str | os.PathLike | ObjectSource | SourceSet, arrays: dict[str, ArrayInfo],
                 processes: int | None = None) -> None:
        self.arrays = arrays
        self._files = Members(source)
        self._lock = threading.Lock()  # Members keeps its open files in one ordered dict
        if processes is None:
            local = not isinstance(source, ObjectSource) and not (
                isinstance(source, SourceSet) and any(isinstance(m, ObjectSource) for m in source.members))
            # a dataset declared far larger than it is written is compared where it is written
            big = sum(a.nbytes if a.stored_regions is None else a.storage_bytes
                      for a in arrays.values() if not a.null_space) >= PROCESS_MIN_BYTES
            processes = (os.cpu_count() or 1) if local and big else 0
        self._pool: Executor | None = None
        if processes > 0:
            self._pool = spawn_pool(processes, initializer=_start_worker, initargs=(source,))

    def read(self, path: str, region: Region) -> np.ndarray:
        """The values of ``path`` in ``region``.

        Raises
        ------
        ChunkDecodeError
            When HDF5 cannot read them.
        """
        info = self.arrays[path]
        if self._pool is not None and info.shape and not info.dtype.hasobject:
            return _received(self._pool.submit(_read_in_worker, info, region).result())
        with self._lock:
            return read_block(self._files, info, region)

    def read_each(self, path: str, regions: Iterable[Region]) -> Iterator[tuple[Region, np.ndarray]]:
        """Each of ``regions`` of ``path`` with its values, in order: with worker
        processes, the next :data:`READ_AHEAD` reads are under way while the caller
        compares one (a read waited for at once kept the comparison and HDF5's decoding
        in turn: verify of a 2 GiB dataset took 23 s, 15 s without the workers; 15.5 s
        with them reading ahead, against two stores 53 -> 29 s)."""
        info = self.arrays[path]
        if self._pool is None or not info.shape or info.dtype.hasobject:
            for region in regions:
                yield region, self.read(path, region)
            return
        pending: collections.deque[tuple[Region, Future[np.ndarray | Uniform]]] = collections.deque()
        try:
            for region in regions:
                pending.append((region, self._pool.submit(_read_in_worker, info, region)))
                if len(pending) > READ_AHEAD:
                    done, future = pending.popleft()
                    yield done, _received(future.result())
            while pending:
                done, future = pending.popleft()
                yield done, _received(future.result())
        finally:  # a caller that stops at a difference leaves the rest unread
            for _, future in pending:
                future.cancel()

    def stored_regions(self, path: str) -> tuple[Region, ...] | None:
        """Where ``path``'s data lie when it is declared far larger than it is written,
        as HDF5's chunk query reports it to this reader (not the walk's record); None:
        its whole extent is compared (:func:`proof_blocks`)."""
        info = self.arrays[path]
        if info.segments is not None or not info.shape or not sparse_candidate(info.shape, info.dtype.itemsize):
            return None
        with self._lock:
            return sparse_storage(self._files(info.member)[info.path]).get("stored_regions")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        with self._lock:
            self._files.close()

    def __enter__(self) -> ReferenceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def unwalked(source: str | os.PathLike, inventory: Any) -> list[tuple[str, str]]:
    """What HDF5's own visit of ``source`` (``H5Ovisit``: every object once, by
    address) finds that the walk every command shares (:mod:`layoutkit.hdf5.walk`, a
    walk of links) does not list: ``(path, what)`` for each dataset it missed, and for
    the groups when their numbers differ. So an object the walk loses is missing from
    the proof too, not silently from both sides. Objects HDF5 cannot visit (a damaged
    header) are the walk's to refuse: then nothing is said here."""
    import h5py

    walked = {a.address for a in inventory.arrays if a.address is not None}
    datasets: dict[int, str] = {}
    groups: set[int] = set()

    def visit(name: bytes, info: Any) -> None:
        if info.type == h5py.h5o.TYPE_DATASET:
            datasets.setdefault(info.addr, "/" + name.decode("utf8", "surrogateescape"))
        elif info.type == h5py.h5o.TYPE_GROUP:
            groups.add(info.addr)

    try:
        with h5py.File(source, "r") as f:
            groups.add(h5py.h5o.get_info(f.id).addr)
            h5py.h5o.visit(f.id, visit, info=True)
    except (OSError, RuntimeError, KeyError, ValueError):
        return []
    out = [(path, "dataset not listed by the walk every command shares (HDF5's object visit finds it)")
           for addr, path in sorted(datasets.items(), key=lambda kv: kv[1]) if addr not in walked]
    if len(groups) != len(inventory.groups):
        out.append(("/", f"HDF5's object visit finds {len(groups)} groups, the walk every command shares "
                         f"{len(inventory.groups)}"))
    return out


SAMPLED_BLOCKS = 8
"""Blocks drawn at random, beside the first and the last, where a dataset declared far
larger than it is written is compared although neither side says it holds data there."""


def proof_blocks(path: str, shape: tuple[int, ...], block: Sequence[int], source: Sequence[Region] | None,
                 variant: Sequence[Region] | None) -> Iterator[Region]:
    """The blocks of ``block`` over ``shape`` the proof compares: every one, unless both
    the source and the variant say where their data lie (``source``, ``variant``: a
    dataset declared far larger than it is written, :func:`ReferenceReader.stored_regions`).
    Then the blocks that meet either side's data, and the first, the last and
    :data:`SAMPLED_BLOCKS` more drawn at random (seeded by ``path``): there both sides
    must read as the same fill value, which checks that HDF5's chunk query did not
    leave data out of both."""
    if source is None or variant is None:
        yield from iter_blocks(shape, block)
        return
    grid = [-(-n // b) for n, b in zip(shape, block)]
    total = 1
    for g in grid:
        total *= g
    draw = random.Random(path)
    picks = {0, total - 1, *(draw.randrange(total) for _ in range(SAMPLED_BLOCKS))} if total else set()
    samples = []
    for k in picks:
        origin = []
        for g, b in zip(reversed(grid), reversed(block)):
            k, i = divmod(k, g)
            origin.append(i * b)
        samples.append(tuple((a, a + 1) for a in reversed(origin)))
    yield from blocks_over(shape, block, [*source, *variant, *samples])


__all__ = ["PROCESS_MIN_BYTES", "READ_AHEAD", "SAMPLED_BLOCKS", "UNIFORM_MIN", "ReferenceReader", "Uniform", "proof_blocks", "read_block", "unwalked"]
