"""layoutkit: file-layout conversion and optimisation for scientific HDF5 data."""

import sys as _sys

__version__ = "0.1.0"


def _started_as_the_command() -> bool:
    """``python -m layoutkit ...`` or the ``layoutkit`` script (not a program importing it)."""
    argv = getattr(_sys, "orig_argv", [])
    if "-m" in argv:
        return argv[argv.index("-m") + 1 : argv.index("-m") + 2] == ["layoutkit"]
    return len(argv) > 1 and argv[1].replace("\\", "/").rsplit("/", 1)[-1] in ("layoutkit", "layoutkit.exe")


if _started_as_the_command():
    # Ctrl-C or SIGTERM while the command is still starting (the imports below take half a
    # second), before it has written anything, ends it with one sentence, not a traceback;
    # the command installs its own handling once it runs (layoutkit.cli.main).
    import os as _os
    import signal as _signal

    def _quiet_exit(signum: int, frame: object) -> None:
        _sys.stderr.write("error: interrupted; nothing was written.\n")
        _os._exit(130)

    _signal.signal(_signal.SIGINT, _quiet_exit)
    _signal.signal(_signal.SIGTERM, _quiet_exit)

from layoutkit.archive import Archive  # noqa: E402
from layoutkit.archive import open_archive as open  # noqa: E402
from layoutkit.convert import ConvertOptions, convert, plan_convert  # noqa: E402
from layoutkit.errors import LayoutkitError  # noqa: E402

__all__ = ["Archive", "ConvertOptions", "LayoutkitError", "__version__", "convert", "open", "plan_convert"]
