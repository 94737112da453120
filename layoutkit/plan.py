"""Pure layout maths: chunks, shards and the batches of work a conversion runs.

Nothing here opens a file. The functions take shapes, itemsizes and options and return
frozen dataclasses; :mod:`layoutkit.schedulers` and the writers consume them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from layoutkit.options import ChunkSpec, CompressorSpec, ShardSpec

Region = tuple[tuple[int, int], ...]  # (start, stop) per axis


def _prod(xs: Sequence[int]) -> int:
    return math.prod(xs) if xs else 1


def plan_grid(
    shape: Sequence[int], base: Sequence[int], itemsize: int, target_bytes: int
) -> tuple[int, ...]:
    """Grow a block shape from ``base`` by whole multiples until it nears ``target_bytes``.

    Every returned extent is a multiple of the base extent, or the whole axis when a
    multiple would reach past it, so every block boundary is also a base-block boundary
    (the property that lets a conversion read source chunks whole). Axes are grown one
    doubling at a time, always the axis that covers the smallest fraction of the array,
    which keeps blocks compact rather than long and thin. A block is never smaller than
    ``base`` (clipped to the array) even when ``base`` alone exceeds ``target_bytes``.

    Parameters
    ----------
    shape
        The array shape.
    base
        The block to grow from (source chunks, or Zarr chunks when planning shards).
    itemsize
        Bytes per element.
    target_bytes
        Upper bound on the block's uncompressed size, once the base is exceeded.
    """
    shape = tuple(int(s) for s in shape)
    block = [max(1, min(int(b), s)) if s > 0 else 1 for b, s in zip(base, shape)]
    if not shape:
        return ()
    while True:
        nbytes = _prod(block) * itemsize
        candidates = []
        for axis, (b, s, unit) in enumerate(zip(block, shape, base)):
            if s <= 0 or b >= s:
                continue
            grown = min(s, b * 2)
            # stay on multiples of the base unit, or cover the whole axis
            if grown < s:
                grown = (grown // unit) * unit
            if grown <= b:
                continue
            if nbytes // b * grown > target_bytes:
                continue
            candidates.append((b / s, -axis, axis, grown))
        if not candidates:
            return tuple(block)
        _, _, axis, grown = min(candidates)
        block[axis] = grown


def contiguous_base(shape: Sequence[int], itemsize: int, target_bytes: int) -> tuple[int, ...]:
    """A base block for an unchunked array: whole trailing axes first (C order), so each
    block is one contiguous byte range of the source."""
    block = [1] * len(shape)
    nbytes = itemsize
    for axis in range(len(shape) - 1, -1, -1):
        s = max(1, shape[axis])
        if nbytes * s <= target_bytes:
            block[axis] = s
            nbytes *= s
        else:
            block[axis] = max(1, target_bytes // nbytes)
            break
    return tuple(block)


def plan_chunks(
    shape: Sequence[int],
    itemsize: int,
    source_chunks: Sequence[int] | None,
    spec: ChunkSpec,
    target_bytes: int,
) -> tuple[int, ...]:
    """Choose the Zarr chunk shape of one array.

    ``source`` keeps the source chunks (or, for unchunked sources, the ``auto`` choice),
    ``auto`` grows the source chunks to about ``target_bytes``, and an explicit shape
    applies to arrays of the same rank (``-1`` = whole axis; extents clipped to the array).
    """
    shape = tuple(int(s) for s in shape)
    if not shape:
        return ()
    if spec.mode == "shape" and spec.shape is not None and len(spec.shape) == len(shape):
        return tuple(
            max(1, s if c == -1 else min(c, s)) if s > 0 else 1 for c, s in zip(spec.shape, shape)
        )
    if spec.mode == "source" and source_chunks:
        return tuple(max(1, min(c, s)) if s > 0 else 1 for c, s in zip(source_chunks, shape))
    base = tuple(source_chunks) if source_chunks else contiguous_base(shape, itemsize, target_bytes)
    return plan_grid(shape, base, itemsize, target_bytes)


def plan_shards(
    shape: Sequence[int], chunks: Sequence[int], itemsize: int, spec: ShardSpec
) -> tuple[int, ...] | None:
    """Choose the shard shape (a multiple of ``chunks``), or None when not sharding.

    Arrays that fit in one chunk are not sharded: a shard of one chunk only adds an index.
    """
    if spec.mode == "none" or not shape:
        return None
    nchunks = _prod([math.ceil(s / c) if s > 0 else 1 for s, c in zip(shape, chunks)])
    if nchunks <= 1:
        return None
    shards = plan_grid(shape, chunks, itemsize, spec.target_bytes)
    # zarr needs shards to be whole multiples of chunks; a shard may reach past the
    # array's end (the missing chunks are simply absent)
    return tuple(math.ceil(sh / c) * c for sh, c in zip(shards, chunks))


def iter_blocks(shape: Sequence[int], block: Sequence[int]) -> Iterator[Region]:
    """Yield the regions of a regular grid of ``block`` over ``shape`` in C order."""
    if not shape:
        yield ()
        return
    if any(s == 0 for s in shape):
        return
    ranges = [range(0, s, b) for s, b in zip(shape, block)]
    for starts in itertools.product(*ranges):
        yield tuple((a, min(a + b, s)) for a, b, s in zip(starts, block, shape))


def blocks_over(shape: Sequence[int], block: Sequence[int], regions: Sequence[Region] | None) -> Iterator[Region]:
    """The blocks of the grid of ``block`` over ``shape`` that meet any of ``regions``,
    each once, in C order: a dataset declared far larger than it is written is planned
    from where its data lie (:attr:`~layoutkit.hdf5.model.ArrayInfo.stored_regions`).
    ``regions`` None: every block (:func:`iter_blocks`)."""
    if regions is None:
        yield from iter_blocks(shape, block)
        return
    starts: set[tuple[int, ...]] = set()
    for region in regions:
        if all(a < b for a, b in region):
            starts.update(itertools.product(*(range(a // b * b, stop, b) for (a, stop), b in zip(region, block))))
    for origin in sorted(starts):
        yield tuple((a, min(a + b, s)) for a, b, s in zip(origin, block, shape))


def region_size(region: Region) -> int:
    return _prod([b - a for a, b in region])


@dataclass(frozen=True)
class ArrayPlan:
    """How one source dataset becomes one target array."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    itemsize: int
    chunks: tuple[int, ...]
    shards: tuple[int, ...] | None
    compressor: CompressorSpec
    read_mode: str  # "raw" (read chunks, decode in parallel) | "h5py" | "none" (no data)
    nbytes: int
    # --compressor source: the stored chunks are copied as they are ("copy"), with the
    # source's filter pipeline spelled as Zarr codecs (a SourceEncoding)
    source_encoding: Any = None
    # where the source's data lie when it is declared far larger than it is written
    # (:attr:`~layoutkit.hdf5.model.ArrayInfo.stored_regions`): only the write blocks
    # that meet them are written, the rest is left to the fill value; None: every block
    regions: tuple[Region, ...] | None = None
    # the attributes by which the type rules say how the source's type is stored (a
    # sequence's value type, a compound's text members...: zarr_plan.type_attrs); empty
    # for a type stored as it is
    type_attrs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def numpy_dtype(self) -> Any:
        """:attr:`dtype` as a NumPy dtype (a structured one too); None for variable-length
        text or bytes (``"str"``, ``"bytes"``)."""
        import ast

        import numpy as np

        if self.dtype in ("str", "bytes"):
            return None
        structured = self.dtype.startswith(("[", "{"))  # str() of a structured dtype: its fields' list, or dict
        return np.dtype(ast.literal_eval(self.dtype) if structured else self.dtype)

    @property
    def write_block(self) -> tuple[int, ...]:
        """The unit a task must write whole: the shard when sharding, else the chunk."""
        return self.shards or self.chunks


@dataclass(frozen=True)
class CopyTask:
    """A batch of regions, across one or more arrays, copied by one worker."""

    index: int
    items: tuple[tuple[str, Region], ...]
    nbytes: int


def plan_tasks(arrays: Sequence[ArrayPlan], task_bytes: int) -> tuple[CopyTask, ...]:
    """Split the copy into tasks of whole write blocks, each at most ``task_bytes``
    (or one block, when a block alone is larger). Small arrays are batched together so
    a file of thousands of tiny datasets does not become thousands of tasks."""
    tasks: list[CopyTask] = []
    items: list[tuple[str, Region]] = []
    nbytes = 0

    def flush() -> None:
        nonlocal items, nbytes
        if items:
            tasks.append(CopyTask(len(tasks), tuple(items), nbytes))
            items, nbytes = [], 0

    for plan in arrays:
        if plan.read_mode == "none":
            continue
        for region in blocks_over(plan.shape, plan.write_block, plan.regions):
            size = region_size(region) * plan.itemsize
            if items and nbytes + size > task_bytes:
                flush()
            items.append((plan.path, region))
            nbytes += size
    flush()
    return tuple(tasks)


TASK_TARGET_BYTES = 16 * 1024**2


def task_budget(memory_limit: int, workers: int) -> int:
    """Bytes of source data one task may hold.

    All workers together must stay within ``memory_limit``; a task holds its raw chunks,
    the decoded block and the encoded output at once, and two tasks per worker can be in
    flight, so allow eight copies per worker. Tasks are also kept near 16 MiB so that
    reading, decoding and writing overlap across workers.
    """
    return max(1 << 20, min(TASK_TARGET_BYTES, memory_limit // (8 * max(1, workers))))


def names_plan(path: str, count: int, compressor: CompressorSpec) -> ArrayPlan:
    """A root-level list of names (a layout's shots, say): text, one chunk, written
    with the layout's index, not by the copy tasks (``read_mode="index"``)."""
    return ArrayPlan(path=path, shape=(count,), dtype="str", itemsize=16, chunks=(max(1, count),), shards=None,
                     compressor=compressor, read_mode="index", nbytes=16 * count)
