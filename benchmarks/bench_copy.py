"""Benchmark `convert --compressor source` (stored chunks copied, never decoded) against
h5repack, which copies HDF5 chunks raw too, in one run, on one sample.

    python benchmarks/bench_copy.py [--shots 250] [--workdir /tmp/layoutkit-bench]

On a synthetic shot archive (250 shots x 70 signals = 2.1 GB of data, deflate with and
without shuffle), each in a fresh process, the page cache warm with the source:
layoutkit convert --chunks source --compressor source, unsharded and with --shards auto;
layoutkit convert with its default zstd:3 (decode and re-encode, for comparison); and
h5repack -S PAGE -G 8388608 (the reference). Reports seconds, MB/s of logical and of
stored bytes, speed against h5repack and peak RSS (table, JSON and PNG under
benchmarks/out/copy.*). Run it on a quiet machine: it measures wall time.
"""

from __future__ import annotations

import shutil

from common import LAYOUTKIT, parse_args, report, run_all, sample, suffix

REFERENCE = "h5repack -S PAGE -G 8388608"


def main() -> None:
    args = parse_args(__doc__)
    src, logical = sample(args.workdir, args.shots, args.signals, args.rate_factor)
    if not shutil.which("h5repack"):
        raise SystemExit("h5repack is the reference: apt-get install -y hdf5-tools")
    work = args.workdir

    def convert(name: str, *extra: str) -> tuple[list[str], object]:
        out = work / f"{name}.zarr"
        return [*LAYOUTKIT, "convert", str(src), str(out), "--workers", str(args.workers),
                *extra], out

    runs = {
        "layoutkit convert --compressor source": convert("copy", "--chunks", "source", "--compressor", "source"),
        "layoutkit convert --compressor source --shards auto": convert(
            "copy-sharded", "--chunks", "source", "--compressor", "source", "--shards", "auto"),
        "layoutkit convert (zstd:3, re-encoded)": convert("zstd"),
        REFERENCE: (["h5repack", "-S", "PAGE", "-G", "8388608", str(src), str(work / "repack.h5")],
                    work / "repack.h5"),
    }
    results = run_all(runs, logical)
    report(f"copy: {src.name}, {logical / 1e9:.2f} GB of data, {args.workers} workers", results, REFERENCE,
           logical, "copy" + suffix(args.rate_factor))


if __name__ == "__main__":
    main()
