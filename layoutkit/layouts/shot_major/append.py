"""Appending shots to a shot-major store: the new shots' nodes are objects of their own,
added at their paths; the root document's consolidated metadata lists them too
(:func:`layoutkit.merging.mirrored_merge`)."""

from __future__ import annotations

from typing import Any

from layoutkit.merging import Merge, StoreDocs, mirrored_merge


def merge(old: StoreDocs, new: StoreDocs, options: Any) -> Merge:
    return mirrored_merge(old, new, options.template)


__all__ = ["merge"]
