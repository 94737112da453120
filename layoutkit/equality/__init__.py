"""Equality of a variant with its HDF5 source: the comparisons every layout's comparator
is made of (``layouts/<layout>/compare.py``), written from what the formats document, not
from the writers' code.

- :mod:`.values`: values and attributes (:class:`Mismatch`, :func:`equal_values`...);
- :mod:`.zarr_`: a Zarr store that mirrors the source (:func:`compare_zarr`), and a
  store of a packing layout read through its reader (:func:`compare_packed`);
- :mod:`.hdf5`: any HDF5 copy of the source, a paged one included (:func:`compare_hdf5`).
"""

from layoutkit.equality.hdf5 import compare_hdf5
from layoutkit.equality.zarr_ import compare_packed, compare_zarr
from layoutkit.hdf5.values import Mismatch, equal_values

__all__ = ["Mismatch", "compare_hdf5", "compare_packed", "compare_zarr", "equal_values"]
