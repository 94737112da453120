"""One signal of every shot of a 50,000-shot signal-major store: one DataArray per shot
(``signal``) against the packed form (``signal_packed``), CPU and wall seconds (#52).

    python benchmarks/bench_packed_signal.py [--shots 50000] [--repeat 3]

The archive is bench_index.py's (two signals of 64 float32 values on a shared time base
per shot: small signals, so the per-shot cost is what is measured), converted locally to
signal-major Zarr with ``--shards auto``; each read opens the store afresh, in this
process, the files in the page cache. Writes ``benchmarks/out/packed_signal.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    sys.path.insert(0, str(HERE))
    from bench_index import build

    import layoutkit

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/layoutkit-bench"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    src = args.workdir / f"index-{args.shots}.h5"
    if not src.exists():
        build(src, args.shots)
    store = args.workdir / f"index-{args.shots}-signal-major.zarr"
    if not store.exists():
        layoutkit.convert(src, store, layoutkit.ConvertOptions(layout="signal-major", shards="auto"))
    cells = {}
    for name in ("signal", "signal_packed"):
        runs = []
        for _ in range(args.repeat):
            with layoutkit.open(store) as archive:
                c0, t0 = time.process_time(), time.perf_counter()
                got = getattr(archive, name)("ip")
                runs.append((time.perf_counter() - t0, time.process_time() - c0))
        shots = len(got) if isinstance(got, dict) else got.sizes["shot"]
        cells[name] = {"wall": statistics.median(r[0] for r in runs), "cpu": statistics.median(r[1] for r in runs),
                       "shots": shots}
        print(f"{name:>14}: {cells[name]['cpu']:.2f} s CPU, {cells[name]['wall']:.2f} s wall, {shots:,} shots")
    report = {"command": "python benchmarks/bench_packed_signal.py " + " ".join(sys.argv[1:]),
              "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores", "cells": cells}
    (HERE / "out" / "packed_signal.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"packed form: {cells['signal']['cpu'] / cells['signal_packed']['cpu']:.1f}x less CPU")


if __name__ == "__main__":
    main()
