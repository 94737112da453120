"""The reader of shot-major Zarr: every dataset at its own path, read by zarr (and, for
whole chunks of numbers, by layoutkit's direct reads: :mod:`layoutkit.readers.zarr_`)."""

from __future__ import annotations

from typing import Any

from layoutkit.layouts.shot_major.spec import LAYOUT_NAME
from layoutkit.readers.zarr_ import ZarrArchive


class ShotMajorArchive(ZarrArchive):
    """A Zarr store that mirrors the HDF5 hierarchy: ``convert``'s default layout, and any
    Zarr store that records no layoutkit layout."""

    layout = LAYOUT_NAME


def open_archive(location: Any, *, template: str, model: Any = None, sleep: Any = None, page_buffer: int | None = None,
                 root: Any = None) -> ShotMajorArchive:
    """The reader of a store of this layout (:meth:`layoutkit.layout.Layout.open`)."""
    return ShotMajorArchive(location, template, model, sleep, root=root)


__all__ = ["open_archive", "ShotMajorArchive"]
