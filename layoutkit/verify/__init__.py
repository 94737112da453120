"""Verification: equality of variants with their source, and read-pattern measurements."""

from layoutkit.verify.equality import Mismatch, compare_hdf5, compare_zarr

__all__ = ["Mismatch", "compare_hdf5", "compare_zarr"]
