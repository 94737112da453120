"""The 100 TB plan, checked at 1/1000: a bucket-to-bucket convert on a LocalCluster.

    python benchmarks/bench_scale.py [--shots 500] [--signals 70] [--order signal]

Needs the ``bench`` extra (SeaweedFS). 500,000 shots x 70 signals at 1/1000 is 500
shots x 70 signals. The sample is uploaded to SeaweedFS on 127.0.0.1, then
``layoutkit convert s3://... s3://... --scheduler processes`` runs on a LocalCluster
(dask.distributed: worker processes read the source from the bucket and write the store
to it; no shared file system). Every request passes a counting proxy.

The plan (``layoutkit.pipeline.plan``, no I/O beyond the walk) predicts the counts that
matter at scale: tasks, objects written (one PUT each: every chunk or shard of every
array, every metadata document), bytes written; the run measures them. The report
prints predicted against measured, the measured rates (PUTs and GETs per second, MB/s
per worker, peak RSS), and extrapolates them to 500,000 shots: task count, requests
against S3's per-prefix limits (3,500 PUT/s and 5,500 GET/s), request cost, and time at
N workers. Writes ``benchmarks/out/scale.json``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

from common import HERE, PY, parse_args, sample
from s3local import DelayProxy, SeaweedFS, storage_options

MiB = 1024**2
FULL_SHOTS = 500_000
FULL_BYTES = 100e12
PUT_PER_1000, GET_PER_1000 = 0.005, 0.0004  # USD, S3 standard, us-east-1
PREFIX_PUT_PER_S, PREFIX_GET_PER_S = 3500, 5500  # S3's documented per-prefix request rates


def extra(parser) -> None:  # noqa: ANN001
    parser.set_defaults(shots=500)
    parser.add_argument("--order", default="signal", choices=["signal", "shot"])


def grid_cells(shape: tuple[int, ...], grid: tuple[int, ...]) -> int:
    return math.prod(-(-s // g) for s, g in zip(shape, grid)) if shape else 1


def predicted_objects(the_plan) -> tuple[int, int]:  # noqa: ANN001
    """(objects, arrays) the plan writes: each array's metadata document and every cell of
    its shard (or chunk) grid; each group's document (the groups the arrays need, the
    source's, the series'), the sidecar. An empty array writes no chunk."""
    arrays = list(the_plan.arrays)
    objects = 0
    nodes: set[str] = set()
    for a in arrays:
        size = math.prod(a.shape) if a.shape else 1
        if size:
            objects += grid_cells(tuple(a.shape), tuple(a.shards or a.chunks or a.shape))
        objects += 1
        parent = a.path.strip("/").rpartition("/")[0]
        while parent:
            nodes.add(parent)
            parent = parent.rpartition("/")[0]
    for g in getattr(the_plan, "groups", ()):
        nodes.add(g.path.strip("/"))
    for s in getattr(the_plan, "series", ()):
        nodes.add(s.group.strip("/"))
    nodes.discard("")
    return objects + len(nodes) + 2, len(arrays)  # + the root document and layoutkit.json


def main() -> None:
    args = parse_args(__doc__, extra)
    from layoutkit import pipeline
    from layoutkit.layouts import layout_for
    from layoutkit.recipes import build_options
    from layoutkit.storage import as_source

    src, logical = sample(args.workdir, args.shots, args.signals)
    layout_args = ["--order", "signal", "--shards", "auto"] if args.order == "signal" else []
    with SeaweedFS() as server, DelayProxy(server.port) as proxy:
        server.create_bucket("scale")
        import obstore
        from obstore.store import S3Store

        store = S3Store("scale", endpoint=server.endpoint, access_key_id="test", secret_access_key="test",
                        region="us-east-1", client_options={"allow_http": True})
        print(f"uploading {src.name} ({src.stat().st_size / 1e6:.0f} MB) ...", flush=True)
        with open(src, "rb") as fh:
            obstore.put(store, "source.h5", fh, chunk_size=16 * MiB, max_concurrency=8)
        opts = storage_options(proxy.endpoint)
        source = as_source("s3://scale/source.h5", opts)
        options = build_options("convert", None, {"order": args.order, **({"shards": "auto"} if args.order == "signal" else {}),
                                                  "scheduler": "processes", "workers": args.workers})
        layout = layout_for("convert", options)
        t0 = time.perf_counter()
        _, the_plan = pipeline.plan(layout, source, "s3://scale/out.zarr", options)
        plan_seconds = time.perf_counter() - t0
        objects, arrays = predicted_objects(the_plan)
        predicted = {"tasks": len(the_plan.tasks), "objects": objects, "arrays": arrays, "bytes": the_plan.nbytes}
        print(f"plan: {predicted} ({plan_seconds:.1f} s)", flush=True)
        proxy.by_method.clear()
        cmd = [PY, "-m", "layoutkit", "-q", "convert", "s3://scale/source.h5", "s3://scale/out.zarr", *layout_args,
               "--scheduler", "processes", "--workers", str(args.workers),
               *[a for k, v in opts.items() for a in ("--storage-option", f"{k}={v}")]]
        print("converting bucket to bucket on a LocalCluster ...", flush=True)
        out = subprocess.run([PY, str(HERE / "measure.py"), "--", *cmd], capture_output=True, text=True, check=True)
        run = json.loads(out.stdout.strip().splitlines()[-1])
        if run["returncode"] != 0:
            raise SystemExit(run["stderr"])
        written = sum(meta["size"] for batch in obstore.list(store, prefix="out.zarr/") for meta in batch)
        stored = sum(1 for batch in obstore.list(store, prefix="out.zarr/") for _ in batch)
        measured = {"seconds": run["seconds"], "peak_rss": run["peak_rss"], "requests": dict(proxy.by_method),
                    "objects": stored, "bytes_written": written}
    report = {"shots": args.shots, "signals": args.signals, "order": args.order, "workers": args.workers,
              "source_bytes": src.stat().st_size, "logical_bytes": logical, "predicted": predicted,
              "measured": measured, "plan_seconds": plan_seconds}
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "scale.json").write_text(json.dumps(report, indent=2))
    summarize(report)


def summarize(r: dict) -> None:
    p, m = r["predicted"], r["measured"]
    puts = m["requests"].get("PUT", 0) + m["requests"].get("POST", 0)
    gets = m["requests"].get("GET", 0)
    print(f"\n{r['shots']} shots x {r['signals']} signals, {r['source_bytes'] / 1e6:.0f} MB, "
          f"convert --order {r['order']} bucket to bucket, LocalCluster of {r['workers']} processes:\n")
    print("| count | planned | measured |")
    print("|---|---:|---:|")
    print(f"| tasks | {p['tasks']:,} | (windowed: 2 per worker in flight) |")
    print(f"| objects in the store | {p['objects']:,} | {m['objects']:,} |")
    print(f"| PUT requests (incl. multipart parts) | {p['objects']:,} | {puts:,} |")
    print(f"| GET requests (source: metadata blocks + chunk ranges) | | {gets:,} |")
    print(f"| HEAD / LIST / DELETE | | {m['requests'].get('HEAD', 0):,} / {m['requests'].get('LIST', 0):,} / "
          f"{m['requests'].get('DELETE', 0):,} |")
    print(f"| seconds | | {m['seconds']:.1f} |")
    print(f"| peak RSS (the process tree's largest) | | {m['peak_rss'] / MiB:.0f} MiB |")
    scale = 500_000 / r["shots"]
    bytes_scale = FULL_BYTES / r["source_bytes"]
    per_worker = r["source_bytes"] / m["seconds"] / r["workers"]
    print(f"\nAt 500,000 shots (x{scale:,.0f} in shots; 100 TB is x{bytes_scale:,.0f} in bytes, so signals "
          f"{bytes_scale / scale:.0f}x larger than the sample's):\n")
    full_tasks = p["tasks"] * bytes_scale
    full_objects = p["objects"] * scale  # the layout's object count follows shots x signals, not bytes...
    print(f"- tasks: ~{full_tasks:,.0f} (bytes / task budget), ~{r['source_bytes'] / max(1, p['tasks']) / MiB:.0f} MiB each")
    print(f"- objects (PUTs): ~{full_objects:,.0f} at this object size; cost ${full_objects / 1000 * PUT_PER_1000:,.0f}")
    print(f"- GETs of the source: ~{gets * bytes_scale:,.0f}; cost ${gets * bytes_scale / 1000 * GET_PER_1000:,.0f}")
    for workers in (64, 256, 1024):
        hours = FULL_BYTES / (per_worker * workers) / 3600
        rate_put = full_objects / (hours * 3600)
        rate_get = gets * bytes_scale / (hours * 3600)
        print(f"- {workers} workers at {per_worker / 1e6:.0f} MB/s each (measured here): {hours:,.1f} h, "
              f"{rate_put:,.0f} PUT/s and {rate_get:,.0f} GET/s (S3 per prefix: {PREFIX_PUT_PER_S:,} / {PREFIX_GET_PER_S:,})")


if __name__ == "__main__":
    sys.exit(main())
