"""The readers behind :func:`layoutkit.open`, one module per format and layout, as the
writers are under :mod:`layoutkit.writers`:

- :mod:`~layoutkit.readers.base`: the :class:`~layoutkit.readers.base.Archive` interface
  they share, and the building of xarray objects from what a layout stores;
- :mod:`~layoutkit.readers.hdf5`: HDF5 sources and ``reorder`` outputs;
- :mod:`~layoutkit.readers.zarr_`: shot-major Zarr, the mirror of the HDF5 hierarchy;
- :mod:`~layoutkit.layouts.signal_major.read`: signal-major Zarr;
- :mod:`~layoutkit.layouts.shot_packed.read`: shot-packed Zarr.

:mod:`layoutkit.archive` is their registry and entry point.
"""
