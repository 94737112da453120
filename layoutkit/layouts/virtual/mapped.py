"""Where the chunks of an HDF5 virtual dataset lie, for the virtual layout to reference
them: each chunk of its grid (the mapped datasets' own, :func:`~layoutkit.layouts.virtual.plan.mapped_plan`)
is one chunk of one mapped dataset, found in that dataset's chunk index, or a contiguous
mapped dataset whole."""

from __future__ import annotations

import itertools
from typing import Literal

import h5py

from layoutkit.hdf5.chunk_index import index_problem
from layoutkit.hdf5.model import ArrayInfo, MappedBlock
from layoutkit.hdf5.raw import chunk_entries
from layoutkit.plan import Region

WRITE: Literal["write"] = "write"
"""A chunk that is mapped but cannot be referenced: never written in its mapped dataset
(HDF5 reads that dataset's fill value there), its filters skipped, or its dataset's
chunk index failed the check; it is read through HDF5 and written."""

Location = tuple[str, int, int] | Literal["write"] | None


class MappedChunks:
    """The chunks of one virtual dataset (planned by ``mapped_plan``) in the regions
    :meth:`cover` is given: :meth:`locate` each.
    Opens the mapped files it needs, by name, and reads each mapped dataset's chunk index
    once; :meth:`close` closes them."""

    def __init__(self, info: ArrayInfo) -> None:
        assert info.mapped
        self.blocks = info.mapped
        first = self.blocks[0]
        self.grid: tuple[int, ...] = first.chunks if first.layout == "chunked" and first.chunks else first.shape
        self._cells: dict[tuple[int, ...], int] = {}  # grid cell -> its block, of the regions covered

    def cover(self, region: Region) -> None:
        """Know the grid cells of the blocks that meet ``region`` (a task's regions: not
        every frame's cells in every task)."""
        for i, b in enumerate(self.blocks):
            if all(o < hi and lo < o + n for o, n, (lo, hi) in zip(b.origin, b.shape, region)):
                self._cells.update((cell, i) for cell in itertools.product(
                    *(range(max(o, lo) // c, -(-min(o + n, hi) // c))
                      for o, n, c, (lo, hi) in zip(b.origin, b.shape, self.grid, region))))
        self._files: dict[str, h5py.File] = {}
        self._where: dict[int, dict[tuple[int, ...], tuple[int, int, int]] | None] = {}

    def locate(self, origin: tuple[int, ...]) -> Location:
        """The chunk at ``origin`` (in a region covered) of the virtual dataset: (mapped file, offset, size) to
        reference, :data:`WRITE`, or None where nothing is mapped (the fill value)."""
        i = self._cells.get(tuple(o // c for o, c in zip(origin, self.grid)))
        if i is None:
            return None
        block = self.blocks[i]
        entries = self._where[i] if i in self._where else self._where.setdefault(i, self._entries(block))
        entry = entries.get(tuple(o - b for o, b in zip(origin, block.origin))) if entries is not None else None
        if entry is None or entry[2] != 0:
            return WRITE
        return block.file, entry[0], entry[1]

    def _entries(self, block: MappedBlock) -> dict[tuple[int, ...], tuple[int, int, int]] | None:
        f = self._files.get(block.file) or self._files.setdefault(block.file, h5py.File(block.file, "r"))
        ds = f[block.dataset]
        if block.layout == "contiguous":
            offset = ds.id.get_offset()
            return {} if offset is None else {(0,) * len(block.shape): (offset, ds.id.get_storage_size(), 0)}
        entries = chunk_entries(ds)
        return None if index_problem(block.shape, self.grid, entries) is not None else entries

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


__all__ = ["WRITE", "MappedChunks"]
