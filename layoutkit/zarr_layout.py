"""What every Zarr layout shares and the registry needs without Zarr itself:
:class:`ZarrLayout`, the Zarr layouts' base class (``convert``'s options and their
recipe keys are in :mod:`layoutkit.zarr_options`).

This module imports neither zarr nor the writers, so that the registry of layouts (and
with it the CLI's choices, recipes, ``inspect`` and ``advise``) loads in a few
milliseconds; each layout imports its writer, reader and comparator when first used.
"""

from __future__ import annotations

from typing import Any

from layoutkit.layout import Layout, PlanT, SummaryT, Work
from layoutkit.zarr_options import ZARR_RECIPE_KEYS, ConvertOptions


class ZarrLayout(Layout[ConvertOptions, PlanT, SummaryT]):
    """The base of the Zarr layouts ``convert`` writes: their options and recipe keys, and
    the finishing of a store (consolidated metadata, the root document last)."""

    command = "convert"
    appends = True  # Zarr format 3 stores (can_append)
    target = "zarr"
    format = "zarr"
    suffix = ".zarr"
    output = "store"
    options_class = ConvertOptions
    recipe_keys = ZARR_RECIPE_KEYS
    consolidates = True
    """Whether the store's root gets consolidated metadata (with ``--consolidate``, the
    default). The virtual layout keeps it in Icechunk too: without it, reading every
    node's document from an Icechunk session took 10 s for 1,000 shots of 5 signals
    (a document a GET through its Python bridge), where the consolidated root takes 0.2 s."""

    def default_options(self) -> ConvertOptions:
        return ConvertOptions(layout=self.name)

    def can_append(self, options: ConvertOptions) -> bool:
        return options.zarr_format == 3  # appends add to Zarr format 3 stores (layoutkit.appending.append)

    def finish(self, work: Work, staged: Any, plan: Any) -> None:  # every Zarr plan has options
        # a layout whose root must not grow with the shots says which nodes to consolidate
        if work.complete is not None:
            work.complete(plan.options.consolidate and self.consolidates)


__all__ = ["ZarrLayout"]
