"""A new layout, whole: the npy-folder layout of ``examples/npy_layout/``, registered,
written, read back with ``layoutkit.open`` and proved equal as ``verify`` proves it.

The layout is one package (spec, plan, write, read, compare, its recipe; see its
``__init__``) and one registry line, or installed (``pip install examples/npy_layout``),
its entry point: then ``layoutkit convert SRC OUT --layout npy`` writes it. The
conformance suite every layout runs (:mod:`layoutkit.testing`) runs over it in
``tests/test_pipeline.py`` and, installed, in ``tests/test_plugin.py``.

    python examples/custom_layout.py SRC.h5 OUT_FOLDER
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the package beside this script

from npy_layout import NpyFolder, NpyOptions  # noqa: E402

import layoutkit  # noqa: E402
from layoutkit.layouts import LAYOUTS  # noqa: E402
from layoutkit.verify.equality import compare_variant  # noqa: E402

LAYOUTS[NpyFolder.name] = NpyFolder()  # the one registry line (installed, its entry point does it)


def main(src: str, out: str) -> None:
    summary = layoutkit.convert(src, out, NpyOptions())  # the layout its options name; `--layout npy` installed
    print("\n".join(summary.lines()), f"arrays={summary.arrays}")
    with layoutkit.open(out) as archive:  # found by NpyFolder.guess_can_open
        print(f"layoutkit.open: {type(archive).__name__}, {len(archive.arrays())} arrays, shots {archive.shots[:5]}")
    mismatches = compare_variant(src, out)  # the layout's own comparator, as verify runs it
    print(f"compare: {len(mismatches)} differences")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
