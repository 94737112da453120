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
    # Ctrl-C or SIGTERM while the command is still starting (its imports take a quarter of a
    # second), before it has written anything, ends it with one sentence, not a traceback;
    # the command installs its own handling once it runs (layoutkit.cli.main).
    import os as _os
    import signal as _signal

    def _quiet_exit(signum: int, frame: object) -> None:
        _sys.stderr.write("error: interrupted; nothing was written.\n")
        _os._exit(130)

    _signal.signal(_signal.SIGINT, _quiet_exit)
    _signal.signal(_signal.SIGTERM, _quiet_exit)

import types as _types  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

from layoutkit.errors import LayoutkitError  # noqa: E402

if TYPE_CHECKING:  # what _LAZY imports on first use, for type checkers and editors
    from layoutkit.api import advise, append, convert, inspect, reorder, verify
    from layoutkit.archive import Archive
    from layoutkit.archive import open_archive as open
    from layoutkit.convert import ConvertOptions, plan_convert
    from layoutkit.layouts.hdf5_paged.options import ReorderOptions
    from layoutkit.reorder import plan_reorder

# The public API is imported on first use (PEP 562), so that every command starts with
# only what it needs: convert brings the layouts and zarr (0.16 s), layoutkit.open
# brings xarray and pandas (0.2 s); `layoutkit inspect` needs neither.
_LAZY = {
    # one call per command (layoutkit.api), by the command's name
    "convert": ("layoutkit.api", "convert"),
    "reorder": ("layoutkit.api", "reorder"),
    "append": ("layoutkit.api", "append"),
    "verify": ("layoutkit.api", "verify"),
    "inspect": ("layoutkit.api", "inspect"),
    "advise": ("layoutkit.api", "advise"),
    "plan_convert": ("layoutkit.convert", "plan_convert"),
    "plan_reorder": ("layoutkit.reorder", "plan_reorder"),
    "ConvertOptions": ("layoutkit.convert", "ConvertOptions"),
    "ReorderOptions": ("layoutkit.layouts.hdf5_paged.options", "ReorderOptions"),
    "Archive": ("layoutkit.archive", "Archive"),
    "open": ("layoutkit.archive", "open_archive"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'layoutkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(_types.ModuleType):
    """The package, whose ``convert``, ``reorder``, ``verify``, ``inspect`` and ``advise``
    are the functions, never the submodules of those names.

    Importing a submodule binds it as an attribute of its package. When something imports
    ``layoutkit.verify`` (the package) before anyone asked for ``layoutkit.verify`` (the
    function), that binding would put the module where the function belongs; it is
    dropped here, and the function is found on first use as the others are. (So write
    ``from layoutkit.verify import run``, not ``import layoutkit.verify.run as run``,
    which looks the name up on the package.)"""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _LAZY and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package

__all__ = ["Archive", "ConvertOptions", "LayoutkitError", "ReorderOptions", "__version__", "advise", "append", "convert",
           "inspect", "open", "plan_convert", "plan_reorder", "reorder", "verify"]
