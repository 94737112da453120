"""The command pages' option tables, made from the commands themselves.

Each page under ``docs/commands/`` holds, between ``<!-- options: NAME -->`` and
``<!-- /options -->``, the table :func:`option_table` makes from the command's own
parameters (their names, values, defaults and help, as ``--help`` prints them), so a page
cannot list an option the command lacks or miss one it has: ``tests/test_docs.py``
compares them, and ``python -m layoutkit.cli.option_tables`` writes them again.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

MARK = re.compile(r"(<!-- options: (?P<name>[a-z ]+) -->\n)(?P<table>.*?)(<!-- /options -->)", re.S)


def _command(name: str) -> Any:
    import typer

    from layoutkit.cli import app

    group = typer.main.get_command(app)
    command: Any = group
    ctx = typer.Context(group)
    for part in name.split():
        command = command.get_command(ctx, part)
    return command, ctx


def option_table(name: str) -> str:
    """The markdown table of the options of ``layoutkit NAME`` (hidden ones left out)."""
    command, ctx = _command(name)
    rows = ["| option | value | default | what it does |", "|---|---|---|---|"]
    for param in command.params:
        if param.param_type_name != "option" or param.hidden or param.name == "help":
            continue
        names = " / ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        value = "" if param.is_flag else f"`{param.display_type_rich(ctx)}`"
        default = param.default
        shown = ("" if default in (None, "", (), []) or param.is_flag and default is False
                 else f"`{str(default).lower() if isinstance(default, bool) else default}`")
        text = " ".join((param.help or "").split()).replace("|", "\\|")
        rows.append(f"| {names} | {value.replace('|', chr(92) + '|')} | {shown.replace('|', chr(92) + '|')} | {text} |")
    return "\n".join(rows) + "\n"


def refresh(page: Path, write: bool) -> list[str]:
    """The commands whose table on ``page`` is not what the command says (written anew
    with ``write``)."""
    text = page.read_text()
    stale = []

    def fill(match: re.Match[str]) -> str:
        table = option_table(match.group("name"))
        if table != match.group("table"):
            stale.append(match.group("name"))
        return match.group(1) + table + match.group(4)

    new = MARK.sub(fill, text)
    if write and new != text:
        page.write_text(new)
    return stale


if __name__ == "__main__":  # python -m layoutkit.cli.option_tables docs/commands/*.md
    for path in sys.argv[1:]:
        print(path, refresh(Path(path), write=True) or "up to date")
