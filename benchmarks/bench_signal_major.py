"""Shot-major against signal-major Zarr at simulated object-store latency (issue 5).

    .venv/bin/python benchmarks/bench_signal_major.py [--shots 100] [--signals 70] [--reads 5]

Writes (once) a sample archive and converts it both ways:

    layoutkit convert SAMPLE shot-major.zarr
    layoutkit convert SAMPLE signal-major.zarr --order signal --shards auto

then, on each store opened with ``layoutkit.open(path, model=LatencyModel(latency))``
(10 ms per request by default, unlimited bandwidth), times ``archive.signal(name)`` for
``--reads`` random signals and ``archive.shot(shot)`` for as many random shots, the same
ones on both stores, and counts the requests and bytes each read makes. Prints a table
and writes benchmarks/out/signal_major.json.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

from common import HERE, PY, parse_args, sample

from layoutkit.storage import disk_usage as du

STORES = {
    "shot-major": (),
    "signal-major": ("--layout", "signal-major", "--shards", "auto"),
}


def extra(parser) -> None:  # noqa: ANN001
    parser.add_argument("--reads", type=int, default=5, help="signals and shots read per store")
    parser.add_argument("--latency", type=float, default=0.010, help="seconds per request")
    parser.add_argument("--seed", type=int, default=0)


def convert(src: Path, work: Path) -> dict[str, dict]:
    out = {}
    for name, options in STORES.items():
        dst = work / f"{src.stem}-{name}.zarr"
        seconds = None
        if not dst.exists():
            print(f"writing {dst.name} ...", flush=True)
            t0 = time.perf_counter()
            subprocess.run([PY, "-m", "layoutkit", "-q", "convert", str(src), str(dst), *options], check=True)
            seconds = time.perf_counter() - t0
        out[name] = {"path": str(dst), "convert_seconds": seconds, "bytes": du(dst),
                     "objects": sum(1 for p in dst.rglob("*") if p.is_file())}
    return out


def time_reads(path: str, method: str, names: list[str], latency: float) -> dict:
    """Open the store once, then time each read on its own (requests counted per read)."""
    import layoutkit
    from layoutkit.storage.counting import LatencyModel

    rows = []
    with layoutkit.open(path, model=LatencyModel(latency=latency)) as archive:
        for name in names:
            archive.counter.reset()
            t0 = time.perf_counter()
            getattr(archive, method)(name)
            rows.append({"name": name, "seconds": time.perf_counter() - t0,
                         "requests": archive.counter.requests, "bytes": archive.counter.bytes})
    return {
        "reads": rows,
        "seconds": sum(r["seconds"] for r in rows) / len(rows),
        "requests": sum(r["requests"] for r in rows) / len(rows),
        "bytes": sum(r["bytes"] for r in rows) / len(rows),
    }


def main() -> None:
    args = parse_args(__doc__, extra=extra)
    args.shots = args.shots if args.shots != 250 else 100  # the shared default is the convert sample
    src, logical = sample(args.workdir, args.shots, args.signals)
    stores = convert(src, args.workdir)
    import layoutkit

    with layoutkit.open(src) as source:
        rng = random.Random(args.seed)
        picks = {
            "signal": rng.sample(source.signals, min(args.reads, len(source.signals))),
            "shot": rng.sample(source.shots, min(args.reads, len(source.shots))),
        }
    results: dict[str, dict] = {}
    for pattern, names in picks.items():
        for store, info in stores.items():
            print(f"{pattern} reads on {store} ...", flush=True)
            results[f"{pattern}/{store}"] = time_reads(info["path"], pattern, names, args.latency)
    report(args, src, logical, stores, picks, results)


def report(args, src: Path, logical: int, stores: dict, picks: dict, results: dict) -> None:  # noqa: ANN001
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{src.name}: {args.shots} shots x {args.signals} signals, "
                        f"{args.latency * 1e3:g} ms per request, mean of {args.reads} reads")
    for col in ("pattern", "store", "seconds/read", "requests/read", "MB fetched/read", "speed vs shot-major"):
        table.add_column(col, justify="left" if col in ("pattern", "store") else "right")
    for key, r in results.items():
        pattern, store = key.split("/")
        base = results[f"{pattern}/shot-major"]["seconds"]
        table.add_row(pattern, store, f"{r['seconds']:.3f}", f"{r['requests']:.1f}", f"{r['bytes'] / 1e6:.2f}",
                      f"{base / r['seconds']:.1f}x")
    console = Console()
    console.print(table)
    for name, info in stores.items():
        took = f", converted in {info['convert_seconds']:.1f} s" if info["convert_seconds"] else ""
        console.print(f"{name}: {info['bytes'] / 1e6:.0f} MB in {info['objects']} objects{took}")
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    doc = {"sample": str(src), "shots": args.shots, "signals": args.signals, "logical_bytes": logical,
           "latency_s": args.latency, "picks": picks, "stores": stores, "results": results}
    (out / "signal_major.json").write_text(json.dumps(doc, indent=2))
    console.print(f"wrote {out / 'signal_major.json'}")


if __name__ == "__main__":
    main()
