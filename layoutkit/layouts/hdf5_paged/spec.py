"""The paged HDF5 layout's names.

A ``reorder`` output is an HDF5 file with the source's hierarchy exactly, written with
the file space strategy PAGE (``H5Pset_file_space_strategy``, paged aggregation) and a
page size that every object and chunk fits; its raw data sits in the order its
provenance records (``"by": "shot"``, ``"signal"`` or ``"group"``). Any HDF5 reader
reads it; a reader with a page buffer (``page_buf_size``) reads whole pages.
"""

from __future__ import annotations

LAYOUT_NAME = "hdf5-paged"
ALIASES: tuple[str, ...] = ()
BY = ("shot", "signal", "group")
"""The byte orders: a shot's datasets together, a signal's of every shot together, or
the hierarchy's order."""

__all__ = ["ALIASES", "BY", "LAYOUT_NAME"]
