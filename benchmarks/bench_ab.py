"""Is this tree slower than an earlier commit? convert and reorder, A/B, in one run.

    python benchmarks/bench_ab.py --ref 1f2c4d4 [--shots 100] [--repeat 4] \
        [--rate-factor 10] [--reorder-args "--compressor gzip:4"] [--convert-args "..."]

Checks out REF into a git worktree (under the working folder), then times `layoutkit
convert` (Zarr v3, zstd:3, 2 workers) and `layoutkit reorder --by signal` on one sample
with each tree, each run in a fresh process, in the order ref, this, this, ref (repeated),
so drift on a shared machine falls on both alike. Prints every time, the medians and the
ratio (this / ref: below 1 is faster). For refactors that must not cost speed.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
from pathlib import Path

from common import PY, measure, parse_args, ref_tree, sample

THIS_TREE = Path(__file__).resolve().parent.parent


def main() -> None:
    def extra(parser) -> None:  # noqa: ANN001 - argparse.ArgumentParser
        parser.add_argument("--ref", required=True, help="The commit to compare with.")
        parser.add_argument("--repeat", type=int, default=4)
        parser.add_argument("--convert-args", default="", help="More convert options, one string.")
        parser.add_argument("--reorder-args", default="", help='More reorder options, e.g. "--compressor gzip:4".')

    args = parse_args(__doc__, extra)
    args.workdir.mkdir(parents=True, exist_ok=True)
    ref, tree = ref_tree(args.workdir, args.ref)
    src, logical = sample(args.workdir, args.shots, args.signals, args.rate_factor)
    convert_args, reorder_args = shlex.split(args.convert_args), shlex.split(args.reorder_args)
    commands = {
        " ".join(["convert", *convert_args]):
            lambda out: ["convert", str(src), str(out), "--workers", str(args.workers), *convert_args],
        " ".join(["reorder --by signal", *reorder_args]):
            lambda out: ["reorder", str(src), str(out), "--by", "signal", "--workers", str(args.workers), *reorder_args],
    }
    times: dict[tuple[str, str], list[float]] = {}
    digests: dict[tuple[str, str], set[str]] = {}
    for name, make in commands.items():
        out = args.workdir / ("ab.zarr" if name.startswith("convert") else "ab.h5")
        for _ in range(args.repeat):
            for side in ("ref", "this", "this", "ref"):
                # each side's tree first on sys.path, and -P: `python -m` puts the working folder
                # first otherwise, and run from a checkout, that checkout's layoutkit shadowed the
                # ref tree (every A/B run from the repository's root compared this tree with itself)
                os.environ["PYTHONPATH"] = str(tree) if side == "ref" else str(THIS_TREE)
                r = measure([PY, "-P", "-m", "layoutkit", "-q", *make(out)], out, logical)
                times.setdefault((name, side), []).append(r["seconds"])
                digests.setdefault((name, side), set()).add(digest(out))
                print(f"{name:20} {side:4} {r['seconds']:7.2f} s", flush=True)
    os.environ.pop("PYTHONPATH", None)
    print(f"\n{src.name}, {logical / 1e9:.2f} GB of data; ref {ref}\n")
    print("| command | ref median | this median | this / ref | runs each | output bytes |")
    print("|---|---:|---:|---:|---:|---|")
    for name in commands:
        a, b = statistics.median(times[(name, "ref")]), statistics.median(times[(name, "this")])
        ref_d, this_d = digests[(name, "ref")], digests[(name, "this")]
        same = ("identical" if ref_d == this_d and len(ref_d) == 1 else
                "differ between runs" if len(ref_d) > 1 or len(this_d) > 1 else "differ from ref")
        print(f"| {name} | {a:.2f} s | {b:.2f} s | {b / a:.3f} | {len(times[(name, 'ref')])} | {same} |")


def digest(out: Path) -> str:
    """BLAKE3 of an output's bytes (a folder: every file's relative path and bytes, in
    order), to say whether both trees write the same output byte for byte."""
    import blake3

    h = blake3.blake3()
    files = sorted(p for p in out.rglob("*") if p.is_file()) if out.is_dir() else [out]
    for f in files:
        h.update(str(f.relative_to(out) if out.is_dir() else f.name).encode())
        with open(f, "rb") as fh:
            while block := fh.read(16 << 20):
                h.update(block)
    return h.hexdigest()


if __name__ == "__main__":
    sys.exit(main())
