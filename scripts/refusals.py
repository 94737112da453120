"""How many files convert, and why the others are refused: the count issue 65 asks for,
over the files at hand, by any tree of layoutkit (so the same files can be counted before
and after a change).

    python scripts/refusals.py [--tree DIR] [--layout mirror|virtual] [--types] [PATH ...]

Each HDF5 or netCDF-4 file under the PATHs (folders are searched) is converted with
``layoutkit -q convert FILE OUT`` (Zarr v3, the default options; ``--layout virtual``
for the virtual layout) in a fresh process, with ``--tree``'s ``layoutkit`` first on
``PYTHONPATH`` when given (an older commit's worktree). ``--types`` adds one file for each
type of tests/test_every_type.py's table (built with its own builders). A refusal is
counted by the feature its one sentence names (``... uses FEATURE``); the verdict of
every file, and the count per feature, are printed as Markdown tables. What converts is
not proven here: verify and the tests do that.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

SUFFIXES = (".h5", ".hdf5", ".nc", ".he5", ".h5ad")
ROOT = Path(__file__).resolve().parent.parent
# the features as the table groups them (the sentence's words, first match wins)
GROUPS = (
    ("the HDF5 array type", "the HDF5 array type"),
    ("array member", "a compound with an array member"),
    ("variable-length member", "a compound with a variable-length string or nested member"),
    ("variable-length sequence", "variable-length sequences (ragged arrays)"),
    ("virtual dataset", "an HDF5 virtual dataset (VDS)"),
    ("committed datatype", "attributes on a committed datatype"),
    ("region reference", "region references"),
    ("backslash", "a backslash in a name"),
    ("external raw storage", "external raw storage"),
    ("long double", "long double"),
    ("references inside a compound", "object references inside a compound"),
)


def files_under(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        found += sorted(q for q in p.rglob("*") if q.is_file() and q.suffix in SUFFIXES) if p.is_dir() else [p]
    return found


def typed_files(folder: Path) -> list[Path]:
    """One file per builder of tests/test_every_type.py's table (its own builders)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import test_every_type as t

    out = []
    for builder in t.CASES:
        out.append(t.build(folder, builder))
    return out


def verdict(src: Path, work: Path, layout: str, env: dict[str, str]) -> str:
    out = work / ("out.icechunk" if layout == "virtual" else "out.zarr")
    # -P: `python -m` would put the working folder first on sys.path, ahead of --tree
    args = [sys.executable, "-P", "-m", "layoutkit", "-q", "convert", str(src), str(out)]
    if layout == "virtual":
        args += ["--layout", "virtual"]
    try:
        run = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    except subprocess.TimeoutExpired:
        return "timed out"
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if run.returncode == 0:
        return "converts"
    said = " ".join((run.stdout + run.stderr).split())
    m = re.search(r"error: (.*)", said)
    return "refused: " + (m[1] if m else said[-200:])


def group(text: str) -> str:
    if not text.startswith("refused"):
        return text
    for words, name in GROUPS:
        if words in text:
            return name
    m = re.search(r"uses (.*?)(?:[.;(]|$)", text)
    return m[1].strip() if m else text[len("refused: "):][:80]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--tree", type=Path, help="a layoutkit tree to run (first on PYTHONPATH)")
    parser.add_argument("--layout", default="mirror", choices=("mirror", "virtual"))
    parser.add_argument("--types", action="store_true", help="add one file per type of tests/test_every_type.py")
    args = parser.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = str((args.tree or ROOT).resolve())
    with tempfile.TemporaryDirectory(prefix="layoutkit-refusals-") as tmp:
        work = Path(tmp)
        (work / "types").mkdir()
        files = files_under(args.paths) + (typed_files(work / "types") if args.types else [])
        verdicts = {}
        for i, src in enumerate(files, 1):
            verdicts[src] = verdict(src, work, args.layout, env)
            print(f"[{i}/{len(files)}] {src.name}: {verdicts[src][:120]}", file=sys.stderr, flush=True)
    print(f"| file | {args.layout} |\n|---|---|")
    for src, v in verdicts.items():
        print(f"| {src.name} | {v.replace('|', '/')} |")
    counts = Counter(group(v) for v in verdicts.values())
    print(f"\n{len(files)} files; layoutkit from {args.tree or 'this tree'}\n")
    print("| verdict | files |\n|---|---:|")
    for name, n in counts.most_common():
        print(f"| {name} | {n} |")


if __name__ == "__main__":
    main()
