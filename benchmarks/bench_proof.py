"""What the independent proof costs: verify's equality, this tree against an earlier
commit, with h5diff (the HDF5 library's own comparison) as the reference of the same run.

    python benchmarks/bench_proof.py --ref 8f35c3f [--shots 125] [--repeat 2]

Writes (once) the sample and three variants with this tree (shot-major Zarr,
signal-major Zarr with shards, `reorder --by signal`), then times the proof alone
(`layoutkit.verify.equality.compare_variant`, in a fresh process each) for each variant
with each tree, in the order ref, this, this, ref (repeated), and `h5diff` of the source
against the reorder output. The earlier commits read the source through the converters'
raw chunk reader; this tree reads it through HDF5's own read (worker processes for a
source of 256 MiB or more). Prints every time, the medians and the ratios.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import PY, parse_args, ref_tree, sample

ROOT = Path(__file__).resolve().parents[1]
PROOF = ("import sys; from layoutkit.verify.equality import compare_variant; "
         "found = compare_variant(sys.argv[1], sys.argv[2]); "
         "print(len(found)); sys.exit(1 if found else 0)")


def timed(cmd: list[str], env: dict[str, str], check: bool = True) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=check, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    def extra(parser) -> None:  # noqa: ANN001 - argparse.ArgumentParser
        parser.add_argument("--ref", required=True, help="The commit to compare with.")
        parser.add_argument("--repeat", type=int, default=2)

    args = parse_args(__doc__, extra)
    args.shots = args.shots if args.shots != 250 else 125  # bench_verify's sample
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    ref, tree = ref_tree(work, args.ref)
    src, logical = sample(work, args.shots, args.signals)
    variants = {
        "shot-major Zarr": (work / "proof-shot-major.zarr", ("convert",)),
        "signal-major Zarr, sharded": (work / "proof-signal-major.zarr",
                                       ("convert", "--layout", "signal-major", "--shards", "auto")),
        "reorder --by signal": (work / "proof-by-signal.h5", ("reorder", "--by", "signal")),
    }
    for path, (command, *options) in variants.values():
        if not path.exists():
            subprocess.run([PY, "-m", "layoutkit", "-q", command, str(src), str(path), *options], check=True)
    times: dict[tuple[str, str], list[float]] = {}
    for name, (path, _) in variants.items():
        for _ in range(args.repeat):
            for side in ("ref", "this", "this", "ref"):
                env = {**os.environ, "PYTHONPATH": str(tree) if side == "ref" else str(ROOT)}
                seconds = timed([PY, "-c", PROOF, str(src), str(path)], env)
                times.setdefault((name, side), []).append(seconds)
                print(f"{name:28} {side:4} {seconds:7.2f} s", flush=True)
    # (h5diff exits 1: the output has layoutkit's provenance attribute; it still compares every value)
    h5diff = [timed(["h5diff", str(src), str(variants["reorder --by signal"][0])], dict(os.environ), check=False)
              for _ in range(args.repeat)]
    print(f"\n{src.name}, {logical / 1e9:.2f} GB of data; ref {ref}; h5diff of the source and the reorder "
          f"output: {statistics.median(h5diff):.2f} s\n")
    print("| variant | ref (raw reader) | this (HDF5's read) | this / ref | this / h5diff |")
    print("|---|---:|---:|---:|---:|")
    for name in variants:
        a, b = statistics.median(times[(name, "ref")]), statistics.median(times[(name, "this")])
        print(f"| {name} | {a:.2f} s | {b:.2f} s | {b / a:.2f} | {b / statistics.median(h5diff):.2f} |")


if __name__ == "__main__":
    sys.exit(main())
