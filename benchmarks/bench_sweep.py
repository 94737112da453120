"""verify's sweep: how long it takes, and whether its simulated latency costs what a real
server's does (issue 52).

    .venv/bin/python benchmarks/bench_sweep.py [--shots 12] [--latency 10ms]

On a sample of ``--shots`` shots (12: 64 MB), its shot-major Zarr store (``convert``)
and its signal-major paged HDF5 file (``reorder --by signal``):

1. the sweep the docs show, timed whole, as a user runs it:
   ``layoutkit verify SRC v.zarr by-signal.h5 --latency 0,10ms --workers 1,2 --sample 3``
   (the equality proof included);
2. the same reads of the three files uploaded to SeaweedFS on loopback, read through
   the proxy that adds ``--latency`` to every request (``layoutkit.testing.DelayProxy``):
   ``layoutkit verify s3://.../SRC s3://.../v.zarr s3://.../by-signal.h5 --workers 1,2
   --sample 3 --no-check``.

Each row of the simulated run at ``--latency`` is set beside the same row read from the
bucket: seconds, requests, and their ratio. Written to benchmarks/out/sweep.json; the
table is printed.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import HERE, PY, parse_args, sample


def layoutkit(*args: object, log: Path | None = None) -> float:
    """Seconds the command took, run as a user runs it (not ``--quiet``: verify then
    probes the patterns to say how long it will take); its output to ``log``."""
    t0 = time.perf_counter()
    with open(log, "w") if log else open(os.devnull, "w") as out:
        subprocess.run([PY, "-m", "layoutkit", *map(str, args)], check=True, stdout=out, stderr=subprocess.STDOUT)
    return time.perf_counter() - t0


def rows(folder: Path) -> dict[tuple[str, str, int, float], dict]:
    return {(r["variant"], r["pattern"], int(r["workers"]), float(r["latency"])): r
            for r in csv.DictReader(open(folder / "results.csv"))}


def main() -> None:
    from layoutkit.options import parse_duration
    from layoutkit.testing.s3 import BUCKET, DelayProxy, SeaweedFS, storage_options, upload

    def extra(parser) -> None:  # noqa: ANN001 - argparse.ArgumentParser
        parser.set_defaults(shots=12)
        parser.add_argument("--latency", default="10ms")

    args = parse_args(__doc__, extra)
    latency = parse_duration(args.latency)
    work = args.workdir / "sweep"
    work.mkdir(parents=True, exist_ok=True)
    src, _ = sample(args.workdir, args.shots, args.signals)
    files = {"shots.h5": src, "v.zarr": work / f"{src.stem}-v.zarr", "by-signal.h5": work / f"{src.stem}-by-signal.h5"}
    if not files["v.zarr"].exists():
        layoutkit("convert", src, files["v.zarr"])
    if not files["by-signal.h5"].exists():
        layoutkit("reorder", src, files["by-signal.h5"], "--by", "signal")
    sweep = ["--workers", "1,2", "--sample", "3"]
    local_out = work / "local"
    subprocess.run(["rm", "-rf", str(local_out)], check=True)
    print(f"the sweep, local, --latency 0,{args.latency} ...", flush=True)
    local_seconds = layoutkit("verify", src, files["v.zarr"], files["by-signal.h5"], "--latency", f"0,{args.latency}",
                              *sweep, "--out", local_out, log=work / "local.log")
    print(f"  {local_seconds:.1f} s", flush=True)
    bucket_out = work / "bucket"
    subprocess.run(["rm", "-rf", str(bucket_out)], check=True)
    with SeaweedFS() as server, DelayProxy(server.port) as proxy:
        from obstore.store import S3Store

        server.create_bucket(BUCKET)
        store = S3Store(BUCKET, endpoint=server.endpoint, access_key_id="test", secret_access_key="test",
                        region="us-east-1", client_options={"allow_http": True})
        for name, path in files.items():
            upload(store, path, name)
        from bench_object_store import bandwidth

        direct = S3Store(BUCKET, endpoint=proxy.endpoint, access_key_id="test", secret_access_key="test",
                         region="us-east-1", client_options={"allow_http": True})
        server_bandwidth = bandwidth(direct, "shots.h5", src.stat().st_size)  # the proxy at 0 latency still
        proxy.latency = latency
        options = [a for k, v in storage_options(proxy.endpoint).items() for a in ("--storage-option", f"{k}={v}")]
        print(f"the same reads from SeaweedFS behind the {args.latency} proxy ...", flush=True)
        bucket_seconds = layoutkit("verify", *(f"s3://{BUCKET}/{n}" for n in files), *sweep, "--no-check", *options,
                                   "--out", bucket_out, log=work / "bucket.log")
        print(f"  {bucket_seconds:.1f} s", flush=True)
    with_bandwidth_out = work / "local-bandwidth"
    subprocess.run(["rm", "-rf", str(with_bandwidth_out)], check=True)
    print(f"the sweep's {args.latency} rows again, at the server's bandwidth ({server_bandwidth / 1e6:.0f} MB/s) ...",
          flush=True)
    layoutkit("verify", src, files["v.zarr"], files["by-signal.h5"], "--latency", args.latency, "--no-check",
              "--bandwidth", f"{server_bandwidth / 1e6:.0f}MB/s", *sweep, "--out", with_bandwidth_out,
              log=work / "local-bandwidth.log")
    names = {src.name: "shots.h5", files["v.zarr"].name: "v.zarr", files["by-signal.h5"].name: "by-signal.h5"}
    simulated = {(names[k[0]], *k[1:]): r for k, r in rows(local_out).items() if k[3] == latency}
    real = {(k[0], *k[1:3]): r for k, r in rows(bucket_out).items()}
    costed = {(names[k[0]], *k[1:3]): r for k, r in rows(with_bandwidth_out).items()}
    cells = []
    for (variant, pattern, workers, _), sim in simulated.items():
        got = real.get((variant, pattern, workers))
        if got is None:
            continue
        cells.append({"variant": variant, "pattern": pattern, "workers": workers,
                      "simulated_seconds": float(sim["seconds"]), "bucket_seconds": float(got["seconds"]),
                      "simulated_requests": int(sim["requests"]), "bucket_requests": int(got["requests"]),
                      "ratio": float(sim["seconds"]) / float(got["seconds"]),
                      "bandwidth_seconds": float(costed[(variant, pattern, workers)]["seconds"]),
                      "bandwidth_ratio": float(costed[(variant, pattern, workers)]["seconds"]) / float(got["seconds"])})
    report = {"command": "python benchmarks/bench_sweep.py " + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d"),
              "machine": f"{os.cpu_count()} cores", "sample_bytes": src.stat().st_size, "latency": latency,
              "server_bandwidth": server_bandwidth, "sweep_seconds": local_seconds, "bucket_seconds": bucket_seconds, "cells": cells}
    (HERE / "out" / "sweep.json").write_text(json.dumps(report, indent=1) + "\n")
    summarize(report)


def summarize(report: dict) -> None:
    lat = f"{report['latency'] * 1e3:g} ms"
    print(f"\n{report['command']}  ({report['date']}, {report['machine']}, sample {report['sample_bytes'] / 1e6:.0f} MB)")
    print(f"\nthe sweep (--latency 0,{lat} --workers 1,2 --sample 3, equality included): "
          f"{report['sweep_seconds']:.0f} s; the same reads from the bucket: {report['bucket_seconds']:.0f} s\n")
    bw = f"{report['server_bandwidth'] / 1e6:.0f} MB/s"
    print(f"| variant | pattern | workers | SeaweedFS + {lat} proxy | simulated {lat} | / real | simulated {lat}, {bw} "
          "| / real | requests sim / real |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in report["cells"]:
        print(f"| {c['variant']} | {c['pattern']} | {c['workers']} | {c['bucket_seconds']:.3f} s | "
              f"{c['simulated_seconds']:.3f} s | {c['ratio']:.2f} | {c['bandwidth_seconds']:.3f} s | "
              f"{c['bandwidth_ratio']:.2f} | {c['simulated_requests']} / {c['bucket_requests']} |")
    for key, what in (("ratio", "latency alone"), ("bandwidth_ratio", f"latency and the server's {bw}")):
        ratios = [c[key] for c in report["cells"]]
        if ratios:
            within = sum(0.8 <= r <= 1.2 for r in ratios)
            print(f"\nsimulated with {what}: {within} of {len(ratios)} cells within 20% of the bucket's; "
                  f"median ratio {statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        summarize(json.loads((HERE / "out" / "sweep.json").read_text()))
    else:
        main()
