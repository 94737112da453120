"""Planning an npy folder (pure): which datasets become files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from npy_layout.spec import carried


@dataclass(frozen=True)
class NpyPlan:
    arrays: tuple[str, ...]
    nbytes: int

    def lines(self) -> list[str]:
        """What ``convert --dry-run`` prints."""
        return [f"{path}" for path in self.arrays] + [f"{len(self.arrays)} datasets as .npy files, {self.nbytes:,} bytes"]


def carried_arrays(inventory: Any) -> list[Any]:
    return [a for a in inventory.arrays if carried(a.kind, a.dtype.kind, a.shape, a.nbytes, a.null_space)]


def plan(inventory: Any, options: Any, scale_digests: dict[str, Any], dest: str = "") -> NpyPlan:
    keep = carried_arrays(inventory)
    return NpyPlan(tuple(a.path for a in keep), sum(a.nbytes for a in keep))
