"""Every layout in a bucket: layoutkit's reader beside the ones users already have (#40).

    python benchmarks/bench_readers.py [--shots 20] [--signals 70] [--rate-factor 1] [--latency 10ms] [--repeat 3]

Needs the ``bench`` extra (``pip install -e '.[bench]'``: SeaweedFS, s3fs) and
``h5repack`` (Debian's hdf5-tools).

The sample archive and its variants (``h5repack -S PAGE -G 8MiB``, ``reorder --by shot``,
``reorder --by signal``, ``convert`` to shot-major, signal-major and shot-packed Zarr)
are uploaded to SeaweedFS on 127.0.0.1 and read through the proxy that adds the latency
to every request, each cell in a fresh process, by:

- **standard**: the reader a user already has (benchmarks/standard_readers.py): h5py
  over s3fs, an 8 MiB ``blockcache`` and a 64 MiB page buffer on the paged files
  (NSIDC's recommendation for cloud-optimised HDF5); zarr-python over obstore for Zarr;
  each signal and the time bases it is on, the arrays layoutkit returns;
- **layoutkit**: ``layoutkit.open(url, storage_options=...)`` with its defaults (a paged
  file in a bucket read in 1 MiB blocks, no page buffer: issue 62): the signals as
  DataArrays, their time bases as coordinates.

The virtual layout (``virtual.icechunk``: no rewrite, an Icechunk repository in the
bucket of references to ``source.h5``'s chunks, written bucket to bucket once the source
is uploaded) is read by zarr-python + icechunk as its standard reader, by
``layoutkit.open`` (references next to each other merged into one GET), and compared
with h5py over s3fs on ``source.h5`` itself, which it points into.

Each cell times the open and the reads, after the imports (layoutkit's readers, xarray,
zarr and obstore, which ``layoutkit.open`` imports when it is first called, and dask,
which xarray imports when it makes its first array, take 1 s: once per script).

Patterns: one signal of every shot (``--signal``, default ``ip``; ``spectroscopy_2d`` is a
32-channel signal on its own channel scale), and every signal of one shot. Each cell:
seconds (median of ``--repeat``) and GETs (counted by the proxy). Beside each layout's
best pattern, the modelled minimum: the bytes a reader must fetch over the bandwidth of
one large GET through the proxy (measured in this run, the latency set to 0), plus one
round trip per dependent step the layout's format needs (:data:`STEPS`), plus, for the
HDF5 files, the codec floor: decoding their deflated chunks with libdeflate on every
core (the reads are codec-bound there; measured here, :func:`decode_floor`), and for the
Zarr stores decoding the zstd chunks the read fetches (:func:`zarr_decode_floor`). The
bytes: for Zarr, what the arrays take as stored in the source; for a paged HDF5 file, the whole pages that hold them and their
object headers, and the first page (its page buffer reads whole pages). Prints a
markdown table; writes ``benchmarks/out/readers.json``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import HERE, PY, parse_args, sample

from layoutkit.testing.s3 import DelayProxy, SeaweedFS, storage_options, upload

MiB = 1024**2
BUCKET = "readers"
PAGE_BUFFER = 64 * MiB

_CHILD = r"""
import json, sys, time
kind, url, endpoint, pattern, item, paged = sys.argv[1:7]
sys.path.insert(0, sys.argv[7])
if kind == "standard":
    import h5py, s3fs, zarr, obstore, numpy
    import standard_readers
else:  # and what it imports when it first reads (1 s): a script pays it once, not per read
    import dask.array, h5py, obstore, pandas, xarray, zarr  # xarray imports dask on its first array
    import layoutkit, layoutkit.archive  # layoutkit.open imports its readers when first called
t0 = time.perf_counter()  # imports excluded
done = True
if kind == "standard" and url.startswith("icechunk:"):
    done = standard_readers.icechunk_store(url, endpoint, pattern, item)
elif kind == "standard" and url.endswith(".zarr"):
    done = standard_readers.zarr_store(url, endpoint, pattern, item)
elif kind == "standard":
    standard_readers.hdf5(url, endpoint, pattern, item, paged == "1")
else:
    options = {"endpoint_url": endpoint, "key": "test", "secret": "test", "region": "us-east-1"}
    with layoutkit.open(url, storage_options=options) as a:  # its defaults, as a user opens it
        a.signal(item) if pattern == "signal" else a.shot(item)
print(json.dumps({"seconds": time.perf_counter() - t0 if done else None}))
"""


def run_cell(kind: str, url: str, endpoint: str, pattern: str, item: str, paged: bool, proxy: DelayProxy) -> dict:
    proxy.reset_counts()
    out = subprocess.run([PY, "-c", _CHILD, kind, url, endpoint, pattern, item, "1" if paged else "0", str(HERE)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{kind} {url} {pattern}: {out.stderr[-2000:]}")
    seconds = json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
    return {"seconds": seconds, "gets": proxy.by_method.get("GET", 0)}


STEPS = {  # (file, pattern) -> dependent round trips of the layout's best read, as its format has them
    ("by-signal.h5", "signal"): 3,  # first page (superblock, root); the signal's metadata pages; its data pages
    ("by-shot.h5", "shot"): 3,  # first page; the shot's metadata pages; its data pages
    ("signal-major.zarr", "signal"): 2,  # root; the series' index with its data, whole (docs/formats/signal-major.md)
    ("shot-packed.zarr", "shot"): 3,  # root; the shot's index document; its packed bytes (shot-packed.md)
}
VARIANTS = {  # name in the bucket -> how it is written from the source
    "h5repack-page.h5": ["h5repack", "-S", "PAGE", "-G", str(8 * MiB)],
    "by-shot.h5": [PY, "-m", "layoutkit", "-q", "reorder", "--by", "shot"],
    "by-signal.h5": [PY, "-m", "layoutkit", "-q", "reorder", "--by", "signal"],
    "shot-major.zarr": [PY, "-m", "layoutkit", "-q", "convert"],
    "signal-major.zarr": [PY, "-m", "layoutkit", "-q", "convert", "--layout", "signal-major", "--shards", "auto"],
    "shot-packed.zarr": [PY, "-m", "layoutkit", "-q", "convert", "--layout", "shot-packed"],
}


def _arrays(f, pattern: str, item: str) -> list:  # noqa: ANN001 - an h5py File
    """The datasets a read of ``pattern`` takes from an HDF5 file: the signals and their time bases."""
    arrays = []
    for shot in f["shots"]:
        signals = f[f"shots/{shot}/signals"]
        if pattern == "signal" and item in signals:
            arrays.append(signals[item])
        elif pattern == "shot" and shot == item:
            arrays.extend(signals.values())
    return arrays + [scale for ds in arrays for dim in ds.dims for scale in dim.values()]


def decode_floor(path: Path, pattern: str, item: str) -> float:
    """Seconds to decode the stored chunks of what the read takes, with the fastest
    decoders layoutkit has (libdeflate for deflate), on every core: the codec floor.
    The bytes are read from the local file first, not timed."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import h5py

    from layoutkit.hdf5.raw import chunk_entries, decode_chunked, raw_decoders

    with h5py.File(path, "r") as f, open(path, "rb") as fh:
        jobs, raw = [], {}
        for ds in _arrays(f, pattern, item):
            decoders = raw_decoders(ds)
            if decoders:
                entries = chunk_entries(ds)
                for offset, size, _ in entries.values():
                    raw[offset] = os.pread(fh.fileno(), size, offset)
                jobs.append((ds, entries, decoders))
        with ThreadPoolExecutor(os.cpu_count()) as pool:
            best = math.inf
            for _ in range(3):
                t0 = time.perf_counter()
                list(pool.map(lambda j: decode_chunked(*j, lambda o, n: raw[o]), jobs))
                best = min(best, time.perf_counter() - t0)
    return best


def zarr_decode_floor(path: Path, pattern: str, item: str) -> float:
    """The codec floor of a Zarr read: the objects layoutkit's read of ``pattern``
    fetches whole (recorded on the local store), their chunks (a shard's inner chunks,
    found from its index) decoded with numcodecs into one preallocated buffer each, on
    every core; the best of 3. Objects of codecs other than zstd, or none, count as free."""
    import json
    import os
    from concurrent.futures import ThreadPoolExecutor

    import numcodecs
    import numpy as np

    import layoutkit

    fetched: list[str] = []
    with layoutkit.open(path) as archive:
        get = archive.store.get

        async def recording(key, prototype, byte_range=None):  # noqa: ANN001, ANN202
            if byte_range is None and "/c/" in key:
                fetched.append(key)
            return await get(key, prototype, byte_range)

        archive.store.get = recording
        archive.signal(item) if pattern == "signal" else archive.shot(item)
    jobs = []  # (stored bytes, decoded size)
    for key in dict.fromkeys(fetched):
        array = key.split("/c/")[0] if "/c/" in key else key.rsplit("/", 1)[0]
        doc_path = path / array / "zarr.json"
        if not doc_path.exists():
            continue
        doc = json.loads(doc_path.read_text())
        itemsize = np.dtype(doc["data_type"]).itemsize if doc["data_type"] not in ("string", "bytes") else 1
        codecs = doc.get("codecs", [])
        body = (path / key).read_bytes()
        if codecs and codecs[0]["name"] == "sharding_indexed":
            conf = codecs[0]["configuration"]
            inner = conf["chunk_shape"]
            n = math.prod(-(-a // b) for a, b in zip(doc["chunk_grid"]["configuration"]["chunk_shape"], inner))
            if not any(c["name"] == "zstd" for c in conf["codecs"]):
                continue
            at_end = conf.get("index_location", "end") == "end"  # n (offset, size) pairs, then a crc32c
            index = np.frombuffer(body[-(16 * n + 4) : -4] if at_end else body[: 16 * n], "<u8").reshape(n, 2)
            jobs += [(memoryview(body)[int(o) : int(o) + int(ln)], math.prod(inner) * itemsize)
                     for o, ln in index if int(o) != 2**64 - 1]
        elif any(c["name"] == "zstd" for c in codecs):
            jobs.append((memoryview(body), math.prod(doc["chunk_grid"]["configuration"]["chunk_shape"]) * itemsize))
    codec = numcodecs.Zstd()
    best = math.inf
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        for _ in range(3):
            outs = [np.empty(size, np.uint8) for _, size in jobs]
            t0 = time.perf_counter()
            list(pool.map(lambda j: codec.decode(j[0][0], out=j[1]), zip(jobs, outs)))
            best = min(best, time.perf_counter() - t0)
    return best if jobs else 0.0


def page_bytes(path: Path, pattern: str, item: str) -> int:
    """Bytes of the whole pages a reader of a paged HDF5 file must fetch for a read: the
    first (superblock, root group), the pages holding the object headers of the arrays
    read, and those holding their data (a page buffer reads whole pages)."""
    import h5py

    from layoutkit.hdf5.raw import stored_ranges

    with h5py.File(path, "r") as f:
        page = f.id.get_create_plist().get_file_space_page_size()
        arrays = _arrays(f, pattern, item)
        pages = {0}
        for ds in arrays:
            pages.add(h5py.h5g.get_objinfo(ds.id, b".").objno[0] // page)
            pages.update(i for offset, size in stored_ranges(ds) for i in range(offset // page, (offset + size - 1) // page + 1))
    return len(pages) * page


def main() -> None:  # long: the benchmark's one run, step by step
    import argparse

    from bench_object_store import bandwidth, stored_bytes
    from obstore.store import S3Store

    from layoutkit.options import parse_duration
    from layoutkit.templates import DEFAULT_TEMPLATE

    def extra(parser: argparse.ArgumentParser) -> None:
        parser.set_defaults(shots=20)
        parser.add_argument("--latency", default="10ms")
        parser.add_argument("--signal", default="ip", help="the signal read from every shot")
        parser.add_argument("--repeat", type=int, default=3)
        parser.add_argument("--out-name", default="readers")
        parser.add_argument("--variants", default=",".join([*VARIANTS, "virtual.icechunk"]),
                            help="comma-separated variants read beside source.h5")

    args = parse_args(__doc__, extra)
    src, _ = sample(args.workdir, args.shots, args.signals, args.rate_factor)
    files = {"source.h5": (src, False)}
    args.variants = args.variants.split(",")
    for name, cmd in VARIANTS.items():
        if name not in args.variants:
            continue
        out = args.workdir / f"{src.stem}-{name}"
        if not out.exists():
            print(f"writing {out.name} ...", flush=True)
            subprocess.run([*cmd, str(src), str(out)], check=True)
        files[name] = (out, name.endswith(".h5"))
    import layoutkit

    with layoutkit.open(src) as a:
        shot, signal = a.shots[len(a.shots) // 2], args.signal
    needs = {"signal": stored_bytes(src, "signal", [signal], DEFAULT_TEMPLATE),
             "shot": stored_bytes(src, "shot", [shot], DEFAULT_TEMPLATE)}
    report: dict = {"command": "python benchmarks/bench_readers.py " + " ".join(sys.argv[1:]),
                    "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores",
                    "sample_bytes": src.stat().st_size, "latency": parse_duration(args.latency),
                    "shot": shot, "signal": signal, "stored_bytes": needs, "cells": []}
    with SeaweedFS() as server, DelayProxy(server.port) as proxy:
        server.create_bucket(BUCKET)
        store = S3Store(BUCKET, endpoint=server.endpoint, access_key_id="test", secret_access_key="test",
                        region="us-east-1", client_options={"allow_http": True})
        for name, (path, _) in files.items():
            print(f"uploading {name} ...", flush=True)
            upload(store, path, name)
        if "virtual.icechunk" in args.variants:  # references to source.h5 by its bucket URL: written in the bucket
            print("writing virtual.icechunk ...", flush=True)
            direct = storage_options(server.endpoint)
            subprocess.run([PY, "-m", "layoutkit", "-q", "convert", f"s3://{BUCKET}/source.h5",
                            f"icechunk:s3://{BUCKET}/virtual.icechunk", "--layout", "virtual",
                            *[a for k, v in direct.items() for a in ("--storage-option", f"{k}={v}")]], check=True)
            files["virtual.icechunk"] = (src, False)
        endpoint = storage_options(proxy.endpoint)["endpoint_url"]
        through_proxy = S3Store(BUCKET, endpoint=endpoint, access_key_id="test", secret_access_key="test",
                                region="us-east-1", client_options={"allow_http": True})
        report["bandwidth"] = bandwidth(through_proxy, "source.h5", src.stat().st_size)  # latency 0 still
        proxy.latency = report["latency"]
        for name in files:
            paged = name.endswith(".h5") and name != "source.h5"
            for pattern, item in (("signal", signal), ("shot", shot)):
                for kind in ("standard", "layoutkit"):
                    url = f"icechunk:s3://{BUCKET}/{name}" if name.endswith(".icechunk") else f"s3://{BUCKET}/{name}"
                    runs = [run_cell(kind, url, endpoint, pattern, item, paged, proxy)
                            for _ in range(args.repeat)]
                    if runs[0]["seconds"] is None:
                        continue  # no such reader
                    cell = {"file": name, "pattern": pattern, "reader": kind, "gets": runs[-1]["gets"],
                            "seconds": statistics.median(r["seconds"] for r in runs)}
                    report["cells"].append(cell)
                    print(f"{name:>18} {pattern:>6} {kind:>9} {cell['seconds']:7.2f} s {cell['gets']:>5} GETs", flush=True)
    report["model"], report["decode_floor"] = {}, {}
    for (name, pattern), steps in STEPS.items():
        if name not in files:
            continue
        item = signal if pattern == "signal" else shot
        hdf5 = name.endswith(".h5")
        nbytes = page_bytes(files[name][0], pattern, item) if hdf5 else needs[pattern]
        floor = decode_floor(files[name][0], pattern, item) if hdf5 else zarr_decode_floor(files[name][0], pattern, item)
        report["decode_floor"][f"{name} {pattern}"] = floor
        report["model"][f"{name} {pattern}"] = nbytes / report["bandwidth"] + steps * report["latency"] + floor
    (HERE / "out" / f"{args.out_name}.json").write_text(json.dumps(report, indent=1) + "\n")
    summarize(report)


def summarize(report: dict) -> None:
    print(f"\n{report['command']}  ({report['date']}, {report['machine']}, sample {report['sample_bytes'] / 1e6:,.0f} MB, "
          f"{report['latency'] * 1e3:.0f} ms per request, {report['bandwidth'] / 1e6:.0f} MB/s; each cell a fresh process)\n")
    print("| layout | one signal of all shots: standard / layoutkit | all signals of one shot: standard / layoutkit |")
    print("|---|---|---|")
    cells = {(c["file"], c["pattern"], c["reader"]): c for c in report["cells"]}
    for name in dict.fromkeys(c["file"] for c in report["cells"]):
        row = []
        for pattern in ("signal", "shot"):
            k = cells[(name, pattern, "layoutkit")]
            s = cells.get((name, pattern, "standard"))
            text = (f"{s['seconds']:.2f} s, {s['gets']} GETs / " if s else "(no standard reader) / ")
            text += f"{k['seconds']:.2f} s, {k['gets']} GETs"
            if s:
                text += f" ({s['seconds'] / k['seconds']:.2f}x)"
            model = report["model"].get(f"{name} {pattern}")
            if model is not None:
                text += f"; model {model:.2f} s ({k['seconds'] / model:.1f}x it)"
            row.append(text)
        print(f"| {name} | {row[0]} | {row[1]} |")


if __name__ == "__main__":
    main()
