"""Signal-major Zarr: every shot of one signal packed end to end in one (sharded) array.

Reading one signal of every shot, the pattern this layout is for, is a handful of reads
of one array. Every dataset that matches the template and holds fixed-size numbers is
packed with the same signal of every other shot; so is every dimension scale inside a
shot, once per content within the shot. Everything else (arrays outside the template,
text or compound signals, groups with attributes) is mirrored at its own path, as a
shot-major store holds it, so nothing of the source is lost.

The package is the whole layout: :mod:`.spec` (names, version, the index's encoding and
decoding), :mod:`.plan` (pure planning), :mod:`.write` (the writer and its tasks),
:mod:`.read` (the reader) and :mod:`.compare` (the comparator), registered as
:data:`LAYOUT`. Only the spec is imported with the registry; each side is imported when
it is first used (:class:`~layoutkit.layout.Layout`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from layoutkit.layout import Appender, Comparator, Planner, Reader, Writer
from layoutkit.layouts.signal_major.spec import ALIASES, LAYOUT_NAME, LAYOUT_VERSION
from layoutkit.zarr_layout import ZarrLayout
from layoutkit.zarr_options import ConvertOptions

if TYPE_CHECKING:
    from layoutkit.layouts.signal_major.plan import SignalMajorPlan
    from layoutkit.writers.zarr_convert import ConvertSummary


class SignalMajor(ZarrLayout["SignalMajorPlan", "ConvertSummary"]):
    """Signal-major Zarr: each signal of every shot packed end to end in one array."""

    name = LAYOUT_NAME
    aliases = ALIASES
    order = "signal"

    def needs_shot_archive(self, options: ConvertOptions) -> bool:
        return True

    def appendable(self, recorded: dict[str, Any]) -> bool:
        return recorded.get("version") == LAYOUT_VERSION  # the root lists no shot (Zarr v3 stores)

    description = "each signal of every shot packed into one (sharded) array, with a per-shot index"

    def scale_template(self, options: ConvertOptions) -> str | None:
        return "/" + options.template.strip("/")

    def planner(self) -> Planner[ConvertOptions, SignalMajorPlan]:
        from layoutkit.layouts.signal_major import plan

        return plan

    def writer(self) -> Writer[SignalMajorPlan, ConvertSummary]:
        from layoutkit.layouts.signal_major import write

        return write

    def reader(self) -> Reader:
        from layoutkit.layouts.signal_major import read

        return read

    def comparator(self) -> Comparator:
        from layoutkit.layouts.signal_major import compare

        return compare

    def appender(self) -> Appender:
        from layoutkit.layouts.signal_major import append

        return append


LAYOUT = SignalMajor()

__all__ = ["LAYOUT", "SignalMajor"]
