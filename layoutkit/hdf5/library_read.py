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
from layoutkit.hdf5.attrs import reference_path, region_as_text
from layoutkit.hdf5.files import external_values, first_line
from layoutkit.hdf5.model import ArrayInfo
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
        if info.kind == "vlen" and not info.shape:  # h5py gives a scalar's sequence as the array itself
            one = np.empty((), dtype=object)
            one[()] = ds[()]
            return declared_order(one, ds.dtype)
        values = np.asarray(ds[sel])
        return declared_order(values, ds.dtype) if values.dtype.kind == "O" or values.dtype.names else values
    except (OSError, RuntimeError) as exc:
        raise ChunkDecodeError(info.path, tuple(a for a, _ in region), first_line(exc)) from None


def declared_order(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Variable-length sequences (a dataset of them, or a compound's members) labelled with
    the byte order their type declares. h5py (3.16) reads the sequences of a big-endian
    type (``vlen of >f8``) as arrays labelled native-endian that hold the big-endian bytes
    (h5dump, and the bytes, read 2.5 where h5py's array says 5.4e-321); their bytes are
    kept, their label mended. Sequences already labelled so are left as they are."""
    if dtype.names:
        for name in dtype.names:
            if h5py.check_vlen_dtype(dtype[name]) is not None and values.dtype.names and name in values.dtype.names:
                values[name] = declared_order(values[name], dtype[name])
        return values
    base = h5py.check_vlen_dtype(dtype)
    if not isinstance(base, np.dtype) or base.byteorder in "=|" or base.isnative:
        return values
    if values.dtype.kind != "O":  # a scalar's sequence: h5py gives the array itself
        return values.view(base) if values.dtype.newbyteorder("=") == base.newbyteorder("=") else values
    flat = values.reshape(-1)
    for i, seq in enumerate(flat):
        if isinstance(seq, np.ndarray) and seq.dtype != base and seq.dtype.newbyteorder("=") == base.newbyteorder("="):
            flat[i] = seq.view(base)
    return values


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


__all__ = ["declared_order", "read_all", "read_block"]
