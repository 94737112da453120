"""Writing an npy folder: one task per dataset."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from layoutkit.layout import Work
from npy_layout.spec import ATTRS_FILE, npy_name


def save_one(job: tuple[str, str], path: str) -> int:  # the task function: module level, for dask
    source, out = job
    with h5py.File(source, "r") as f:
        data = f[path][()]
    np.save(Path(out) / npy_name(path), data)
    return data.nbytes


def begin(staged: Path, source: Path, inventory: Any, plan: Any, attrs: dict[str, Any]) -> Work:
    staged.mkdir()
    (staged / ATTRS_FILE).write_text(json.dumps(attrs))
    return Work(save_one, (str(source), str(staged)), plan.arrays)


@dataclass(frozen=True)
class NpySummary:
    source: str
    dest: str
    arrays: int
    logical_bytes: int
    dest_bytes: int
    seconds: float

    def lines(self) -> list[str]:
        """What ``layoutkit convert`` prints of the run."""
        return [f"wrote {self.arrays} datasets of {self.source} as .npy files in {self.dest}: "
                f"{self.logical_bytes:,} bytes of data, {self.dest_bytes:,} stored, {self.seconds:.1f} s"]


def summarize(source: Any, dest: Any, inventory: Any, plan: Any, work: Work, seconds: float) -> NpySummary:
    return NpySummary(str(source), str(dest), len(plan.arrays), plan.nbytes, dest.size(), seconds)
