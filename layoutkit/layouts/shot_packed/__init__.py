"""Shot-packed Zarr: each shot's signals and time bases packed, as bytes, into one sharded array.

Reading a whole shot, the pattern this layout is for, is one GET after the one GET that
opens the store and its index; one signal of a shot is a ranged read inside its shard.
The mirror image of signal-major: one signal across all shots costs a request per shot.

The package is the whole layout: :mod:`.spec` (names, version, the index's encoding and
decoding), :mod:`.plan`, :mod:`.write`, :mod:`.read` and :mod:`.compare`, registered as
:data:`LAYOUT`; each side is imported when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from layoutkit.layout import Appender, Comparator, Planner, Reader, Writer
from layoutkit.layouts.shot_packed.spec import ALIASES, LAYOUT_NAME, LAYOUT_VERSION
from layoutkit.zarr_layout import ZarrLayout
from layoutkit.zarr_options import ConvertOptions

if TYPE_CHECKING:
    from layoutkit.layouts.shot_packed.plan import ShotPackedPlan
    from layoutkit.writers.zarr_convert import ConvertSummary


class ShotPacked(ZarrLayout["ShotPackedPlan", "ConvertSummary"]):
    """Shot-packed Zarr: each shot's numeric datasets packed, as bytes, into one array."""

    name = LAYOUT_NAME
    aliases = ALIASES
    order = "shot-packed"

    def needs_shot_archive(self, options: ConvertOptions) -> bool:
        return True

    def appendable(self, recorded: dict[str, Any]) -> bool:
        return recorded.get("version") == LAYOUT_VERSION  # the root lists no shot (Zarr v3 stores)

    description = "each shot's signals and time bases packed as bytes into one sharded array, with an index"

    def planner(self) -> Planner[ConvertOptions, ShotPackedPlan]:
        from layoutkit.layouts.shot_packed import plan

        return plan

    def writer(self) -> Writer[ShotPackedPlan, ConvertSummary]:
        from layoutkit.layouts.shot_packed import write

        return write

    def reader(self) -> Reader:
        from layoutkit.layouts.shot_packed import read

        return read

    def comparator(self) -> Comparator:
        from layoutkit.layouts.shot_packed import compare

        return compare

    def appender(self) -> Appender:
        from layoutkit.layouts.shot_packed import append

        return append


LAYOUT = ShotPacked()

__all__ = ["LAYOUT", "ShotPacked"]
