"""Every command's peak memory under load, against its budget (issue 41).

    python benchmarks/bench_memory.py [--shots 250] [--signals 70] [--memory-limit 256MiB] [--bucket-shots 50]
                                      [--only local|bucket]

Needs the ``bench`` extra (SeaweedFS). Two settings, each command a process of its own
(peak RSS of its process tree, ``benchmarks/measure.py``):

- **local**: the sample on the local disk; ``convert`` into each Zarr layout and
  ``reorder`` with ``--memory-limit``, then ``verify``, ``inspect`` and ``advise``;
- **bucket, stalling**: a sample of ``--bucket-shots`` shots in SeaweedFS behind a misbehaving proxy
  (:class:`layoutkit.testing.faults.FaultyBucket`) on which every 25th request gets no
  answer (``--storage-option timeout=1s``: each is sent again), so reads pile up behind
  stalls; the same commands with the source in the bucket.

The budget of ``convert`` and ``reorder`` is ``--memory-limit``: the data in flight. What
a run holds besides grows with the file, not with the data moving (the inventory and
the plan, ~2.5 kB a dataset; HDF5's metadata cache): it is measured as the peak of the
same command on the same source with ``--memory-limit 32MiB`` (the *footprint*), and a
run with ``--memory-limit`` L must peak within footprint + L. ``verify``, ``inspect``
and ``advise`` have no budget option; their footprint is their peak on a one-shot sample
and they are held to the default budget (1 GiB) above it. Prints a markdown table;
writes ``benchmarks/out/memory.json``.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from common import HERE, PY, parse_args, sample, timed

from layoutkit.options import parse_size
from layoutkit.testing.faults import FaultyBucket
from layoutkit.testing.s3 import SeaweedFS, storage_options, upload

MiB = 1024**2
DEFAULT_BUDGET = 1024 * MiB


def extra(parser) -> None:  # noqa: ANN001
    parser.add_argument("--memory-limit", default="256MiB")
    parser.add_argument("--bucket-shots", type=int, default=50,
                        help="shots of the bucket source (each stalled request costs a timeout: 1 s)")
    parser.add_argument("--only", choices=["local", "bucket"], help="one setting; the other's figures kept")


def commands(src: str, work: Path, limit: str, opts: list[str]) -> dict[str, list[str]]:
    """Each command on ``src`` (a path or a URL), writing under ``work``."""
    budget = ["--memory-limit", limit]
    return {
        "convert shot-major": ["convert", src, str(work / "mirror.zarr"), *budget, *opts],
        "convert signal-major": ["convert", src, str(work / "signal.zarr"), "--layout", "signal-major", "--shards",
                                 "auto", *budget, *opts],
        "convert shot-packed": ["convert", src, str(work / "packed.zarr"), "--layout", "shot-packed", *budget, *opts],
        "reorder by shot": ["reorder", src, str(work / "shot.h5"), *budget, *opts],
        "verify": ["verify", src, str(work / "mirror.zarr"), "--repeat", "1", "--sample", "4", *opts],
        "inspect": ["inspect", src, *opts],
        "advise": ["advise", src, "--out", str(work / "advice"), "--sample-shots", "4", *opts],
    }


def run_all(runs: dict[str, list[str]], work: Path) -> dict[str, dict[str, float]]:
    """Each run in a process of its own, its outputs removed first: seconds and peak RSS."""
    out = {}
    for name, args in runs.items():
        for target in ("mirror.zarr", "signal.zarr", "packed.zarr", "shot.h5", "advice"):
            path = work / target
            if not name.startswith("verify") and str(path) in args:
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
        r = timed([PY, "-m", "layoutkit", "-q", *args])
        out[name] = {"seconds": r["seconds"], "peak_mib": r["peak_rss"] / MiB}
        print(f"  {name}: {r['seconds']:.1f} s, {r['peak_rss'] / MiB:.0f} MiB", flush=True)
    return out


FLOOR = "32MiB"
BUDGETED = ("convert", "reorder")


def footprints(src: str, tiny: str, work: Path, opts: list[str]) -> dict[str, dict[str, float]]:
    """Each command's peak with the least data in flight: ``convert`` and ``reorder`` on
    ``src`` at ``--memory-limit`` FLOOR, the others on the one-shot ``tiny``."""
    budgeted = {n: a for n, a in commands(src, work, FLOOR, opts).items() if n.startswith(BUDGETED)}
    small = work / "one-shot"
    shutil.rmtree(small, ignore_errors=True)
    small.mkdir()
    runs = commands(tiny, small, FLOOR, opts)
    timed([PY, "-m", "layoutkit", "-q", *runs["convert shot-major"]])  # the variant verify reads
    others = {n: a for n, a in runs.items() if not n.startswith(BUDGETED)}
    return {**run_all(budgeted, work), **run_all(others, small)}


def main() -> None:
    args = parse_args(__doc__, extra)
    work = args.workdir / "memory"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    limit = parse_size(args.memory_limit)
    src, logical = sample(args.workdir, args.shots, args.signals, args.rate_factor)
    tiny, _ = sample(args.workdir, 1, 2)
    out = HERE / "out" / "memory.json"
    results: dict[str, object] = json.loads(out.read_text()) if args.only and out.exists() else {}
    results.update({"date": time.strftime("%Y-%m-%d"), "memory_limit": limit, "floor": FLOOR})
    if args.only != "bucket":
        results.update(shots=args.shots, signals=args.signals, logical_bytes=logical)
        print(f"local ({src.name}, {logical / 1e9:.2f} GB of data), footprints:", flush=True)
        results["local_footprint"] = footprints(str(src), str(tiny), work, [])
        print(f"local, --memory-limit {args.memory_limit}:", flush=True)
        results["local"] = run_all(commands(str(src), work, args.memory_limit, []), work)
        out.write_text(json.dumps(results, indent=2))
    if args.only != "local":
        results["bucket_shots"] = args.bucket_shots
        src, _ = sample(args.workdir, args.bucket_shots, args.signals, args.rate_factor)
        bucket(results, src, tiny, work, args.memory_limit)
        out.write_text(json.dumps(results, indent=2))
    report(results, limit)
    print(f"wrote {out}")


def bucket(results: dict[str, object], src: Path, tiny: Path, work: Path, limit: str) -> None:
    """The bucket setting: ``src`` in SeaweedFS behind a proxy stalling every 25th request."""
    with SeaweedFS() as weed:
        weed.create_bucket("memory")
        from layoutkit.storage.buckets import store_at

        store = store_at("s3://memory", storage_options(weed.endpoint))
        upload(store, src, src.name)
        upload(store, tiny, tiny.name)
        every_25th = lambda n, method, path: n % 25 == 0  # noqa: E731
        with FaultyBucket(weed.endpoint, "stall", every_25th, stall=3.0) as proxy:
            opts = [f"--storage-option={k}={v}" for k, v in {**storage_options(proxy.url), "timeout": "1s"}.items()]
            url, tiny_url = f"s3://memory/{src.name}", f"s3://memory/{tiny.name}"
            print(f"bucket ({src.name}), every 25th request stalled ({proxy.url}), footprints:", flush=True)
            results["bucket_footprint"] = footprints(url, tiny_url, work, opts)
            print(f"bucket, --memory-limit {limit}:", flush=True)
            results["bucket"] = run_all(commands(url, work, limit, opts), work)
            results["stalled"] = len(proxy.injected)


def report(results: dict[str, object], limit: int) -> None:
    rows = []
    print("\n| command | local: footprint, peak | bucket (stalls): footprint, peak | budget above the footprint | "
          "within |")
    print("|---|---:|---:|---:|---|")
    for name in results["local"]:  # type: ignore[union-attr]
        room = (limit if name.startswith(BUDGETED) else DEFAULT_BUDGET) / MiB
        cells, within = [], True
        for where in ("local", "bucket"):
            base = results[f"{where}_footprint"][name]["peak_mib"]  # type: ignore[index]
            peak = results[where][name]["peak_mib"]  # type: ignore[index]
            within &= peak <= base + room
            cells.append(f"{base:.0f}, {peak:.0f} MiB")
        rows.append({"command": name, "room_mib": room, "within": within})
        print(f"| {name} | {cells[0]} | {cells[1]} | {room:.0f} MiB | {'yes' if within else 'NO'} |")
    results["rows"] = rows
    print(f"\n{results['stalled']} requests stalled and were sent again")


if __name__ == "__main__":
    main()
