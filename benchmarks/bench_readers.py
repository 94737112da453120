"""HDF5 in a bucket: layoutkit's reader beside the one users already have (issue #40).

    python benchmarks/bench_readers.py [--shots 20] [--signals 70] [--latency 10ms] [--repeat 3]

Needs the ``bench`` extra (``pip install -e '.[bench]'``: SeaweedFS, s3fs) and
``h5repack`` (Debian's hdf5-tools).

The sample archive and its paged variants (``h5repack -S PAGE -G 8MiB``, ``reorder --by
shot``, ``reorder --by signal``) are uploaded to SeaweedFS on 127.0.0.1 and read through
the proxy that adds the latency to every request, each cell in a fresh process, by:

- **standard**: h5py over s3fs, an 8 MiB ``blockcache`` and a 64 MiB page buffer on the
  paged files (NSIDC's recommendation for cloud-optimised HDF5); each signal and the
  dimension scales attached to it (its time bases), the arrays layoutkit returns;
- **layoutkit**: ``layoutkit.open(url, storage_options=..., page_buffer=64 MiB)`` (on
  paged files): the signals as DataArrays, their time bases as coordinates.

Each cell times the open and the reads, after the imports (layoutkit's readers, xarray,
zarr and obstore, which ``layoutkit.open`` imports when it is first called, and dask,
which xarray imports when it makes its first array, take 1 s: once per script).

Patterns: one signal of every shot (``ip``), and every signal of one shot. Each cell:
seconds (median of ``--repeat``) and GETs (counted by the proxy). Prints a markdown
table; writes ``benchmarks/out/readers.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from common import HERE, PY, parse_args, sample
from s3local import DelayProxy, SeaweedFS, storage_options

MiB = 1024**2
BUCKET = "readers"
PAGE_BUFFER = 64 * MiB

_CHILD = r"""
import json, sys, time
kind, url, endpoint, pattern, item, paged = sys.argv[1:7]
paged = paged == "1"
if kind == "standard":
    import h5py, s3fs
else:  # and what it imports when it first reads (1 s): a script pays it once, not per read
    import dask.array, h5py, obstore, pandas, xarray, zarr  # xarray imports dask on its first array
    import layoutkit, layoutkit.archive  # layoutkit.open imports its readers when first called
t0 = time.perf_counter()  # imports excluded
if kind == "standard":
    fs = s3fs.S3FileSystem(key="test", secret="test", client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"})
    with fs.open(url.removeprefix("s3://"), "rb", block_size=8 * 1024**2, cache_type="blockcache") as fh:
        with h5py.File(fh, "r", **({"page_buf_size": 64 * 1024**2} if paged else {})) as f:
            def read(ds):  # the signal and its time bases, the arrays layoutkit returns
                ds[()]
                for dim in ds.dims:
                    for scale in dim.values():
                        scale[()]
            if pattern == "signal":
                for shot in f["shots"]:
                    if item in f[f"shots/{shot}/signals"]:
                        read(f[f"shots/{shot}/signals/{item}"])
            else:
                for name, ds in f[f"shots/{item}/signals"].items():
                    read(ds)
else:
    options = {"endpoint_url": endpoint, "key": "test", "secret": "test", "region": "us-east-1"}
    with layoutkit.open(url, storage_options=options, page_buffer=64 * 1024**2 if paged else 0) as a:
        a.signal(item) if pattern == "signal" else a.shot(item)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def run_cell(kind: str, url: str, endpoint: str, pattern: str, item: str, paged: bool, proxy: DelayProxy) -> dict:
    proxy.reset_counts()
    out = subprocess.run([PY, "-c", _CHILD, kind, url, endpoint, pattern, item, "1" if paged else "0"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{kind} {url} {pattern}: {out.stderr[-2000:]}")
    seconds = json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
    return {"seconds": seconds, "gets": proxy.by_method.get("GET", 0)}


def main() -> None:
    import argparse

    from obstore.store import S3Store

    from layoutkit.options import parse_duration

    def extra(parser: argparse.ArgumentParser) -> None:
        parser.set_defaults(shots=20)
        parser.add_argument("--latency", default="10ms")
        parser.add_argument("--repeat", type=int, default=3)
        parser.add_argument("--out-name", default="readers")

    args = parse_args(__doc__, extra)
    src, _ = sample(args.workdir, args.shots, args.signals)
    files = {"source.h5": (src, False)}
    variants = {
        "h5repack-page.h5": ["h5repack", "-S", "PAGE", "-G", str(8 * MiB)],
        "by-shot.h5": [PY, "-m", "layoutkit", "-q", "reorder", "--by", "shot"],
        "by-signal.h5": [PY, "-m", "layoutkit", "-q", "reorder", "--by", "signal"],
    }
    for name, cmd in variants.items():
        out = args.workdir / f"{src.stem}-{name}"
        if not out.exists():
            print(f"writing {out.name} ...", flush=True)
            subprocess.run([*cmd, str(src), str(out)], check=True)
        files[name] = (out, True)
    import layoutkit

    with layoutkit.open(src) as a:
        shot, signal = a.shots[len(a.shots) // 2], "ip"
    report: dict = {"command": "python benchmarks/bench_readers.py " + " ".join(sys.argv[1:]),
                    "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores",
                    "latency": parse_duration(args.latency), "shot": shot, "signal": signal, "cells": []}
    with SeaweedFS() as server, DelayProxy(server.port) as proxy:
        server.create_bucket(BUCKET)
        store = S3Store(BUCKET, endpoint=server.endpoint, access_key_id="test", secret_access_key="test",
                        region="us-east-1", client_options={"allow_http": True})
        import obstore

        for name, (path, _) in files.items():
            print(f"uploading {name} ({path.stat().st_size / 1e6:.0f} MB) ...", flush=True)
            with open(path, "rb") as fh:
                obstore.put(store, name, fh, chunk_size=16 * MiB, max_concurrency=8)
        endpoint = storage_options(proxy.endpoint)["endpoint_url"]
        proxy.latency = report["latency"]
        for name, (_, paged) in files.items():
            for pattern, item in (("signal", signal), ("shot", shot)):
                for kind in ("standard", "layoutkit"):
                    runs = [run_cell(kind, f"s3://{BUCKET}/{name}", endpoint, pattern, item, paged, proxy)
                            for _ in range(args.repeat)]
                    cell = {"file": name, "pattern": pattern, "reader": kind, "gets": runs[-1]["gets"],
                            "seconds": statistics.median(r["seconds"] for r in runs)}
                    report["cells"].append(cell)
                    print(f"{name:>18} {pattern:>6} {kind:>9} {cell['seconds']:7.2f} s {cell['gets']:>5} GETs", flush=True)
    (HERE / "out" / f"{args.out_name}.json").write_text(json.dumps(report, indent=1) + "\n")
    summarize(report)


def summarize(report: dict) -> None:
    print(f"\n{report['command']}  ({report['date']}, {report['machine']}, "
          f"{report['latency'] * 1e3:.0f} ms per request; each cell a fresh process)\n")
    print("| file | one signal of all shots: standard / layoutkit | all signals of one shot: standard / layoutkit |")
    print("|---|---|---|")
    cells = {(c["file"], c["pattern"], c["reader"]): c for c in report["cells"]}
    for name in dict.fromkeys(c["file"] for c in report["cells"]):
        row = []
        for pattern in ("signal", "shot"):
            s, k = cells[(name, pattern, "standard")], cells[(name, pattern, "layoutkit")]
            row.append(f"{s['seconds']:.2f} s, {s['gets']} GETs / {k['seconds']:.2f} s, {k['gets']} GETs "
                       f"({s['seconds'] / k['seconds']:.2f}x)")
        print(f"| {name} | {row[0]} | {row[1]} |")


if __name__ == "__main__":
    main()
