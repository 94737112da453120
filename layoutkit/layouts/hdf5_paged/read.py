"""The reader of paged HDF5: h5py, with HDF5's page buffer when asked
(:class:`layoutkit.readers.hdf5.HDF5Archive`, the reader of every HDF5 file)."""

from __future__ import annotations

from typing import Any

from layoutkit.readers.hdf5 import HDF5Archive


def open_archive(location: Any, *, template: str, model: Any = None, sleep: Any = None, page_buffer: int | None = None,
                 root: Any = None) -> HDF5Archive:
    """The reader of a file of this layout (:meth:`layoutkit.layout.Layout.open`)."""
    return HDF5Archive(location, template, model, page_buffer, sleep)


__all__ = ["open_archive"]
