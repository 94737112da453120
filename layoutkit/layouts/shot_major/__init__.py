"""Shot-major Zarr: the HDF5 hierarchy mirrored, one Zarr array per dataset at its own path.

``convert``'s default. Every group, array and attribute lands at the same path; chunks
are the source's grown to ``--chunk-size``, optionally sharded; ``--compressor source``
copies the stored chunks as they are. Any Zarr reader reads it (zarr-python, xarray,
tensorstore), and a Zarr store that records no layoutkit layout is read as this one.

The package is the whole layout: :mod:`.spec`, :mod:`.plan`, :mod:`.write`,
:mod:`.read` and :mod:`.compare`, registered as :data:`LAYOUT`.
"""

from __future__ import annotations

from layoutkit.layouts.shot_major.spec import ALIASES, LAYOUT_NAME
from layoutkit.zarr_layout import ZarrLayout


class ShotMajor(ZarrLayout):
    """The HDF5 hierarchy mirrored as Zarr: one array per dataset, at its path."""

    name = LAYOUT_NAME
    aliases = ALIASES
    package = __name__
    order = "shot"
    description = "the hierarchy mirrored: one Zarr array per dataset, at the same path"

    def appendable(self, recorded: dict) -> bool:
        return True  # a shot's nodes are its own objects; the root's listing takes the new ones


LAYOUT = ShotMajor()

__all__ = ["LAYOUT", "ShotMajor"]
