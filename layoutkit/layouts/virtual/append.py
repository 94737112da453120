"""Appending to a virtual store: one Icechunk commit that adds the new files' references.

The new shots are staged as any append stages them (:mod:`layoutkit.appending.append`),
in a local folder, where the writer keeps the references it would set
(:data:`~layoutkit.layouts.virtual.spec.REFS_PREFIX`) and writes the chunks it cannot
reference. The merge moves the new shots' metadata and written chunks in, as the
shot-major merge does, and sets the references in the repository's session before the
commit (:attr:`~layoutkit.merging.Merge.write`): no byte of the new files is read.
"""

from __future__ import annotations

from typing import Any

from layoutkit.layouts.virtual.refindex import attach
from layoutkit.layouts.virtual.spec import REFS_PREFIX, VERSIONS_KEY
from layoutkit.merging import Merge, StoreDocs, mirrored_merge


def merge(old: StoreDocs, new: StoreDocs, options: Any) -> Merge:
    out = mirrored_merge(old, new, options.template)  # moves the shots' keys: the staged references are none
    documents = [k for k in new.keys() if k.startswith(REFS_PREFIX) and k != VERSIONS_KEY]

    if old.session is not None:  # layoutkit's copy of the references, written before the commit
        attach(old.session)

    def write() -> int:
        versions = new.json(VERSIONS_KEY)
        for key in documents:
            for path, chunks in new.json(key).items():
                old.set_refs(path, chunks, versions)  # in the repository, and in layoutkit's copy (.refindex)
        return 0  # references: no byte of data written

    out.write = write if documents else out.write
    return out


__all__ = ["merge"]
