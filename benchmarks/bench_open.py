"""Opening a big Zarr store, and reading shots from it, against the references (issue 13).

    .venv/bin/python benchmarks/bench_open.py [--shots 250] [--signals 70]

On the sample archive converted to shot-major Zarr (`layoutkit convert`, consolidated
metadata), local files in the page cache, no latency, median of 5:

- open: `zarr.open_group` (zarr parses the consolidated metadata of every array) against
  `layoutkit.open` plus listing every array with its shape and dtype;
- shot: K=10 shots read with `layoutkit.open(...).shot(...)` from the Zarr store and
  from the source HDF5 file (the same shots), each archive opened once, as verify's
  shot pattern does.

Results: benchmarks/out/open.{txt,json}.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path

from common import HERE, parse_args, sample

import layoutkit
from layoutkit.convert import convert


def timed(fn, repeat: int = 5) -> float:  # noqa: ANN001
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    import zarr

    args = parse_args(__doc__)
    src, logical = sample(args.workdir, args.shots, args.signals)
    store = args.workdir / f"{src.stem}-open.zarr"
    if not store.exists():
        convert(src, store)
    with layoutkit.open(store) as archive:
        arrays = len(archive.arrays())
        shots = random.Random(0).sample(archive.shots, 10)
    lines = [f"# {src.name} as shot-major Zarr: {arrays:,} arrays; local, page cache, no latency, median of 5",
             f"# command: benchmarks/bench_open.py --shots {args.shots} --signals {args.signals}", ""]
    results: dict[str, float] = {}
    results["zarr.open_group"] = timed(lambda: zarr.open_group(store, mode="r"))

    def lk_open() -> None:
        with layoutkit.open(store) as a:
            a.arrays()

    results["layoutkit.open + arrays()"] = timed(lk_open)

    def read_shots(path: Path) -> None:
        with layoutkit.open(path) as a:
            for shot in shots:
                a.shot(shot)

    results["10 shots from the Zarr store"] = timed(lambda: read_shots(store), 3)
    results["10 shots from the source HDF5"] = timed(lambda: read_shots(src), 3)
    lines.append("| what | seconds |")
    lines.append("|---|---:|")
    lines += [f"| {k} | {v:.2f} |" for k, v in results.items()]
    lines.append("")
    lines.append(f"open: layoutkit {results['zarr.open_group'] / results['layoutkit.open + arrays()']:.1f}x faster "
                 f"than zarr.open_group; shots: Zarr {results['10 shots from the source HDF5'] / results['10 shots from the Zarr store']:.2f}x "
                 "the source's speed")
    text = "\n".join(lines)
    print(text)
    (HERE / "out" / "open.txt").write_text(text + "\n")
    (HERE / "out" / "open.json").write_text(json.dumps({"arrays": arrays, "seconds": results}, indent=1))


if __name__ == "__main__":
    main()
