"""Writing an npy folder: one task per dataset."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
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


def summarize(source: Path, dest: Any, inventory: Any, plan: Any, work: Work, seconds: float) -> Any:
    return SimpleNamespace(arrays=len(plan.arrays), logical_bytes=plan.nbytes, dest_bytes=dest.size())
