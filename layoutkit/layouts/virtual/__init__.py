"""The virtual layout: no byte copied, the sources' chunks referenced where they lie.

``convert SRC... icechunk:REPO --layout virtual`` writes an Icechunk repository whose
hierarchy mirrors the sources as the shot-major layout does, and whose chunks are
references (file URL, offset, length) into the source files, with each HDF5 filter
pipeline spelled as Zarr codecs (:mod:`layoutkit.hdf5.encoding`). What cannot be
referenced (compact datasets, text, filters with no Zarr codec, arrays joined from
several files, chunks whose filters were skipped, indexes the self-check distrusts) is
written as ordinary chunks, with ``--chunks`` and ``--compressor``; the summary says how
many arrays and bytes, and why. It is the answer to "must I rewrite at all?", measured
by ``verify`` and ``advise`` beside the layouts that rewrite.

The package is the whole layout, as every other's: :mod:`.spec`, :mod:`.plan`,
:mod:`.write`, :mod:`.read`, :mod:`.compare` and :mod:`.append`, registered as
:data:`LAYOUT`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from layoutkit.layout import Appender, Comparator, Planner, Reader, Writer
from layoutkit.layouts.virtual.spec import LAYOUT_NAME, LAYOUT_VERSION
from layoutkit.zarr_layout import ZarrLayout
from layoutkit.zarr_options import ConvertOptions

if TYPE_CHECKING:
    from layoutkit.layouts.virtual.plan import VirtualPlan
    from layoutkit.layouts.virtual.write import VirtualSummary


class Virtual(ZarrLayout["VirtualPlan", "VirtualSummary"]):
    """The sources' chunks referenced where they lie, in an Icechunk repository."""

    name = LAYOUT_NAME
    destinations = ("icechunk",)
    suffix = ".icechunk"
    rewrites = False
    description = "no copy: an Icechunk repository of references to the sources' chunks (shot-major hierarchy)"

    def appendable(self, recorded: dict[str, Any]) -> bool:
        return recorded.get("version") == LAYOUT_VERSION

    def can_append(self, options: ConvertOptions) -> bool:
        return True  # Icechunk holds Zarr format 3 only

    def planner(self) -> Planner[ConvertOptions, VirtualPlan]:
        from layoutkit.layouts.virtual import plan

        return plan

    def writer(self) -> Writer[VirtualPlan, VirtualSummary]:
        from layoutkit.layouts.virtual import write

        return write

    def reader(self) -> Reader:
        from layoutkit.layouts.virtual import read

        return read

    def comparator(self) -> Comparator:
        from layoutkit.layouts.virtual import compare

        return compare

    def appender(self) -> Appender:
        from layoutkit.layouts.virtual import append

        return append


LAYOUT = Virtual()

__all__ = ["LAYOUT", "Virtual"]
