"""``layoutkit convert``: rewrite an HDF5 file as a Zarr store, in one of the Zarr layouts.

The Python face of the command: :func:`plan_convert` (what ``--dry-run`` prints) and
:func:`convert` pick the layout that ``options.layout`` names in the registry
(:mod:`layoutkit.layouts`: ``shot-major``, ``signal-major``, ``shot-packed``) and run it
through :mod:`layoutkit.pipeline`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from layoutkit import pipeline
from layoutkit.appending import batches
from layoutkit.errors import says_it_in_python
from layoutkit.hdf5.inventory import Inventory
from layoutkit.layouts import layout_for
from layoutkit.timings import Stages
from layoutkit.writers.zarr_convert import ConvertSummary
from layoutkit.zarr_options import ConvertOptions
from layoutkit.zarr_plan import ConvertPlan


@says_it_in_python
def plan_convert(
    src: str | os.PathLike, dst: str | os.PathLike, options: ConvertOptions, inventory: Inventory | None = None
) -> tuple[Inventory, ConvertPlan]:
    """Walk the source and plan the whole conversion (no writing). With
    ``options.layout == "signal-major"`` the plan is a
    :class:`~layoutkit.layouts.signal_major.plan.SignalMajorPlan`. Of sources written in
    batches (:mod:`layoutkit.appending.batches`), the plan of the first batch."""
    if inventory is not None:
        return pipeline.plan(layout_for("convert", options), src, dst, options, inventory)
    _, inventory, the_plan = batches.plan(layout_for("convert", options), src, dst, options)
    return inventory, the_plan


@says_it_in_python
def convert(
    src: str | os.PathLike | Sequence[str | os.PathLike],
    dst: str | os.PathLike,
    options: ConvertOptions | None = None,
    progress: Any = None,
    plan: tuple[Inventory, ConvertPlan] | None = None,
    stages: Stages | None = None,
) -> ConvertSummary:
    """Convert an HDF5 file to a Zarr store.

    Parameters
    ----------
    src, dst
        Source HDF5 path (or several, or a glob: written as one archive, the union of
        their shots; :mod:`layoutkit.hdf5.combined`; many, in batches: :mod:`layoutkit.appending.batches`)
        and destination store directory.
    options
        A :class:`ConvertOptions`; defaults to Zarr v3, auto chunks of 4 MiB, zstd:3.
    progress
        Optional callable receiving the logical bytes of each finished task.
    plan
        A plan from :func:`plan_convert`, to avoid walking the source twice.
    stages
        Gets where the time went: each step, and the work inside it (:mod:`layoutkit.timings`).

    Returns
    -------
    ConvertSummary

    Raises
    ------
    LayoutkitError
        For every expected failure (bad source, existing destination, unsupported feature).
    """
    from layoutkit.writing import write

    return write("convert", src, dst, options or ConvertOptions(), progress=progress, plan=plan, stages=stages)


__all__ = ["ConvertOptions", "ConvertPlan", "ConvertSummary", "convert", "plan_convert"]
