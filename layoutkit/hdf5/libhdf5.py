"""The HDF5 calls h5py does not wrap, through ctypes on the very library h5py loaded
(identifiers are only valid in it): ``H5Fget_info2`` (the file's own space accounting:
superblock, free-space and shared-message sizes), ``H5Pget_chunk_opts`` (whether
partial edge chunks are stored unfiltered) and ``H5Dformat_convert`` (a dataset's chunk
index back to the version-1 B-tree)."""

from __future__ import annotations

import ctypes
import functools
import glob
from pathlib import Path
from typing import Any

import h5py


class _IH(ctypes.Structure):
    _fields_ = [("index_size", ctypes.c_uint64), ("heap_size", ctypes.c_uint64)]

class _Super(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("super_size", ctypes.c_uint64), ("super_ext_size", ctypes.c_uint64)]

class _Free(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("meta_size", ctypes.c_uint64), ("tot_space", ctypes.c_uint64)]

class _Sohm(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("hdr_size", ctypes.c_uint64), ("msgs_info", _IH)]

class FileInfo2(ctypes.Structure):  # H5F_info2_t
    _fields_ = [("super", _Super), ("free", _Free), ("sohm", _Sohm)]

@functools.cache
def _libhdf5() -> Any:
    """The HDF5 library h5py uses, for the one call h5py does not wrap (H5Fget_info2).
    It must be the very library h5py loaded: identifiers are only valid in it."""
    loaded = []
    try:
        with open("/proc/self/maps") as maps:
            loaded = sorted({line.split()[-1] for line in maps if "libhdf5" in line and "hl" not in line.split("/")[-1]})
    except OSError:  # not Linux: h5py's bundled copy
        base = Path(h5py.__file__).parent
        loaded = glob.glob(str(base.parent / "h5py.libs" / "libhdf5*")) + glob.glob(str(base / ".dylibs" / "libhdf5*"))
        loaded = [p for p in loaded if "hl" not in Path(p).name]
    for candidate in loaded:
        try:
            lib = ctypes.CDLL(candidate)
        except OSError:
            continue
        if hasattr(lib, "H5Fget_info2"):
            lib.H5Fget_info2.argtypes = [ctypes.c_int64, ctypes.POINTER(FileInfo2)]
            lib.H5Fget_info2.restype = ctypes.c_int
            return lib
    return None

def file_info(f: h5py.File) -> FileInfo2 | None:
    lib = _libhdf5()
    info = FileInfo2()
    if lib is None or lib.H5Fget_info2(f.id.id, ctypes.byref(info)) < 0:
        return None
    return info


DONT_FILTER_PARTIAL_CHUNKS = 0x0002  # H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS


def chunk_opts(dcpl: h5py.h5p.PropDCID) -> int:
    """A chunked dataset's chunk options (``H5Pget_chunk_opts``): 0 when none, or when
    the library cannot be asked."""
    lib = _libhdf5()
    opts = ctypes.c_uint(0)
    if lib is None or not hasattr(lib, "H5Pget_chunk_opts"):
        return 0
    if lib.H5Pget_chunk_opts(ctypes.c_int64(dcpl.id), ctypes.byref(opts)) < 0:
        return 0
    return int(opts.value)


def to_btree_index(dsid: h5py.h5d.DatasetID) -> bool:
    """Give a chunked dataset the version-1 B-tree chunk index (``H5Dformat_convert``),
    before anything is written to it; False when the library cannot be asked."""
    lib = _libhdf5()
    if lib is None or not hasattr(lib, "H5Dformat_convert"):
        return False
    return lib.H5Dformat_convert(ctypes.c_int64(dsid.id)) >= 0


__all__ = ["DONT_FILTER_PARTIAL_CHUNKS", "FileInfo2", "chunk_opts", "file_info", "to_btree_index"]
