"""Planning a shot-major store: every dataset planned at its own path (pure)."""

from __future__ import annotations

from typing import Any

from layoutkit.hdf5.model import Inventory
from layoutkit.plan import plan_tasks, task_budget
from layoutkit.zarr_options import ConvertOptions
from layoutkit.zarr_plan import ConvertPlan, check_source_options, plan_arrays, reencode_reason


def plan_shot_major(inventory: Inventory, options: ConvertOptions, dest: str = "") -> ConvertPlan:
    """The whole store: each dataset's chunks and shards, and the copy tasks.

    Raises
    ------
    UnsupportedFeatureError, MissingFilterError
        A dataset cannot be carried (unless ``options.skip_unsupported``).
    InvalidOptionError
        ``--compressor source`` with a chunk shape.
    """
    check_source_options(options)
    budget = task_budget(options.memory_limit, options.workers)
    plans, skipped = plan_arrays([a for a in inventory.arrays if not a.dim_only], options, budget)
    arrays = tuple(p for p in plans if p is not None)
    tasks = plan_tasks(arrays, budget)
    infos = {a.path: a for a in inventory.arrays}
    reencoded = tuple(
        (a.path, reencode_reason(infos[a.path]))
        for a in arrays if options.compressor.name == "source" and a.source_encoding is None
    )
    return ConvertPlan(inventory.path, dest, options, arrays, tuple(skipped), tasks, budget, reencoded)


def plan(inventory: Inventory, options: ConvertOptions, scale_digests: dict[str, Any], dest: str = "") -> Any:
    """The layout's planner (:meth:`layoutkit.layout.Layout.plan`)."""
    return plan_shot_major(inventory, options, dest)


__all__ = ["plan", "plan_shot_major"]
