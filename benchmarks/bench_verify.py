"""The read patterns on a shot archive and its layouts, with and without simulated
object-store latency (issue 4).

    .venv/bin/python benchmarks/bench_verify.py [--shots 125] [--signals 70]

Writes (once) a sample of at least 1 GB and its variants: `reorder --by shot`,
`reorder --by signal` and `convert` (shot-major Zarr; the signal-major Zarr too when
this layoutkit has `convert --order signal`). Then runs `layoutkit verify` twice, on a
quiet machine:

1. no latency: equality, then every pattern, 1 and 2 worker processes, page buffer 0
   and 64 MiB, cold cache, 3 repeats;
2. 10 ms per request: shot, signal and subset (a scan of every array at 10 ms per
   request would take most of an hour on the source alone), K=3, 1 and 2 worker
   processes, page buffer 0 and 64 MiB, 1 repeat;
3. 10 ms per request, open: one worker, page buffer 64 MiB where it applies.

Results land in benchmarks/out/verify-0ms/, verify-10ms/ and verify-10ms-open/
(results.csv/json, plots). `--prepare-only` writes the files and stops.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from common import HERE, PY, parse_args, sample


def layoutkit(*args: object) -> None:
    subprocess.run([PY, "-m", "layoutkit", *map(str, args)], check=True)


def has_signal_order() -> bool:
    out = subprocess.run([PY, "-m", "layoutkit", "convert", "--help"], capture_output=True, text=True)
    return "--order" in out.stdout


def main() -> None:
    args = parse_args(__doc__, extra=lambda p: p.add_argument("--prepare-only", action="store_true"))
    args.shots = args.shots if args.shots != 250 else 125  # the shared default is the 2 GB convert sample
    work = args.workdir
    src, logical = sample(work, args.shots, args.signals)
    print(f"sample {src}: {logical / 1e9:.2f} GB of data", flush=True)
    stem = src.stem
    variants = {
        work / f"{stem}-by-shot.h5": ("reorder", "--by", "shot"),
        work / f"{stem}-by-signal.h5": ("reorder", "--by", "signal"),
        work / f"{stem}-shot-major.zarr": ("convert",),
    }
    if has_signal_order():
        variants[work / f"{stem}-signal-major.zarr"] = ("convert", "--layout", "signal-major", "--shards", "auto")
    for path, (command, *options) in variants.items():
        if not path.exists():
            print(f"writing {path.name} ...", flush=True)
            layoutkit("-q", command, src, path, *options)
    if args.prepare_only:
        return
    common = ["verify", src, *variants, "--engine", "processes", "--page-buffer", "0,64MiB"]
    out = HERE / "out"
    layoutkit(*common, "--workers", "1,2", "--repeat", "3", "--out", out / "verify-0ms")
    layoutkit(
        *common, "--no-check", "--latency", "10ms", "--workers", "1,2", "--sample", "3", "--repeat", "1",
        "--patterns", "shot,signal,subset", "--out", out / "verify-10ms",
    )  # fmt: skip
    # opening lists every array: at 10 ms a request, thousands of metadata reads on the
    # files without a page buffer; one worker, and the page buffer on where it applies
    layoutkit(
        "verify", src, *variants, "--no-check", "--engine", "processes", "--latency", "10ms", "--workers", "1",
        "--page-buffer", "64MiB", "--repeat", "1", "--patterns", "open", "--out", out / "verify-10ms-open",
    )  # fmt: skip
    for name in ("verify-0ms", "verify-10ms", "verify-10ms-open"):
        print(f"\n{name}\n" + markdown(out / name / "results.csv"))


def markdown(results: Path, workers: str = "1") -> str:
    """A pattern x variant table of one worker's runs: seconds (requests), each paged
    HDF5 variant without and with its page buffer."""
    rows = [r for r in csv.DictReader(open(results)) if r["workers"] == workers]
    columns: list[tuple[str, str]] = []
    for r in rows:
        key = (r["variant"], r["page_buffer"])
        if key not in columns:
            columns.append(key)
    source = rows[0]["variant"] if rows else ""
    stem = source.rsplit(".", 1)[0] + "-"

    def name(variant: str) -> str:
        return "source" if variant == source else variant.removeprefix(stem)

    label = {k: name(k[0]) + (" +PB" if k[1] not in ("", "0") else "") for k in columns}
    lines = ["| pattern | " + " | ".join(label[k] for k in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for pattern in dict.fromkeys(r["pattern"] for r in rows):
        cells = []
        for k in columns:
            r = next((r for r in rows if r["pattern"] == pattern and (r["variant"], r["page_buffer"]) == k), None)
            cells.append(f"{float(r['seconds']):.2f} s ({int(r['requests']):,})" if r else "")
        lines.append(f"| {pattern} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
