"""``layoutkit reorder``: rewrite an HDF5 file as paged-aggregation HDF5, its bytes
ordered shot-major, signal-major or by hierarchy.

The Python face of the command: :func:`plan_reorder` and :func:`reorder` run the
:mod:`~layoutkit.layouts.hdf5_paged.plan` layout through :mod:`layoutkit.pipeline`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from layoutkit import pipeline
from layoutkit.errors import says_it_in_python
from layoutkit.hdf5.inventory import Inventory
from layoutkit.hdf5.scale_reads import find_duplicate_scales
from layoutkit.layouts import get_layout
from layoutkit.layouts.hdf5_paged.options import ReorderOptions
from layoutkit.layouts.hdf5_paged.plan import ReorderPlan, ReorderSummary
from layoutkit.timings import Stages


def plan_reorder(
    src: str | os.PathLike, dst: str | os.PathLike, options: ReorderOptions, inventory: Inventory | None = None
) -> tuple[Inventory, ReorderPlan]:
    """Walk the source and plan the whole reorder (no writing)."""
    return pipeline.plan(get_layout("hdf5-paged"), src, dst, options, inventory)


@says_it_in_python
def reorder(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: ReorderOptions | None = None,
    progress: Callable[[int], None] | None = None,
    plan: tuple[Inventory, ReorderPlan] | None = None,
    stages: Stages | None = None,
) -> ReorderSummary:
    """Rewrite ``src`` as a paged-aggregation HDF5 file ordered by shot, signal or group.
    ``stages`` gets where the time went (:mod:`layoutkit.timings`).

    Raises
    ------
    LayoutkitError
        For every expected failure (bad source, template matching nothing, existing
        destination, missing filter).
    """
    from layoutkit.writing import write

    return write("reorder", src, dst, options or ReorderOptions(), progress=progress, plan=plan, stages=stages)


__all__ = ["ReorderOptions", "ReorderPlan", "ReorderSummary", "find_duplicate_scales", "plan_reorder", "reorder"]
