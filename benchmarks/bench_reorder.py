"""Benchmark `layoutkit reorder --by signal` against h5repack, in one run, on one sample.

    python benchmarks/bench_reorder.py [--shots 250] [--workdir /tmp/layoutkit-bench]

Same page size and filter for both: layoutkit reorder --by signal --compressor gzip:4
--page-size 8MiB vs h5repack -S PAGE -G 8388608 -f GZIP=4. Reports MB/s of logical
data, the speed ratio, peak RSS and output sizes (table, JSON and PNG under
benchmarks/out/). Run it on a quiet machine: it measures wall time.
"""

from __future__ import annotations

import shutil

from common import LAYOUTKIT, parse_args, report, run_all, sample, suffix


def main() -> None:
    args = parse_args(__doc__)
    if not shutil.which("h5repack"):
        raise SystemExit("h5repack is needed as the reference: apt-get install hdf5-tools")
    src, logical = sample(args.workdir, args.shots, args.signals, args.rate_factor)
    work = args.workdir
    runs = {
        "layoutkit reorder --by signal": (
            [*LAYOUTKIT, "reorder", str(src), str(work / "by-signal.h5"), "--by", "signal",
             "--compressor", "gzip:4", "--page-size", "8MiB", "--workers", str(args.workers)],
            work / "by-signal.h5"),
        "h5repack -S PAGE -G 8388608 -f GZIP=4": (
            ["h5repack", "-S", "PAGE", "-G", "8388608", "-f", "GZIP=4", str(src), str(work / "repack-gzip.h5")],
            work / "repack-gzip.h5"),
    }
    results = run_all(runs, logical)
    report(f"reorder: {src.name}, {logical / 1e9:.2f} GB of data, {args.workers} workers",
           results, "h5repack -S PAGE -G 8388608 -f GZIP=4", logical, "reorder" + suffix(args.rate_factor))


if __name__ == "__main__":
    main()
