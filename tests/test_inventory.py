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


def _h5py_listing(path: Path) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """Groups, datasets and links as h5py's high-level API lists them, depth-first in
    h5py's own order: what the walk read before it asked HDF5 for headers alone."""
    import h5py

    groups, datasets, links = [], [], []
    seen: set[int] = set()
    with h5py.File(path, "r") as f:
        def visit(group, group_path):  # noqa: ANN001, ANN202
            groups.append(group_path)
            for name in group:
                child = group_path.rstrip("/") + "/" + name
                link = group.get(name, getlink=True)
                if isinstance(link, (h5py.SoftLink, h5py.ExternalLink)):
                    links.append((child, "soft" if isinstance(link, h5py.SoftLink) else "external"))
                    continue
                obj = group[name]
                addr = h5py.h5o.get_info(obj.id).addr
                if addr in seen:
                    links.append((child, "hard"))
                    continue
                seen.add(addr)
                if isinstance(obj, h5py.Group):
                    visit(obj, child)
                elif isinstance(obj, h5py.Dataset):
                    datasets.append(child)

        visit(f, "/")
    return groups, datasets, links


def test_the_walk_lists_what_h5py_lists_in_its_order(shot_file: Path, hard_cases: dict[str, Path]) -> None:
    # netcdf4 tracks creation order (h5py lists by it), links has soft, external and hard links
    for path in (shot_file, hard_cases["netcdf4"], hard_cases["links"], hard_cases["scales"]):
        groups, datasets, links = _h5py_listing(path)
        inv = read_inventory(path)
        assert [g.path for g in inv.groups] == groups, path.name
        assert [a.path for a in inv.arrays] == datasets, path.name
        assert [(link.path, link.kind) for link in inv.links] == links, path.name
