"""Benchmark `layoutkit convert` against the references, in one run, on one sample.

    python benchmarks/bench_convert.py [--shots 250] [--workdir /tmp/layoutkit-bench]

On a synthetic shot archive (250 shots x 70 signals = 2.2 GB of data by default), each
in a fresh process: layoutkit convert (Zarr v3, zstd:3, 2 workers); a plain
h5py-to-zarr loop (zarr.create_array per dataset, a[...] = ds[...], zstd:3); and
h5repack -S PAGE -G 8388608 (an HDF5 copy: the I/O reference). Reports MB/s of
logical data, ratios against the plain loop, and peak RSS (table, JSON and PNG under
benchmarks/out/). Run it on a quiet machine: it measures wall time.
"""

from __future__ import annotations

import shutil

from common import HERE, LAYOUTKIT, PY, parse_args, report, run_all, sample, suffix


def main() -> None:
    args = parse_args(__doc__)
    src, logical = sample(args.workdir, args.shots, args.signals, args.rate_factor)
    work = args.workdir
    runs = {
        "layoutkit convert": ([*LAYOUTKIT, "convert", str(src), str(work / "layoutkit.zarr"),
                               "--workers", str(args.workers)], work / "layoutkit.zarr"),
        "plain h5py->zarr loop": ([PY, str(HERE / "plain_loop.py"), str(src), str(work / "plain.zarr")],
                                  work / "plain.zarr"),
    }
    if shutil.which("h5repack"):
        runs["h5repack -S PAGE -G 8388608"] = (
            ["h5repack", "-S", "PAGE", "-G", "8388608", str(src), str(work / "repack.h5")], work / "repack.h5")
    results = run_all(runs, logical)
    report(f"convert: {src.name}, {logical / 1e9:.2f} GB of data, {args.workers} workers",
           results, "plain h5py->zarr loop", logical, "convert" + suffix(args.rate_factor))


if __name__ == "__main__":
    main()
