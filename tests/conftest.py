"""Builders for test data: every file is made in code, in tmp_path."""

from __future__ import annotations

from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pytest

from layoutkit.testing import assert_same_reads, build_edge_archive  # noqa: F401 - the tests' builders

ROOT = Path(__file__).resolve().parents[1]
REALDATA = ROOT.parent / "shared" / "realdata"


class Rounds:
    """A latency model's ``sleep`` that counts dependent rounds of requests: a request
    that starts when no other is in flight opens a new round (requests sent together
    overlap, each held for the model's latency)."""

    def __init__(self) -> None:
        self.rounds = 0
        self.in_flight = 0
        self.most_in_flight = 0

    async def sleep(self, seconds: float) -> None:
        import asyncio

        if self.in_flight == 0:
            self.rounds += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.in_flight -= 1


def realdata_files() -> list[Path]:
    """Every HDF5/netCDF-4 file under ../shared/realdata (empty when absent)."""
    if not REALDATA.is_dir():
        return []
    return sorted(p for p in REALDATA.rglob("*") if p.is_file() and p.suffix in (".h5", ".hdf5", ".nc", ".he5"))


def realdata_params() -> list:
    files = realdata_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/realdata is absent"), id="no-realdata")]
    return [pytest.param(p, id=p.name) for p in files]


# --------------------------------------------------------------------------------
# hard cases, one builder each


def build_dtypes(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f["float16"] = np.array([0, 1.5, np.nan, np.inf, -np.inf, 65504], dtype="f2")
        f["big_endian_i4"] = np.arange(-5, 5, dtype=">i4")
        f["big_endian_f8"] = np.linspace(0, 1, 7).astype(">f8")
        f["uint64"] = np.array([0, 2**64 - 1, 12345], dtype="u8")
        f["int8"] = np.array([-128, 0, 127], dtype="i1")
        f["complex64"] = np.array([1 + 2j, -3.5j], dtype="c8")
        f["bool"] = np.array([True, False, True])
        f["fixed_bytes"] = np.array([b"abc", b"", b"longer!"], dtype="S7")
        f.create_dataset("vlen_utf8", data=["héllo", "", "wörld ✓"], dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("vlen_ascii", data=[b"abc", b"de"], dtype=h5py.string_dtype("ascii"))
        comp = np.dtype([("a", "<i4"), ("b", "<f8"), ("c", "S3")])
        f["compound"] = np.array([(1, 2.5, b"x"), (-3, np.nan, b"yz")], dtype=comp)
        f.create_dataset("enum", data=np.array([0, 1, 2, 1], dtype="u1"),
                         dtype=h5py.enum_dtype({"OFF": 0, "ON": 1, "FAULT": 2}, basetype="u1"))
        f["opaque"] = np.array([b"\x00\x01\x02\x03", b"\xff\xfe\xfd\xfc"], dtype="V4")
        f.create_dataset("empty_2d", shape=(0, 3), dtype="f8")
        f["scalar"] = 3.25
        f["scalar_str"] = "a scalar string"
        f.create_dataset("null", data=h5py.Empty("f4"))
        f.create_dataset("fill_custom", shape=(100,), chunks=(10,), dtype="i4", fillvalue=-7)
        f["fill_custom"][20:30] = 5  # most chunks never written: read back as the fill value
        f.create_dataset("fill_nan", shape=(4, 5), dtype="f4", fillvalue=np.nan, chunks=(2, 5))
        f["fill_nan"][0] = 1
    return path


def build_attrs(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        g = f.create_group("g")
        d = g.create_dataset("x", data=np.arange(4))
        for obj in (f, g, d):
            obj.attrs["int"] = np.int16(3)
            obj.attrs["float_nan"] = np.float32(np.nan)
            obj.attrs["array"] = np.arange(3, dtype="f8")
            obj.attrs["one_element"] = np.array([7])
            obj.attrs["bytes"] = np.bytes_(b"fixed text")
            obj.attrs["str"] = "vlen text ✓"
            obj.attrs["str_list"] = ["a", "bc"]
            obj.attrs["empty"] = h5py.Empty("f8")
            obj.attrs["bool"] = np.bool_(True)
            obj.attrs.create("compound", np.array((1, 2.0), dtype=[("i", "i4"), ("f", "f8")]))
        d.attrs["ref"] = f["g"].ref
    return path


def build_filters(path: Path) -> Path:
    rng = np.random.default_rng(1)
    data = np.cumsum(rng.normal(size=(400, 6)), axis=0).astype("f4")
    ints = (np.sin(np.arange(3000) / 40) * 1000).astype("i2")
    with h5py.File(path, "w") as f:
        f.create_dataset("gzip", data=data, chunks=(64, 6), compression="gzip", compression_opts=4)
        f.create_dataset("shuffle_gzip", data=data, chunks=(50, 3), compression="gzip", shuffle=True)
        f.create_dataset("lzf", data=data, chunks=(64, 6), compression="lzf")
        f.create_dataset("fletcher32", data=ints, chunks=(256,), fletcher32=True)
        f.create_dataset("scaleoffset", data=ints, chunks=(256,), scaleoffset=0)
        f.create_dataset("zstd", data=data, chunks=(100, 6), **hdf5plugin.Zstd(clevel=3))
        f.create_dataset("blosc", data=data, chunks=(100, 6), **hdf5plugin.Blosc(cname="lz4", clevel=5))
        f.create_dataset("lz4", data=ints, chunks=(700,), **hdf5plugin.LZ4())
        f.create_dataset("bitshuffle", data=ints, chunks=(700,), **hdf5plugin.Bitshuffle())
        f.create_dataset("edge_chunks", data=np.arange(1001 * 7, dtype="f8").reshape(1001, 7), chunks=(100, 3),
                         compression="gzip")
        f.create_dataset("contiguous", data=data)
        f.create_dataset("compact", data=np.arange(10, dtype="i4"),
                         dcpl=_compact_dcpl())
    return path


def _compact_dcpl() -> h5py.h5p.PropDCID:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    return dcpl


def build_links(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        d = f.create_dataset("data/x", data=np.arange(10.0))
        f["data/hard_alias"] = d
        f["soft"] = h5py.SoftLink("/data/x")
        f["dangling"] = h5py.SoftLink("/nowhere")
        f["external"] = h5py.ExternalLink("missing_file.h5", "/x")
    return path


def build_userblock(path: Path) -> Path:
    with h5py.File(path, "w", userblock_size=1024) as f:
        f.create_dataset("x", data=np.arange(1000.0), chunks=(100,), compression="gzip")
    with open(path, "r+b") as fh:
        fh.write(b"shot=1160930001\n")
    return path


def build_scales(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        t = f.create_dataset("shot/time", data=np.linspace(0, 1, 50))
        t.make_scale("time")
        ch = f.create_dataset("shot/channel", data=np.arange(4, dtype="i4"))
        ch.make_scale("channel")
        for name in ("a", "b"):
            s = f.create_dataset(f"shot/signals/{name}", data=np.ones((50, 4), dtype="f4"))
            s.dims[0].attach_scale(t)
            s.dims[1].attach_scale(ch)
        # an unscaled array in a child group with a length the parent also uses
        f.create_dataset("shot/signals/raw", data=np.zeros(7))
        f.create_dataset("top", data=np.zeros(9))
    return path


def build_netcdf4(path: Path) -> Path:
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.title = "test file"
        nc.createDimension("time", None)
        nc.createDimension("x", 5)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t[:] = np.arange(6)
        v = nc.createVariable("temp", "f4", ("time", "x"), fill_value=-999.0, zlib=True)
        v.long_name = "temperature"
        v[:] = np.arange(30, dtype="f4").reshape(6, 5)
        v[2, 3] = -999.0
        i = nc.createVariable("count", "i4", ("x",))
        i[:] = np.arange(5)
        s = nc.createVariable("label", str, ("x",))
        for k in range(5):
            s[k] = f"item {k}"
        g = nc.createGroup("sub")
        g.createDimension("y", 3)
        w = g.createVariable("w", "f8", ("time", "y"))  # uses the parent's unlimited dim
        w[:] = np.ones((6, 3))
        w.comment = "shares time with the root group"
    return path


@pytest.fixture(scope="session")
def edge_archive(tmp_path_factory) -> Path:
    """A signal missing from some shots, a signal with no samples in a shot, 2-D signals
    whose channel count changes, a dtype that changes across shots, shared, private,
    duplicated and global dimension scales, per-shot attributes, big-endian, complex,
    bool and fill-valued signals, and datasets no packing carries (text, scalars)."""
    return build_edge_archive(tmp_path_factory.mktemp("edge") / "edge.h5")


HARD_CASES = {
    "dtypes": build_dtypes,
    "attrs": build_attrs,
    "filters": build_filters,
    "links": build_links,
    "userblock": build_userblock,
    "scales": build_scales,
    "netcdf4": build_netcdf4,
}


@pytest.fixture(scope="session")
def hard_cases(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hard")
    return {name: build(root / f"{name}.h5") for name, build in HARD_CASES.items()}


@pytest.fixture(scope="session")
def shot_file(tmp_path_factory) -> Path:
    from layoutkit.sample import write_sample

    path = tmp_path_factory.mktemp("sample") / "shots.h5"
    write_sample(path, shots=3, signals=12, seed=1)
    return path


def without_provenance(variant: Path) -> Path:
    """A copy of an HDF5 variant without the one root attribute layoutkit adds (its
    recipe), for tools that compare whole files with the source (h5diff, ncdump -h)."""
    import shutil

    from layoutkit.recipes import PROVENANCE_ATTR

    copy = variant.with_name(f"{variant.stem}-without-provenance{variant.suffix}")
    shutil.copyfile(variant, copy)
    with h5py.File(copy, "a") as f:
        del f.attrs[PROVENANCE_ATTR]
    return copy


def small_archive(path: Path, shots: int) -> Path:
    """Shots 100, 101... of three signals (``s0``..``s2``: 0..49 times j+1, plus the shot's
    number) on a time base ``t`` of their own (50 values from the shot's number)."""
    import h5py
    import numpy as np

    with h5py.File(path, "w") as f:
        f.attrs["title"] = "small"
        for k in range(shots):
            g = f.create_group(f"shots/{100 + k}")
            g.attrs["operator"] = f"op{k}"
            t = g.create_dataset("timebases/t", data=np.arange(50.0) + k)
            t.make_scale("t")
            for j in range(3):
                d = g.create_dataset(f"signals/s{j}", data=np.arange(50.0) * (j + 1) + k)
                d.dims[0].attach_scale(t)
                d.attrs["units"] = "V"
    return path


def assert_xarray_identical(src: Path, dst: Path) -> None:
    """Every group's dataset, as xarray sees it, is identical in source and store (but for
    the one global attribute layoutkit adds to the store: the recipe it was written with)."""
    import warnings

    import xarray as xr

    from layoutkit.recipes import PROVENANCE_ATTR

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        source = xr.open_datatree(src, engine="netcdf4")
        store = xr.open_datatree(dst, engine="zarr")
        assert sorted(n.path for n in store.subtree) == sorted(n.path for n in source.subtree)
        for node in source.subtree:
            got = store[node.path].to_dataset(inherit=False).load()
            if node.path == "/":
                assert PROVENANCE_ATTR in got.attrs
                del got.attrs[PROVENANCE_ATTR]
            xr.testing.assert_identical(node.to_dataset(inherit=False).load(), got)


def era5_files(folder: Path, months: int) -> list[Path]:
    """Small monthly ERA5-like files (6 x 9 maps, hourly, 28 days), as
    ``examples/era5_point_and_map.py`` writes them (its own ``make``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("era5_example", Path(__file__).resolve().parents[1] / "examples"
                                                  / "era5_point_and_map.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make(folder, months, lat=6, lon=9)
