"""A shot archive through every layout layoutkit writes, then ``verify`` on all of them.

    python examples/shot_archive_all_layouts.py [WORKDIR] [--shots 4]

Every layout in the registry (``layoutkit.layouts.LAYOUTS``) writes the sample through
the same pipeline; verify proves each variant equal to the source and times the read
patterns at a simulated 10 ms per request, where the layouts differ most.
"""

import argparse
import tempfile
from pathlib import Path

from rich.console import Console

from layoutkit import pipeline
from layoutkit.convert import ConvertOptions
from layoutkit.layouts import LAYOUTS
from layoutkit.options import parse_shards
from layoutkit.reorder import ReorderOptions
from layoutkit.sample import write_sample
from layoutkit.verify import report
from layoutkit.verify.run import VerifyOptions, verify

OPTIONS = {  # options of some layouts (the others write with their defaults); the registry says which command
    "shot-major": ConvertOptions(),
    "signal-major": ConvertOptions(layout="signal-major", shards=parse_shards("auto")),
    "shot-packed": ConvertOptions(layout="shot-packed"),
    "hdf5-paged": ReorderOptions(by="signal"),
}


def main(work: Path, shots: int) -> None:
    src = Path(write_sample(work / "shots.h5", shots=shots, signals=30).path)
    variants = []
    for name, layout in LAYOUTS.items():
        if "local" in layout.destinations:
            dst = work / f"{name}{'.h5' if layout.target == 'hdf5-paged' else '.zarr'}"
            where = str(dst)
        else:  # a layout that writes an Icechunk repository (virtual: references to the source's chunks)
            dst = work / f"{name}.icechunk"
            where = f"icechunk:{dst}"
        summary = pipeline.run(layout, src, dst, OPTIONS.get(name) or layout.default_options())
        print(f"{name:12} ({layout.command}): {summary.dest_bytes / 1e6:6.1f} MB  {layout.description}")
        variants.append(where)
    result = verify(src, variants, VerifyOptions(patterns="open,shot,signal", latencies=(0.010,), repeat=1, sample=2))
    assert not any(result.mismatches.values()), result.mismatches
    print(f"all {len(variants)} variants hold exactly the data of {src.name}")
    console = Console(width=160)
    console.print(report.answer_table(result.results, result.variants[0].name))
    console.print(report.table(result.results, "every measurement, at 10 ms per request"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workdir", nargs="?", type=Path)
    parser.add_argument("--shots", type=int, default=4)
    args = parser.parse_args()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        main(args.workdir, args.shots)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp), args.shots)
