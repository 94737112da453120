"""Every command's peak memory under load, against its budget (issue 41).

    python benchmarks/bench_memory.py [--shots 250] [--signals 70] [--memory-limit 256MiB]

Needs the ``bench`` extra (SeaweedFS). Two settings, each command a process of its own
(peak RSS of its process tree, ``benchmarks/measure.py``):

- **local**: the sample on the local disk; ``convert`` into each Zarr layout and
  ``reorder`` with ``--memory-limit``, then ``verify``, ``inspect`` and ``advise``;
- **bucket, stalling**: the sample in SeaweedFS behind a misbehaving proxy
  (:class:`layoutkit.faulty_bucket.FaultyBucket`) on which every 25th request gets no
  answer (``--storage-option timeout=1s``: each is sent again), so reads pile up behind
  stalls; the same commands with the source in the bucket.

The budget of ``convert`` and ``reorder`` is ``--memory-limit`` (the data in flight)
above the process's own footprint, measured as the peak of the same command on a
one-shot sample; the other commands have no budget option and are held to the default
one (1 GiB) above theirs. Prints a markdown table; writes ``benchmarks/out/memory.json``.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from common import HERE, PY, parse_args, sample, timed
from s3local import SeaweedFS, storage_options, upload

from layoutkit.faulty_bucket import FaultyBucket
from layoutkit.options import parse_size

MiB = 1024**2
DEFAULT_BUDGET = 1024 * MiB


def extra(parser) -> None:  # noqa: ANN001
    parser.add_argument("--memory-limit", default="256MiB")


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


def run_all(src: str, work: Path, limit: str, opts: list[str]) -> dict[str, dict[str, float]]:
    out = {}
    for name, args in commands(src, work, limit, opts).items():
        for target in ("mirror.zarr", "signal.zarr", "packed.zarr", "shot.h5", "advice"):
            if name.startswith(("convert", "reorder", "advise")) and target in " ".join(args):
                path = work / target
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        r = timed([PY, "-m", "layoutkit", "-q", *args])
        out[name] = {"seconds": r["seconds"], "peak_mib": r["peak_rss"] / MiB}
        print(f"  {name}: {r['seconds']:.1f} s, {r['peak_rss'] / MiB:.0f} MiB", flush=True)
    return out


def main() -> None:
    args = parse_args(__doc__, extra)
    work = args.workdir / "memory"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    limit = parse_size(args.memory_limit)
    src, logical = sample(args.workdir, args.shots, args.signals, args.rate_factor)
    tiny, _ = sample(args.workdir, 1, 2)
    print(f"footprints (a one-shot sample, {tiny.name}):", flush=True)
    floor = run_all(str(tiny), work, args.memory_limit, [])
    results: dict[str, object] = {"date": time.strftime("%Y-%m-%d"), "shots": args.shots, "signals": args.signals,
                                  "logical_bytes": logical, "memory_limit": limit, "footprint": floor}
    print(f"local ({src.name}, {logical / 1e9:.2f} GB of data):", flush=True)
    results["local"] = run_all(str(src), work, args.memory_limit, [])
    with SeaweedFS() as weed:
        weed.create_bucket("memory")
        from layoutkit.storage.buckets import store_at

        store = store_at("s3://memory", storage_options(weed.endpoint))
        upload(store, src, src.name)
        every_25th = lambda n, method, path: n % 25 == 0  # noqa: E731
        with FaultyBucket(weed.endpoint, "stall", every_25th, stall=3.0) as proxy:
            opts = [f"--storage-option={k}={v}" for k, v in {**storage_options(proxy.url), "timeout": "1s"}.items()]
            print(f"bucket, every 25th request stalled ({proxy.url}):", flush=True)
            results["bucket"] = run_all(f"s3://memory/{src.name}", work, args.memory_limit, opts)
            results["stalled"] = len(proxy.injected)
    rows = []
    print("\n| command | footprint | local peak | bucket (stalls) peak | budget | within |")
    print("|---|---:|---:|---:|---:|---|")
    for name, base in floor.items():
        budget = (limit if name.startswith(("convert", "reorder")) else DEFAULT_BUDGET) / MiB + base["peak_mib"]
        local, bucket = results["local"][name]["peak_mib"], results["bucket"][name]["peak_mib"]  # type: ignore[index]
        within = local <= budget and bucket <= budget
        rows.append({"command": name, "budget_mib": budget, "within": within})
        print(f"| {name} | {base['peak_mib']:.0f} MiB | {local:.0f} MiB | {bucket:.0f} MiB | {budget:.0f} MiB | "
              f"{'yes' if within else 'NO'} |")
    results["rows"] = rows
    print(f"\n{results['stalled']} requests stalled and were sent again")
    out = HERE / "out" / "memory.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
