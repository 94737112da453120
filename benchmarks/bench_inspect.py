"""Benchmark `layoutkit inspect` against `h5stat -S`, and against the least any h5py walk does.

    python benchmarks/bench_inspect.py [--shots 250] [--repeat 3]

Each in a fresh process, the sample in the page cache, median of --repeat runs:

- ``layoutkit inspect SRC``: the whole command (start-up, walk, chunk indexes, dimension
  scales read and compared by content, report);
- ``h5stat -S SRC``: HDF5's own tool, in C;
- the h5py floor (``benchmarks/h5py_walk.py``): import h5py, visit every object with
  its header info, open every dataset and ask for its layout, filters, shape, type and
  storage size. No chunk index, no scale contents, no report: no inspection through h5py
  can take less;
- when pyfive is installed (``pip install pyfive``), a pure-Python reader of the HDF5
  format walking the same objects (``benchmarks/pyfive_walk.py``): what an HDF5 metadata
  reader of our own, written in Python, would start from.

Also prints where inspect's own time goes (the walk, chunk indexes, scales) from one
in-process run. Results: benchmarks/out/inspect.{txt,json}.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import statistics
import time
from pathlib import Path

from common import HERE, PY, measure, parse_args, sample, suffix


def main() -> None:
    args = parse_args(__doc__, lambda p: p.add_argument("--repeat", type=int, default=3))
    if not shutil.which("h5stat"):
        raise SystemExit("h5stat is needed as the reference: apt-get install hdf5-tools")
    src, logical = sample(args.workdir, args.shots, args.signals, args.rate_factor)
    nothing = args.workdir / "inspect-writes-nothing"
    runs = {
        "layoutkit inspect (2 walker processes, the default)": [PY, "-m", "layoutkit", "inspect", str(src)],
        "layoutkit inspect --workers 1": [PY, "-m", "layoutkit", "inspect", str(src), "--workers", "1"],
        "h5stat -S": ["h5stat", "-S", str(src)],
        "h5py floor (walk + open every dataset)": [PY, str(HERE / "h5py_walk.py"), str(src)],
    }
    if importlib.util.find_spec("pyfive") is not None:
        runs["pyfive, pure Python (walk, no chunk index)"] = [PY, str(HERE / "pyfive_walk.py"), str(src)]
    results = {}
    for label, cmd in runs.items():
        times = [measure(cmd, nothing, logical)["seconds"] for _ in range(args.repeat)]
        results[label] = {"seconds": statistics.median(times), "runs": times}
        print(f"{label}: {results[label]['seconds']:.2f} s", flush=True)
    stages = _stages(src)
    base = results["h5stat -S"]["seconds"]
    lines = [f"# inspect: {src.name}, median of {args.repeat}, each in a fresh process",
             f"# command: benchmarks/bench_inspect.py --shots {args.shots} --signals {args.signals}", "",
             "| method | seconds | x h5stat -S |", "|---|---:|---:|"]
    lines += [f"| {k} | {r['seconds']:.2f} | {r['seconds'] / base:.1f}x |" for k, r in results.items()]
    lines += ["", "inspect's own time, in process: " + ", ".join(f"{k} {v:.2f} s" for k, v in stages.items())]
    text = "\n".join(lines)
    print("\n" + text)
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    name = "inspect" + suffix(args.rate_factor)
    (out / f"{name}.txt").write_text(text + "\n")
    (out / f"{name}.json").write_text(json.dumps({"results": results, "stages": stages}, indent=2))


def _stages(src: Path) -> dict[str, float]:
    """inspect in this process (one process, no walkers), whole and without the scales'
    contents in turn."""
    from layoutkit.inspect import hdf5 as li
    from layoutkit.inspect import inspect_path

    def timed() -> float:
        t0 = time.perf_counter()
        inspect_path(src, workers=1)
        return time.perf_counter() - t0

    timed()  # imports and the file's metadata in the page cache
    whole = timed()
    content = li._scale_content
    li._scale_content = lambda *a: None
    no_scales = timed()
    li._scale_content = content
    return {"whole": whole, "dimension scales (read, hashed, attributes)": whole - no_scales,
            "walk, properties and chunk indexes": no_scales}


if __name__ == "__main__":
    main()
