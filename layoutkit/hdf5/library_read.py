"""Values as the HDF5 library itself reads them (h5py's ``Dataset`` reads): no raw chunk,
no chunk index of layoutkit's. What decides that data are equal reads through here:
:mod:`layoutkit.equality` (verify's proof) and the check that two files of a set hold
the same dataset (:mod:`layoutkit.hdf5.combined`). The converters' fast path is
:mod:`layoutkit.hdf5.raw`, and nothing here imports it."""

from __future__ import annotations

from collections.abc import Callable

import h5py
import numpy as np

from layoutkit.errors import ChunkDecodeError
from layoutkit.hdf5.attrs import reference_path, reference_text, region_as_text
from layoutkit.hdf5.files import external_values, first_line
from layoutkit.hdf5.model import ArrayInfo, typed_values, with_paths
from layoutkit.plan import Region


def read_block(files: Callable[[int], h5py.File], info: ArrayInfo, region: Region) -> np.ndarray:
    """The values of ``info`` in ``region`` as h5py reads them: strings as text,
    references as the paths they point at (region references as the text of their
    selections), a set's joined array from its parts (decoded
    as xarray decodes them where the files encode them differently). ``files(member)``
    is the open file of a set's member (:attr:`ArrayInfo.member`)."""
    if info.segments is not None:
        return _joined(files, info, region)
    f = files(info.member)
    if info.external:
        with external_values(f, info.in_source) as ds:
            return _values(f, ds, info, region)
    return _values(f, f[info.in_source], info, region)


def _values(f: h5py.File, ds: h5py.Dataset, info: ArrayInfo, region: Region) -> np.ndarray:
    sel = tuple(slice(a, b) for a, b in region) if region else ()
    try:
        if info.kind == "string":
            return np.asarray(ds.asstr()[sel])
        if info.kind == "reference":
            refs = np.asarray(ds[sel], dtype=object)
            return np.vectorize(lambda r: reference_path(f, r), otypes=[object])(refs) if refs.size else refs
        if info.kind == "region-reference":
            refs = np.asarray(ds[sel], dtype=object)
            return np.vectorize(lambda r: region_as_text(f, r), otypes=[object])(refs) if refs.size else refs
        return dataset_values(ds, sel)
    except (OSError, RuntimeError) as exc:
        raise ChunkDecodeError(info.path, tuple(a for a, _ in region), first_line(exc)) from None


def dataset_values(ds: h5py.Dataset, sel: tuple[slice | int, ...]) -> np.ndarray:
    """``ds``'s values in ``sel`` as h5py reads them, as the type rules read them
    (:func:`~layoutkit.hdf5.model.typed_values`: strings in sequences and array types as
    text, sequences in their type's byte order; a scalar's sequence in a 0-d object array,
    where h5py gives the sequence itself), a compound's references as the paths they point at."""
    if not ds.shape and h5py.check_vlen_dtype(ds.dtype) is not None:
        values = np.empty((), dtype=object)
        values[()] = ds[()]
    else:
        values = np.asarray(ds[sel])
    return with_paths(typed_values(values, ds.dtype), ds.dtype, lambda r: reference_text(ds.file, r))


def _joined(files: Callable[[int], h5py.File], info: ArrayInfo, region: Region) -> np.ndarray:
    from layoutkit.hdf5.concat import decode

    (a, b), rest = region[0], tuple(region[1:])
    parts, start = [], 0
    for seg in info.segments or ():
        lo, hi = max(a, start), min(b, start + seg.shape[0])
        if lo < hi:
            data = read_block(files, seg, ((lo - start, hi - start), *rest))
            parts.append(np.asarray(decode(seg, data) if info.unpack else data, dtype=info.dtype))
        start += seg.shape[0]
    if not parts:
        return np.empty((0, *(hi - lo for lo, hi in rest)), dtype=info.dtype)
    return np.concatenate(parts, axis=0)



def read_all(files: Callable[[int], h5py.File], info: ArrayInfo) -> np.ndarray:
    """All of one dataset."""
    return read_block(files, info, tuple((0, n) for n in info.shape))


__all__ = ["dataset_values", "read_all", "read_block"]
