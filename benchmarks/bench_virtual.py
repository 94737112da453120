"""Building a virtual store: layoutkit against VirtualiZarr and kerchunk on the same files (issue #50).

    python benchmarks/bench_virtual.py --anchor-python PYTHON [--files 100] [--signals 20] [--repeat 3]

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


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
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
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    folder = args.work / "files"
    write_sample(folder, shots=args.files, signals=args.signals, seed=7, shots_per_file=1)
    files = [str(p) for p in sorted(folder.glob("*.h5"))]
    scripts = {}
    for name, text in (("virtualizarr", VIRTUALIZARR), ("kerchunk", KERCHUNK), ("check", CHECK_ICECHUNK)):
        scripts[name] = args.work / f"run_{name}.py"  # not the name of the package it imports
        scripts[name].write_text(text)
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
