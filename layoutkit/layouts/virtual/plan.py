"""Planning a virtual store (pure): which datasets are referenced where they lie, and
which are written, with why.

A dataset is referenced when its stored bytes are what Zarr reads with some codecs: a
chunked dataset whose filter pipeline has a Zarr spelling (:mod:`layoutkit.hdf5.encoding`),
its chunk grid the source's; a contiguous dataset of numbers as one chunk, the whole
array. Everything else is planned as the shot-major layout plans it (``--chunks``,
``--compressor``) and written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from layoutkit.errors import InvalidOptionError, MissingFilterError, UnsupportedFeatureError
from layoutkit.hdf5.encoding import RAW_COPY_KINDS, SourceEncoding
from layoutkit.hdf5.model import ArrayInfo, Inventory
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
    if info.external:
        return "keeps its raw data in other files (external raw storage, read through HDF5)"
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
