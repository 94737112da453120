"""A Griffe extension for the API reference: the Sphinx roles layoutkit's docstrings use
(``:class:`~layoutkit.archive.Archive```, ``:func:``, ``:mod:``, ``:meth:``, ``:attr:``,
``:data:``, ``:exc:``) shown as code, as Sphinx shows them (``~``: the last name only),
instead of their raw text. mkdocstrings renders Markdown, which has no roles."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|mod|meth|attr|data|exc|obj):`(~?)([^`]+)`")


def plain(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        target = match.group(2).strip()
        return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"

    return ROLE.sub(one, text)


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
