"""The reader of a virtual store: the shot-major hierarchy, read through Icechunk,
which follows each chunk's reference into its source file (the repository's virtual
chunk containers authorised when it is opened,
:func:`~layoutkit.storage.icechunk_repo.open_repository`). A chunk of a source that
changed since it was referenced is refused by name
(:class:`~layoutkit.errors.SourceChangedError`)."""

from __future__ import annotations

from typing import Any

from layoutkit.layouts.virtual.spec import LAYOUT_NAME
from layoutkit.readers.zarr_ import ZarrArchive


class VirtualArchive(ZarrArchive):
    """An Icechunk repository of references to the sources' chunks."""

    layout = LAYOUT_NAME


def open_archive(location: Any, *, template: str, model: Any = None, sleep: Any = None, page_buffer: int = 0,
                 root: Any = None) -> VirtualArchive:
    """The reader of a store of this layout (:meth:`layoutkit.layout.Layout.open`)."""
    return VirtualArchive(location, template, model, sleep, root=root)


__all__ = ["VirtualArchive", "open_archive"]
