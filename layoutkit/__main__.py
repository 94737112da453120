"""``python -m layoutkit`` and the ``layoutkit`` command."""

import gc
import os

# A run builds hundreds of thousands of small objects (imports, the walk of a shot
# archive, the skeleton's documents), few of them garbage, and the collector's default
# of a pass per 2,000 new objects traversed them again and again: 0.2 s of CPU of a
# convert of a 40-shot sample (A/B, 4 runs each). A pass per 100,000, as mypy does; the
# walker processes, which import this module, too.
gc.set_threshold(100_000, 50, 100)

# layoutkit does no linear algebra worth a thread: numpy's OpenBLAS otherwise starts one
# per core in each process and they spin as it starts, 0.1 s of CPU a process here (a
# convert of a large file runs three: itself and two walkers, which inherit this). A
# value the user set stays.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from layoutkit.cli import app  # noqa: E402 - after the environment its imports read


def main() -> None:
    app(prog_name="layoutkit")


if __name__ == "__main__":  # spawned worker processes import this module too
    main()
