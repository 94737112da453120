"""``python -m layoutkit`` and the ``layoutkit`` command."""

import os

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
