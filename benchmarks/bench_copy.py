"""Benchmark `convert --compressor source` (stored chunks copied, never decoded) against
h5repack, which copies HDF5 chunks raw too, in one run, on one sample.

    python benchmarks/bench_copy.py [--shots 250] [--workdir /tmp/layoutkit-bench] [--cache warm|cold]
        [--copies-only]

On a synthetic shot archive (250 shots x 70 signals = 2.1 GB of data, deflate with and
without shuffle), each in a fresh process, after the last run's writes are flushed to
disk (``sync``, and 2 s for its writeback to settle; every output is removed before the
first run and after the last, not between runs), the source in the page cache (``--cache warm``, the default) or evicted
from it before each run (``--cache cold``):
layoutkit convert --chunks source --compressor source, unsharded and with --shards auto;
layoutkit convert with its default zstd:3 (decode and re-encode, for comparison; not
with ``--copies-only``); and
h5repack -S PAGE -G 8388608 (the reference). Reports seconds, MB/s of logical and of
stored bytes, speed against h5repack and peak RSS (table, JSON and PNG under
benchmarks/out/copy.*). Run it on a quiet machine: it measures wall time.
"""

from __future__ import annotations

import os
import shutil
import time

from common import LAYOUTKIT, parse_args, report, run_all, sample, suffix

REFERENCE = "h5repack -S PAGE -G 8388608"


def main() -> None:
    def extra(parser) -> None:  # noqa: ANN001 - argparse.ArgumentParser
        parser.add_argument("--cache", choices=("warm", "cold"), default="warm")
        parser.add_argument("--copies-only", action="store_true", help="leave out the re-encoding run")

    args = parse_args(__doc__, extra)
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
    if args.copies_only:
        del runs["layoutkit convert (zstd:3, re-encoded)"]

    def before() -> None:
        # the last run's output on disk, its writeback settled: it does not fall on this run (deleting a
        # store of 15,000 objects just before a run made the run's file creations up to 10x slower here)
        os.sync()
        time.sleep(2)
        if args.cache == "cold":
            fd = os.open(src, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

    outputs = [target for _, target in runs.values()]
    for target in outputs:  # removed first, not between the runs (see before)
        shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
    results = run_all(runs, logical, before=before)
    for target in outputs:
        shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
    name = "copy" + suffix(args.rate_factor) + ("-cold" if args.cache == "cold" else "")
    report(f"copy: {src.name}, {logical / 1e9:.2f} GB of data, {args.workers} workers, source {args.cache}", results,
           REFERENCE, logical, name)


if __name__ == "__main__":
    main()
