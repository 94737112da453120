"""The inventory walk: serial and process-parallel walks describe a file identically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import layoutkit.hdf5.inventory as inventory_module
from layoutkit.hdf5.inventory import read_inventory


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


def _every_attribute_kind(path: Path) -> Path:
    """Attributes of the types h5py reads each in its own way, twice over so that the
    second of each type is read with what the first worked out."""
    import h5py

    colour = h5py.enum_dtype({"red": 0, "green": 1}, basetype="u1")
    other_colour = h5py.enum_dtype({"cyan": 0, "magenta": 7}, basetype="u1")
    with h5py.File(path, "w") as f:
        target = f.create_dataset("target", data=np.arange(6).reshape(2, 3))
        for name in ("a", "b"):
            g = f.create_group(name)
            g.attrs["i8"] = np.int8(-3)
            g.attrs["u64"] = np.uint64(2**63 + 1)
            g.attrs["f2"] = np.float16(0.5)
            g.attrs["c16"] = np.complex128(1 - 2j)
            g.attrs["nan"] = np.float64(np.nan)
            g.attrs["matrix"] = np.arange(6, dtype="<i4").reshape(2, 3)
            g.attrs["big_endian"] = np.arange(3, dtype=">f8")
            g.attrs["bool"] = np.bool_(False)
            g.attrs["fixed"] = np.bytes_(b"fixed")
            g.attrs["fixed_array"] = np.array([b"ab", b"c"], dtype="S2")
            g.attrs["latin1"] = np.bytes_(b"\xb5m")
            g.attrs["vlen_str"] = "µs ✓"
            g.attrs["vlen_str_array"] = np.array(["x", "yz", ""], dtype=h5py.string_dtype())
            g.attrs["vlen_bytes"] = np.array(b"ascii", dtype=h5py.string_dtype("ascii"))
            g.attrs["not_utf8_vlen"] = np.array([b"\xff\xfe"], dtype=h5py.string_dtype("ascii"))
            g.attrs["empty_f8"] = h5py.Empty("f8")
            g.attrs["empty_str"] = h5py.Empty(h5py.string_dtype())
            g.attrs["zero_length"] = np.zeros((0,), dtype="i4")
            g.attrs.create("enum", np.array([0, 1, 1], dtype="u1"), dtype=colour)
            g.attrs.create("other_enum", np.array([7], dtype="u1"), dtype=other_colour)
            g.attrs.create("compound", np.array([(1, 2.5, b"q")], dtype=[("i", "i4"), ("f", "f8"), ("s", "S1")]))
            g.attrs.create("array_type", np.arange(6, dtype="f4").reshape(2, 3), dtype=np.dtype(("f4", (3,))))
            g.attrs.create("vlen_ints", np.array([np.arange(2), np.arange(5)], dtype=object),
                           dtype=h5py.vlen_dtype("i4"))
            g.attrs["ref"] = target.ref
            g.attrs["region_ref"] = target.regionref[0:1, 1:3]
            g.attrs["refs"] = np.array([target.ref, f["a"].ref], dtype=h5py.ref_dtype)
        # attributes listed in creation order, not by name, where the object tracks it
        tracked = f.create_group("tracked", track_order=True)
        tracked_ds = f.create_dataset("tracked_ds", data=np.arange(3), track_order=True)
        for obj in (tracked, tracked_ds):
            for name in ("zeta", "alpha", "mu", "beta"):
                obj.attrs[name] = name
    return path


def _plain(value: object, f: object) -> object:
    """A value in a form that compares by content: references by what they point to,
    arrays by dtype (with h5py's metadata), shape and elements, NaN equal to itself."""
    import h5py

    if isinstance(value, h5py.RegionReference):
        return ("region", f[value].name, f[value][value].tobytes())
    if isinstance(value, h5py.Reference):
        return ("ref", f[value].name) if value else ("null ref",)
    if isinstance(value, np.ndarray):
        elements = [_plain(x, f) for x in value.ravel().tolist()] if value.dtype.hasobject else value.tobytes()
        return ("array", value.dtype.descr, h5py_dtype_meta(value.dtype), value.shape, elements)
    if isinstance(value, np.void):
        return ("void", value.dtype.descr, tuple(_plain(x, f) for x in value.tolist())) \
            if value.dtype.names else ("void", value.tobytes())
    if isinstance(value, tuple):
        return tuple(_plain(x, f) for x in value)
    if isinstance(value, np.generic):
        return (type(value).__name__, value.dtype.str, np.asarray(value).tobytes())
    return (type(value).__name__, repr(value))


def h5py_dtype_meta(dtype: np.dtype) -> object:
    import h5py

    return (h5py.check_enum_dtype(dtype), h5py.check_string_dtype(dtype), h5py.check_vlen_dtype(dtype),
            h5py.check_ref_dtype(dtype))


def test_attribute_values_are_what_h5py_reads(tmp_path: Path, hard_cases: dict[str, Path], shot_file: Path) -> None:
    """attribute_names lists what h5py's AttributeManager lists, in its order (creation
    order where tracked), and attribute_value (types worked out once per distinct type)
    gives what it gives, in type, dtype and value, for every attribute of every object
    of the hard cases and of a file of every kind h5py reads its own way."""
    import h5py

    from layoutkit.hdf5.attrs import attribute_names, attribute_value

    files = [_every_attribute_kind(tmp_path / "kinds.h5"), shot_file, *hard_cases.values()]
    compared = 0
    for path in files:
        with h5py.File(path, "r") as f:
            names: list[str] = []
            f.visit(names.append)
            objects = [f, *(obj for obj in map(f.__getitem__, names) if not isinstance(obj, h5py.Datatype))]
            for obj in objects:
                assert attribute_names(obj.id) == list(obj.attrs), (path.name, obj.name)
                plist = (obj["/"] if isinstance(obj, h5py.File) else obj).id.get_create_plist()
                assert attribute_names(obj.id, plist) == list(obj.attrs), (path.name, obj.name)
                for name in obj.attrs:
                    try:
                        expected = obj.attrs[name]
                    except (OSError, TypeError, ValueError) as exc:
                        try:
                            attribute_value(obj.id, name)
                        except type(exc):
                            continue
                        raise AssertionError(f"{path.name} {obj.name}@{name}: h5py raised {exc!r}") from None
                    got = attribute_value(obj.id, name)
                    assert type(got) is type(expected), (path.name, obj.name, name)
                    assert _plain(got, f) == _plain(expected, f), (path.name, obj.name, name, got, expected)
                    compared += 1
    assert compared > 100


def test_each_array_carries_its_address_in_the_source(shot_file: Path, hard_cases: dict[str, Path],
                                                       monkeypatch) -> None:
    """The walk keeps each array's object address (what the reorder writer maps scale
    reference lists with), the same in a parallel walk, and h5py's own."""
    import h5py

    monkeypatch.setattr(inventory_module, "PARALLEL_MIN_DATASETS", 1)
    for path in (shot_file, hard_cases["scales"], hard_cases["links"]):
        for workers in (1, 2):
            inv = read_inventory(path, workers=workers)
            with h5py.File(path, "r") as f:
                assert [a.address for a in inv.arrays] == [h5py.h5o.get_info(f[a.path].id).addr for a in inv.arrays]
