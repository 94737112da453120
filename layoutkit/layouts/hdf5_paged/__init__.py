"""Paged HDF5 (``reorder``): the source's hierarchy kept, in a paged-aggregation file whose
bytes are ordered by shot, by signal or by the hierarchy.

Every object is created first (the metadata pages at the front), then raw data is
written in the chosen order: chunks read and encoded in parallel, handed to HDF5 in
order on one thread (h5py holds one lock, and the byte order in the file is the order
of the writes). Dimension scales that repeat another of the same shot are stored once.

The package is the whole layout: :mod:`.spec`, :mod:`.options`, :mod:`.plan`,
:mod:`.write`, :mod:`.read` and :mod:`.compare`, registered as :data:`LAYOUT`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from layoutkit.layout import Comparator, Layout, Planner, Reader, Writer
from layoutkit.layouts.hdf5_paged.options import REORDER_RECIPE_KEYS, ReorderOptions
from layoutkit.layouts.hdf5_paged.spec import ALIASES, LAYOUT_NAME

if TYPE_CHECKING:
    from layoutkit.layouts.hdf5_paged.plan import ReorderPlan, ReorderSummary


class HDF5Paged(Layout[ReorderOptions, "ReorderPlan", "ReorderSummary"]):
    """Paged-aggregation HDF5 with the source's hierarchy, bytes in shot, signal or group order."""

    name = LAYOUT_NAME
    aliases = ALIASES
    command = "reorder"
    target = "hdf5-paged"
    format = "hdf5"
    suffix = ".h5"
    output = "file"
    destinations = ("local", "bucket")  # one file; Icechunk holds Zarr stores
    options_class = ReorderOptions
    recipe_keys = REORDER_RECIPE_KEYS
    description = "paged-aggregation HDF5, the hierarchy kept, bytes ordered by shot, signal or group"

    def needs_shot_archive(self, options: ReorderOptions) -> bool:
        return options.by in ("shot", "signal")

    def merges_scales(self, options: ReorderOptions) -> bool:
        return options.dedupe

    def scale_template(self, options: ReorderOptions) -> str | None:
        return options.template if options.dedupe else None

    def planner(self) -> Planner[ReorderOptions, ReorderPlan]:
        from layoutkit.layouts.hdf5_paged import plan

        return plan

    def writer(self) -> Writer[ReorderPlan, ReorderSummary]:
        from layoutkit.layouts.hdf5_paged import write

        return write

    def reader(self) -> Reader:
        from layoutkit.layouts.hdf5_paged import read

        return read

    def comparator(self) -> Comparator:
        from layoutkit.layouts.hdf5_paged import compare

        return compare


LAYOUT = HDF5Paged()

__all__ = ["LAYOUT", "HDF5Paged"]
