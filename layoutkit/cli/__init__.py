"""The ``layoutkit`` command line: parse, call the library, print. Nothing else.

One module per command (typer's "one file per command"), each adding its command to
the one group in :mod:`layoutkit.cli.core`; each imports the library it calls when it
runs, so every command starts with only what it needs. Every expected failure is a
:class:`~layoutkit.errors.LayoutkitError`, printed as one plain sentence with exit
status 2 (1 for ``verify`` mismatches).
"""

from layoutkit.cli import advise, convert, inspect, recipes, reorder, sample, trace, verify  # noqa: F401 - they register
from layoutkit.cli.core import app

__all__ = ["app"]
