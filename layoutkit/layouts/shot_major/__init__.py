"""Shot-major Zarr: the HDF5 hierarchy mirrored, one Zarr array per dataset at its own path.

``convert``'s default. Every group, array and attribute lands at the same path; chunks
are the source's grown to ``--chunk-size``, optionally sharded; ``--compressor source``
copies the stored chunks as they are. Any Zarr reader reads it (zarr-python, xarray,
tensorstore), and a Zarr store that records no layoutkit layout is read as this one.

The package is the whole layout: :mod:`.spec`, :mod:`.plan`, :mod:`.write`,
:mod:`.read` and :mod:`.compare`, registered as :data:`LAYOUT`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from layoutkit.layout import Appender, Comparator, Planner, Reader, Writer
from layoutkit.layouts.shot_major.spec import ALIASES, LAYOUT_NAME
from layoutkit.zarr_layout import ZarrLayout
from layoutkit.zarr_options import ConvertOptions

if TYPE_CHECKING:
    from layoutkit.writers.zarr_convert import ConvertSummary
    from layoutkit.zarr_plan import ConvertPlan


class ShotMajor(ZarrLayout["ConvertPlan", "ConvertSummary"]):
    """The HDF5 hierarchy mirrored as Zarr: one array per dataset, at its path."""

    name = LAYOUT_NAME
    aliases = ALIASES
    order = "shot"
    description = "the hierarchy mirrored: one Zarr array per dataset, at the same path"

    def appendable(self, recorded: dict[str, Any]) -> bool:
        return True  # a shot's nodes are its own objects; the root's listing takes the new ones

    def planner(self) -> Planner[ConvertOptions, ConvertPlan]:
        from layoutkit.layouts.shot_major import plan

        return plan

    def writer(self) -> Writer[ConvertPlan, ConvertSummary]:
        from layoutkit.layouts.shot_major import write

        return write

    def reader(self) -> Reader:
        from layoutkit.layouts.shot_major import read

        return read

    def comparator(self) -> Comparator:
        from layoutkit.layouts.shot_major import compare

        return compare

    def appender(self) -> Appender:
        from layoutkit.layouts.shot_major import append

        return append


LAYOUT = ShotMajor()

__all__ = ["LAYOUT", "ShotMajor"]
