"""Proving a paged HDF5 file equal to its source: every object at its path, with its HDF5
types, attributes, dimension scales and values (:func:`layoutkit.equality.hdf5.compare_hdf5`)."""

from __future__ import annotations

from typing import Any

from layoutkit.equality import Mismatch
from layoutkit.equality.hdf5 import compare_hdf5


def compare(source: Any, variant: Any, *, inventory: Any, skipped: frozenset[str] = frozenset(), workers: int = 2,
            name: str | None = None) -> list[Mismatch]:
    """The layout's comparator (:meth:`layoutkit.layout.Layout.compare`)."""
    return compare_hdf5(source, variant, inventory=inventory)


__all__ = ["compare"]
