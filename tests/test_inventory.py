"""The inventory walk: serial and process-parallel walks describe a file identically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import layoutkit.inventory as inventory_module
from layoutkit.inventory import read_inventory


def describe(inv) -> list[tuple]:
    return [
        (a.path, a.shape, str(a.dtype), a.kind, a.layout, a.chunks, a.dims, a.dim_scales, a.is_scale,
         repr(a.attrs), np.asarray(a.fill_value).tobytes() if a.fill_value is not None else None, a.offset)
        for a in inv.arrays
    ]


def test_parallel_walk_equals_serial(shot_file: Path, hard_cases: dict[str, Path], monkeypatch) -> None:
    monkeypatch.setattr(inventory_module, "PARALLEL_MIN_DATASETS", 1)
    for path in (shot_file, hard_cases["netcdf4"], hard_cases["scales"], hard_cases["dtypes"]):
        serial = read_inventory(path, workers=1)
        parallel = read_inventory(path, workers=2)
        assert describe(parallel) == describe(serial), path.name
        assert parallel.groups == serial.groups and parallel.links == serial.links
        assert parallel.is_netcdf4 == serial.is_netcdf4


def test_sample_dimension_names_follow_scales(shot_file: Path) -> None:
    inv = read_inventory(shot_file)
    signals = [a for a in inv.arrays if "/signals/" in a.path]
    assert signals
    for a in signals:
        assert a.dim_scales[0], a.path
        assert a.dims[0] == a.dim_scales[0][0].rsplit("/", 1)[-1]
