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
prints predicted against measured, and the per-dataset and per-object request counts the
docs/scale.md ("At 100 TB") scales to 500,000 shots. Writes ``benchmarks/out/scale.json``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

from common import HERE, PY, parse_args, sample

from layoutkit.testing.s3 import DelayProxy, SeaweedFS, storage_options

MiB = 1024**2


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
    layout_args = ["--layout", "signal-major", "--shards", "auto"] if args.order == "signal" else []
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
        proxy.reset_counts()
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
    import h5py

    with h5py.File(src, "r") as f:
        found: list[int] = [0]
        f.visititems(lambda _, o: found.__setitem__(0, found[0] + isinstance(o, h5py.Dataset)))
    report = {"shots": args.shots, "signals": args.signals, "order": args.order, "workers": args.workers,
              "datasets": found[0],
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
    datasets = r.get("datasets") or 0
    if datasets:
        print(f"\nGETs per source dataset: {gets / datasets:.2f}; PUT-class requests per object: "
              f"{puts / max(1, m['objects']):.2f}; {r['source_bytes'] / m['seconds'] / 1e6:.1f} MB/s for the whole run.")
    print("docs/scale.md ('At 100 TB') scales these per-dataset and per-object counts; it does not scale "
          "tasks or time by bytes (the sample's signals are ~35x smaller than the archive's).")


if __name__ == "__main__":
    sys.exit(main())
