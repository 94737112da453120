"""Proving a shot-packed store equal to its source.

Every packed dataset is read back through the layout's reader and compared with the
source (:func:`layoutkit.equality.compare_packed`), the mirrored ones as a shot-major
store's; and the index is checked: each shot's datasets fill its packed array end to
end, and the store has no dataset the source lacks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from layoutkit.equality import Mismatch, compare_packed
from layoutkit.hdf5.inventory import Inventory
from layoutkit.layouts.shot_packed.read import ShotPackedArchive
from layoutkit.layouts.shot_packed.spec import INDEX_ATTR


def compare(source: str | Path, variant: Any, *, inventory: Inventory | None = None,
            skipped: frozenset[str] = frozenset(), workers: int = 2, name: str | None = None) -> list[Mismatch]:
    """Every difference between a shot-packed Zarr store and its source (empty: equal):
    every packed dataset read back at its source path (shape, dtype, fill value,
    attributes, dimension scales and values), the mirrored ones as
    :func:`~layoutkit.equality.compare_zarr` compares them, and the index (:func:`check_index`)."""
    return compare_packed(source, variant, ShotPackedArchive, check_index, inventory, skipped, workers, name,
                          frozenset({INDEX_ATTR}))


def check_index(archive: Any, source_paths: set[str], miss: Any) -> None:
    """Every indexed dataset is in the source, and each shot's datasets fill its packed
    arrays end to end."""
    for shot, members in archive._segments.items():
        spans: dict[str, list[tuple[int, int]]] = {}
        for rel, seg in members.items():
            path = f"{archive.shot_path(shot)}/{rel}"
            if path not in source_paths:
                miss(path, "extra", f"the store's index of shot {shot} has {rel}, which the source does not")
            spans.setdefault(seg.data, []).append((seg.start, seg.length))
        for data, parts in spans.items():
            parts.sort()
            ends = [0] + [s + n for s, n in parts]
            if archive.node(data) is None:
                miss(data, "index", "a packed array the index names is missing")
            elif [s for s, _ in parts] != ends[:-1] or ends[-1] != archive.zarr_array(data).shape[0]:
                miss(data, "index", f"the datasets of shot {shot} do not fill the packed array end to end")


__all__ = ["check_index", "compare"]
