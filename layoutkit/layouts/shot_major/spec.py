"""The shot-major Zarr layout's names: a store that mirrors the HDF5 hierarchy.

Every group, dataset and attribute of the source is at its own path; the type rules
(:mod:`layoutkit.formats`) say what each HDF5 feature becomes. A store records no
layout attribute (:data:`~layoutkit.formats.LAYOUT_ATTR`): a Zarr store without one is
shot-major, so any Zarr store, layoutkit's or not, opens as this layout.
"""

from __future__ import annotations

LAYOUT_NAME = "shot-major"
"""The layout's one name; stores do not record it (its absence means this layout)."""
ALIASES = ("zarr-mirror", "shot")
"""Former spellings: the registry key ``zarr-mirror`` and ``convert --order shot``."""

__all__ = ["ALIASES", "LAYOUT_NAME"]
