"""``python -m layoutkit`` and the ``layoutkit`` command."""

import gc
import os
import sys

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
from layoutkit.cli.core import State, fail  # noqa: E402


def main() -> None:
    """The ``layoutkit`` command. A command that succeeded ends the process at once, as
    mypy's does, once its output is flushed: everything it wrote is closed by then, and
    the interpreter's teardown (freeing every object of a large walk, HDF5's own close)
    took 0.2 s of a 6 s convert. A failure exits as usual."""
    try:
        app(prog_name="layoutkit")
    except SystemExit as done:
        if done.code in (None, 0):
            _exit_now()
        if done.code == 130 and not State.failed:
            # an interrupt before a command's own handling began (while it imports) or in
            # one that writes nothing: typer ends it with 130 and not a word
            fail("interrupted.", 130)
        raise


def _exit_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to say
            pass
    os._exit(0)


if __name__ == "__main__":  # spawned worker processes import this module too
    main()
