"""Shot-packed Zarr: each shot's signals and time bases packed, as bytes, into one sharded array.

Reading a whole shot, the pattern this layout is for, is one GET after the one GET that
opens the store and its index; one signal of a shot is a ranged read inside its shard.
The mirror image of signal-major: one signal across all shots costs a request per shot.

The package is the whole layout: :mod:`.spec` (names, version, the index's encoding and
decoding), :mod:`.plan`, :mod:`.write`, :mod:`.read` and :mod:`.compare`, registered as
:data:`LAYOUT`; each side is imported when first used.
"""

from __future__ import annotations

from layoutkit.layouts.shot_packed.spec import ALIASES, LAYOUT_NAME, LAYOUT_VERSION
from layoutkit.zarr_layout import ZarrLayout
from layoutkit.zarr_options import ConvertOptions


class ShotPacked(ZarrLayout):
    """Shot-packed Zarr: each shot's numeric datasets packed, as bytes, into one array."""

    name = LAYOUT_NAME
    aliases = ALIASES
    package = __name__
    order = "shot-packed"

    def needs_shot_archive(self, options: ConvertOptions) -> bool:
        return True

    def appendable(self, recorded: dict) -> bool:
        return recorded.get("version") == LAYOUT_VERSION  # the root lists no shot (Zarr v3 stores)

    description = "each shot's signals and time bases packed as bytes into one sharded array, with an index"


LAYOUT = ShotPacked()

__all__ = ["LAYOUT", "ShotPacked"]
