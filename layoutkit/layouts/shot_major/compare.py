"""Proving a shot-major store equal to its source: every group, array and attribute at its
own path (:func:`layoutkit.equality.compare_zarr`)."""

from __future__ import annotations

from typing import Any

from layoutkit.equality import Mismatch, compare_zarr


def compare(source: Any, variant: Any, *, inventory: Any = None, skipped: frozenset[str] = frozenset(),
            workers: int = 2, name: str | None = None) -> list[Mismatch]:
    """Every difference between a shot-major store and its source (empty: equal)."""
    return compare_zarr(source, variant, inventory, skipped, workers, name)


__all__ = ["compare"]
