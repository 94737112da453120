"""Building a virtual store: layoutkit against VirtualiZarr and kerchunk on the same files (issue #50).

    python benchmarks/bench_virtual.py --anchor-python PYTHON [--files 100] [--signals 20] [--repeat 3]
    python benchmarks/bench_virtual.py --anchor-python PYTHON --kind shots,nexus,netcdf [--repeat 3]

With ``--kind``, each builder indexes one file of each kind (:func:`write_kind`: a shot
archive, a NeXus-like file of 14,000 small chunks, an ERA5-like netCDF month), and a scan
of layoutkit's store is counted in GETs beside the chunks zarr reads a GET each through
the anchors' references (issue 64). Otherwise:

``--files`` shot files of one shot each (``layoutkit sample --shots-per-file 1``) are
indexed where they lie, each run a process of its own (start-up included for all), page
cache warm (the files were just written), median of ``--repeat``:

- **layoutkit**: ``layoutkit convert FILES... REPO --layout virtual``: an Icechunk
  repository of references (the whole hierarchy, its dimension names and attributes;
  what cannot be referenced written);
- **VirtualiZarr**: ``open_virtual_datatree`` with its ``HDFParser`` on each file, each
  tree written to one Icechunk repository with ``.vz.to_icechunk`` (mode ``a``), one commit;
- **kerchunk**: ``SingleHdf5ToZarr(...).translate()`` on each file, the references of
  all files joined into one JSON document (no Icechunk: kerchunk's own format).

The anchors run under ``--anchor-python``, an interpreter with ``virtualizarr[hdf,icechunk]``
and ``kerchunk`` installed (they pin other versions of zarr's neighbours than layoutkit, so
they live in a venv of their own). Each repository is then checked: one signal of the
first and of the last file read through it equals h5py's read. Prints a markdown table
and writes ``benchmarks/out/virtual.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import HERE

from layoutkit.sample import write_sample

VIRTUALIZARR = r'''
import sys
from pathlib import Path

import icechunk
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_datatree
from virtualizarr.parsers import HDFParser

files, repo_path = [Path(f).resolve() for f in sys.argv[2:]], sys.argv[1]
top = f"file:///{files[0].parts[1]}/"
config = icechunk.RepositoryConfig.default()
config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(top, icechunk.local_filesystem_store(top[7:])))
repo = icechunk.Repository.create(icechunk.local_filesystem_storage(repo_path), config=config)
session = repo.writable_session("main")
registry, parser = ObjectStoreRegistry({"file:///": LocalStore("/")}), HDFParser()
for i, f in enumerate(files):
    tree = open_virtual_datatree(f.as_uri(), registry=registry, parser=parser)
    tree.vz.to_icechunk(session.store, mode="w" if i == 0 else "a")
session.commit("virtualizarr")
'''

KERCHUNK = r'''
import json
import sys

from kerchunk.hdf import SingleHdf5ToZarr

out, files = sys.argv[1], sys.argv[2:]
refs = {}
for f in files:
    refs.update(SingleHdf5ToZarr(f, inline_threshold=0).translate()["refs"])
with open(out, "w") as fh:
    json.dump({"version": 1, "refs": refs}, fh)
'''

CHECK_ICECHUNK = r'''
import sys
from pathlib import Path

import h5py
import icechunk
import numpy as np
import zarr

repo_path, files = sys.argv[1], [Path(f).resolve() for f in sys.argv[2:]]
top = f"file:///{files[0].parts[1]}/"
repo = icechunk.Repository.open(icechunk.local_filesystem_storage(repo_path),
                                authorize_virtual_chunk_access={top: icechunk.credentials.LocalFileSystemAccess})
root = zarr.open_group(repo.readonly_session("main").store, mode="r", zarr_format=3)
for f in (files[0], files[-1]):
    with h5py.File(f) as h5:
        shot = next(iter(h5["shots"]))
        name = f"shots/{shot}/signals/ip"
        np.testing.assert_array_equal(root[name][...], h5[name][...])
print("equal")
'''


KINDS = ("shots", "nexus", "netcdf")


def write_kind(kind: str, path: Path) -> Path:
    """One file of a kind (``--kind``): ``shots``, a shot archive of 25 shots x 70 signals
    (layoutkit's sample, ~200 MB); ``nexus``, a NeXus-like file of 40 collections, each
    three axes in chunks of 64 values and a stack of 16 images of 64 x 64 in chunks of
    16 x 16, deflated and shuffled, each array the ``data`` of a group of its own (14,080
    chunks of a few hundred bytes); ``netcdf``, an
    ERA5-like month of 6-hourly 2 m temperature on a 0.25-degree grid of Europe (124 x
    201 x 281, float32, chunks of 31 x 67 x 71, deflated) with CF coordinates."""
    import h5py
    import numpy as np

    rng = np.random.default_rng(3)
    if kind == "shots":
        return Path(write_sample(path, shots=25, signals=70, seed=3).path)
    if kind == "nexus":
        with h5py.File(path, "w") as f:
            entry = f.create_group("entry")
            entry.attrs["NX_class"] = "NXentry"
            for i in range(40):  # an array a group (NXdata's "data"): xarray's model, so VirtualiZarr takes it
                g = entry.create_group(f"collection_{i}")
                g.attrs["NX_class"] = "NXcollection"
                for j in range(3):
                    g.create_dataset(f"axis{j}/data", data=rng.standard_normal(2000 + 37 * j), chunks=(64,),
                                     compression="gzip")
                g.create_dataset("frames/data", data=rng.integers(0, 1000, (16, 64, 64), dtype="u2"),
                                 chunks=(1, 16, 16), compression="gzip", shuffle=True)
        return path
    import pandas as pd
    import xarray as xr

    time_ = pd.date_range("2010-01-01", periods=124, freq="6h")
    lat, lon = np.linspace(72, 22, 201), np.linspace(-25, 45, 281)
    t2m = (270 + 10 * rng.standard_normal((124, 201, 281))).astype("f4")
    ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), t2m, {"units": "K", "long_name": "2 metre temperature"})},
                    coords={"time": time_, "latitude": ("latitude", lat, {"units": "degrees_north"}),
                            "longitude": ("longitude", lon, {"units": "degrees_east"})},
                    attrs={"Conventions": "CF-1.6"})
    ds.to_netcdf(path, engine="h5netcdf", encoding={"t2m": {"zlib": True, "complevel": 4, "chunksizes": (31, 67, 71)}})
    return path


def scan_gets(store: str, source: Path) -> tuple[int, int]:
    """(GETs, chunks) of a scan of a layoutkit virtual store (``layoutkit.open``'s own
    count, the units of its ``blocks`` plan read as verify's scan reads them), and the number of chunks
    referenced: what zarr-python reads a chunk a GET, as it does through Icechunk or a
    kerchunk reference file."""
    import layoutkit

    with layoutkit.open(store) as archive:
        blocks = archive.blocks()
        archive.counter.reset()
        for _ in archive.read_blocks(blocks):  # as verify's scan reads them
            pass
        gets = archive.counter.requests
    import h5py

    chunks = 0
    with h5py.File(source) as f:
        def count(_name: str, obj: object) -> None:
            nonlocal chunks
            if isinstance(obj, h5py.Dataset) and obj.chunks:
                chunks += obj.id.get_num_chunks()
            elif isinstance(obj, h5py.Dataset) and obj.shape:
                chunks += 1
        f.visititems(count)
    return gets, chunks


def per_file(args: argparse.Namespace, scripts: dict[str, Path]) -> None:
    """Each builder on one file of each ``--kind``, a process each, median of ``--repeat``."""
    rows = []
    for kind in args.kind.split(","):
        source = write_kind(kind, args.work / f"{kind}.{'nc' if kind == 'netcdf' else 'h5'}")
        runs = {
            "layoutkit": lambda out, s=source: [sys.executable, "-m", "layoutkit", "--quiet", "convert", str(s), str(out),
                                                "--layout", "virtual"],
            "VirtualiZarr": lambda out, s=source: [args.anchor_python, str(scripts["virtualizarr"]), str(out), str(s)],
            "kerchunk": lambda out, s=source: [args.anchor_python, str(scripts["kerchunk"]), str(out), str(s)],
        }
        row: dict = {"kind": kind, "bytes": source.stat().st_size}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for i in range(args.repeat):  # the builders in turn, so a slower spell of the machine falls on each
            for name, command in runs.items():
                out = args.work / f"{kind}-{name}-{i}" if name != "kerchunk" else args.work / f"{kind}-{name}-{i}.json"
                times[name].append(timed(command(out), args.timeout))
        for name in runs:
            row[name] = statistics.median(times[name])
        row["gets"], row["chunks"] = scan_gets(str(args.work / f"{kind}-layoutkit-0"), source)
        rows.append(row)
        print(f"  {kind}: " + ", ".join(f"{n} {row[n]:.2f} s" for n in runs) + f"; scan {row['gets']} GETs, "
              f"{row['chunks']} chunks", flush=True)
    print(f"\nOne file of each kind, each builder a process of its own (start-up included), the builders "
          f"in turn, median of {args.repeat}\n")
    print("| file | MB | layoutkit | VirtualiZarr | kerchunk | layoutkit vs the faster anchor | scan GETs, layoutkit | "
          "scan GETs, zarr over the anchors' references (a chunk a GET) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        faster = min(r["VirtualiZarr"], r["kerchunk"])
        cells = [f"{r[n]:.2f} s" if math.isfinite(r[n]) else f"> {args.timeout:.0f} s"
                 for n in ("layoutkit", "VirtualiZarr", "kerchunk")]
        print(f"| {r['kind']} | {r['bytes'] / 1e6:.1f} | {' | '.join(cells)} | {faster / r['layoutkit']:.2f}x | "
              f"{r['gets']:,} | {r['chunks']:,} |")
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "virtual-kinds.json").write_text(json.dumps({"repeat": args.repeat, "rows": rows}, indent=2))


def timed(cmd: list[str], timeout: float | None = None) -> float:
    """Seconds ``cmd`` takes; ``inf`` when it is still running after ``timeout``."""
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return math.inf
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:3]}... failed:\n{done.stderr[-2000:]}")
    return seconds


def size_of(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--anchor-python", required=True, help="a Python with virtualizarr[hdf,icechunk] and kerchunk")
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--signals", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench-virtual"))
    ap.add_argument("--timeout", type=float, default=600, help="seconds a builder may take on one file (--kind)")
    ap.add_argument("--kind", default=None, help=f"comma-separated, from {', '.join(KINDS)}: one file of each "
                    "kind built by each builder (per file), instead of --files shot files")
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    scripts = {}
    for name, text in (("virtualizarr", VIRTUALIZARR), ("kerchunk", KERCHUNK), ("check", CHECK_ICECHUNK)):
        scripts[name] = args.work / f"run_{name}.py"  # not the name of the package it imports
        scripts[name].write_text(text)
    if args.kind:
        per_file(args, scripts)
        return
    folder = args.work / "files"
    write_sample(folder, shots=args.files, signals=args.signals, seed=7, shots_per_file=1)
    files = [str(p) for p in sorted(folder.glob("*.h5"))]
    layoutkit_cli = [sys.executable, "-m", "layoutkit", "--quiet", "convert"]
    runs = {
        "layoutkit": lambda out: [*layoutkit_cli, *files, str(out), "--layout", "virtual"],
        "VirtualiZarr": lambda out: [args.anchor_python, str(scripts["virtualizarr"]), str(out), *files],
        "kerchunk": lambda out: [args.anchor_python, str(scripts["kerchunk"]), str(out), *files],
    }
    results: dict[str, dict] = {}
    for name, command in runs.items():
        times = []
        for i in range(args.repeat):
            out = args.work / f"{name}-{i}" if name != "kerchunk" else args.work / f"{name}-{i}.json"
            times.append(timed(command(out)))
        results[name] = {"seconds": statistics.median(times), "runs": times, "bytes": size_of(out)}
        if name != "kerchunk":  # both Icechunk repositories read back by zarr + icechunk alone
            subprocess.run([args.anchor_python, str(scripts["check"]), str(out), *files], check=True,
                           capture_output=True)
    sources = sum(Path(f).stat().st_size for f in files)
    anchor = results["VirtualiZarr"]["seconds"]
    print(f"\n{args.files} files of one shot ({args.signals} signals), {sources / 1e6:.1f} MB; median of {args.repeat}, "
          f"each a process of its own\n")
    print("| builder | seconds | vs VirtualiZarr | store bytes | of the sources |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['seconds']:.2f} | {anchor / r['seconds']:.2f}x | {r['bytes']:,} | "
              f"{r['bytes'] / sources:.2%} |")
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "virtual.json").write_text(json.dumps({"files": args.files, "signals": args.signals,
                                                  "source_bytes": sources, "results": results}, indent=2))


if __name__ == "__main__":
    main()
