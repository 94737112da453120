"""Planning a virtual store (pure): which datasets are referenced where they lie, and
which are written, with why.

A dataset is referenced when its stored bytes are what Zarr reads with some codecs: a
chunked dataset whose filter pipeline has a Zarr spelling (:mod:`layoutkit.hdf5.encoding`),
its chunk grid the source's; a contiguous dataset of numbers as one chunk, the whole
array. Everything else is planned as the shot-major layout plans it (``--chunks``,
``--compressor``) and written.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

from layoutkit.errors import InvalidOptionError, MissingFilterError, UnsupportedFeatureError
from layoutkit.hdf5.encoding import RAW_COPY_KINDS, SourceEncoding
from layoutkit.hdf5.model import ArrayInfo, Inventory, long_double
from layoutkit.options import parse_chunks, parse_compressor, parse_shards
from layoutkit.plan import ArrayPlan, plan_tasks, task_budget
from layoutkit.zarr_options import ConvertOptions
from layoutkit.zarr_plan import ConvertPlan, plan_array, plan_arrays, reencode_reason


@dataclass(frozen=True)
class VirtualPlan(ConvertPlan):
    """A shot-major plan whose ``referenced`` arrays are references into the sources;
    ``written``: every other array, and why it is not referenced."""

    referenced: tuple[str, ...] = ()
    written: tuple[tuple[str, str], ...] = ()

    @property
    def referenced_bytes(self) -> int:
        refs = set(self.referenced)
        return sum(a.nbytes for a in self.arrays if a.path in refs)


def reference_plan(info: ArrayInfo, options: ConvertOptions, budget: int) -> ArrayPlan | str:
    """The plan of ``info`` referenced where it lies, or why it cannot be."""
    if info.segments is not None:
        return "is joined from several files along a record dimension"
    if long_double(info.dtype):
        return "holds long doubles (stored as text: Zarr has no float wider than 64 bits)"
    if info.external:
        return "keeps its raw data in other files (external raw storage, read through HDF5)"
    if info.layout == "virtual":
        return mapped_plan(info, options, budget)
    if info.layout == "contiguous":
        if info.kind not in RAW_COPY_KINDS or info.dtype.hasobject:
            return f"holds {info.kind} values (only numbers are referenced)"
        if info.offset is None:
            return "was never written (nothing to reference)"
        if not info.shape or 0 in info.shape:
            return "is empty"
        if info.raw_fallback:
            return f"is read through HDF5 ({info.raw_fallback})"
        planned = plan_array(info, options, budget)
        return replace(planned, chunks=tuple(info.shape), shards=None, source_encoding=SourceEncoding(()),
                       read_mode="copy")
    planned = plan_array(info, options, budget)
    if planned.source_encoding is None:
        return reencode_reason(info)
    return planned


def mapped_plan(info: ArrayInfo, options: ConvertOptions, budget: int) -> ArrayPlan | str:
    """A virtual dataset referenced from the chunks of the datasets it maps (the NeXus
    master file's frames), or why it cannot be: its chunk grid is theirs, so each of its
    chunks is one chunk of one mapped dataset. Each mapping must place a whole dataset as
    one block (:attr:`ArrayInfo.mapped`), all of them of its type, stored alike (the same
    chunks and filters, or contiguous blocks of one shape) and on that grid (a block
    starting on a chunk boundary, a whole number of chunks long unless it ends the
    dataset), none over another."""
    blocks = info.mapped
    if not blocks:
        return "is an HDF5 virtual dataset whose mappings are not whole datasets of other files (read through HDF5)"
    if info.kind not in RAW_COPY_KINDS or info.dtype.hasobject or info.dtype.names:  # its type: numbers
        return f"is an HDF5 virtual dataset of {info.kind} values (only numbers are referenced)"
    first = blocks[0]
    kept = (first.layout, first.chunks, first.filters, first.dtype)
    if any((b.layout, b.chunks, b.filters, b.dtype) != kept for b in blocks) or first.dtype != info.dtype.str:
        return "is an HDF5 virtual dataset mapping datasets stored unlike each other or of another type (read through HDF5)"
    if first.layout not in ("chunked", "contiguous") or first.layout == "contiguous" and (
            first.filters or any(b.shape != first.shape for b in blocks)):
        return "is an HDF5 virtual dataset mapping datasets of no common chunk grid (read through HDF5)"
    grid = first.chunks if first.layout == "chunked" else first.shape
    assert grid is not None
    cells: set[tuple[int, ...]] = set()
    for b in blocks:
        if any(o % c or (n % c and o + n != size) for o, n, c, size in zip(b.origin, b.shape, grid, info.shape)):
            return "is an HDF5 virtual dataset whose mapped blocks are not on their chunk grid (read through HDF5)"
        mine = set(itertools.product(*(range(o // c, -(-(o + n) // c)) for o, n, c in zip(b.origin, b.shape, grid))))
        if cells & mine:
            return "is an HDF5 virtual dataset whose mappings overlap (read through HDF5)"
        cells |= mine
    stored = replace(info, layout=first.layout, chunks=first.chunks, filters=first.filters, mapped=None)
    if first.layout == "contiguous":
        planned = plan_array(stored, options, budget)
        return replace(planned, chunks=grid, shards=None, source_encoding=SourceEncoding(()), read_mode="copy")
    planned = plan_array(stored, options, budget)
    if planned.source_encoding is None or planned.chunks != grid:
        return f"is an HDF5 virtual dataset whose mapped chunks are not referenced: it {reencode_reason(stored)}"
    return planned


def plan(inventory: Inventory, options: ConvertOptions, scale_digests: dict[str, Any], dest: str = "") -> VirtualPlan:
    """The layout's planner (:meth:`layoutkit.layout.Layout.plan`).

    Raises
    ------
    InvalidOptionError
        ``--zarr-format 2`` (Icechunk holds Zarr format 3).
    UnsupportedFeatureError, MissingFilterError
        A dataset cannot be carried (unless ``options.skip_unsupported``).
    """
    if options.zarr_format != 3:
        raise InvalidOptionError("The virtual layout writes an Icechunk repository, which holds Zarr format 3: "
                                 "leave out --zarr-format 2.")
    budget = task_budget(options.memory_limit, options.workers)
    as_stored = replace(options, chunks=parse_chunks("source"), compressor=parse_compressor("source"),
                        shards=parse_shards("none"))
    arrays: dict[str, ArrayPlan] = {}
    referenced: list[str] = []
    written: list[tuple[str, str]] = []
    others: list[ArrayInfo] = []
    wanted = [a for a in inventory.arrays if not a.dim_only]
    for info in wanted:
        try:
            found = reference_plan(info, as_stored, budget)
        except (UnsupportedFeatureError, MissingFilterError):  # said (or skipped) by plan_arrays, as for every layout
            found = "cannot be carried"
        if isinstance(found, ArrayPlan):
            arrays[info.path] = found
            referenced.append(info.path)
        else:
            others.append(info)
            written.append((info.path, found))
    plans, skipped = plan_arrays(others, options, budget)
    arrays.update({p.path: p for p in plans if p is not None})
    left_out = {p for p, _ in skipped}
    ordered = tuple(arrays[a.path] for a in wanted if a.path in arrays)
    return VirtualPlan(inventory.path, dest, options, ordered, tuple(skipped), plan_tasks(ordered, budget), budget, (),
                       tuple(referenced), tuple((p, why) for p, why in written if p not in left_out))


__all__ = ["VirtualPlan", "plan", "reference_plan"]
