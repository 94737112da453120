"""Proving a virtual store equal to its sources: as a shot-major store is, every group,
array and attribute at its own path (:func:`layoutkit.equality.compare_zarr`), each
referenced chunk read through Icechunk from the file it points into, and the source
read through HDF5 itself: the proof shares no read path with the references."""

from __future__ import annotations

from typing import Any

from layoutkit.equality import Mismatch, compare_zarr
from layoutkit.formats import LAYOUT_ATTR


def compare(source: Any, variant: Any, *, inventory: Any = None, skipped: frozenset[str] = frozenset(),
            workers: int = 2, name: str | None = None) -> list[Mismatch]:
    """Every difference between a virtual store and its sources (empty: equal)."""
    return compare_zarr(source, variant, inventory, skipped, workers, name, index_attrs=frozenset({LAYOUT_ATTR}))


__all__ = ["compare"]
