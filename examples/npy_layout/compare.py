"""Proving an npy folder equal to its source: each dataset the format carries, file by
file (dtype, shape, values); the others it leaves out by design."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from layoutkit.equality import Mismatch, equal_values
from layoutkit.hdf5.inventory import read_inventory
from layoutkit.hdf5.raw import RawReader
from npy_layout.plan import carried_arrays
from npy_layout.spec import npy_name


def compare(source: Any, variant: Any, *, inventory: Any = None, skipped: frozenset[str] = frozenset(),
            workers: int = 2, name: str | None = None) -> list[Mismatch]:
    inventory = inventory or read_inventory(source)
    name = name or str(variant)
    found = []
    arrays = carried_arrays(inventory)
    with RawReader(source, {a.path: a for a in arrays}) as reader:
        for info in arrays:
            file = Path(variant) / npy_name(info.path)
            if not file.is_file():
                found.append(Mismatch(name, info.path, "missing", f"no {file.name}"))
                continue
            got = np.load(file)
            if got.shape != info.shape or got.dtype != info.dtype:
                found.append(Mismatch(name, info.path, "dtype", f"{got.dtype}{got.shape}, expected {info.dtype}{info.shape}"))
                continue
            want = np.asarray(reader.read(info.path, tuple((0, n) for n in info.shape)))
            eq = equal_values(want, got)
            if not eq.all():
                found.append(Mismatch(name, info.path, "values", f"first difference at {tuple(np.argwhere(~eq)[0])}"))
    return found
