"""Opening an HDF5 source: a local path or an object in a bucket, checked first, so that
a missing file, a directory, a text file, netCDF-3 or a truncated file is refused in one
sentence before any work, and the source is only ever opened read-only."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, overload

import h5py
import hdf5plugin  # noqa: F401  (registers third-party HDF5 filters: zstd, lz4, bitshuffle, blosc...)

from layoutkit.errors import (
    CorruptSourceError,
    LayoutkitError,
    NotHDF5Error,
    SourceIsDirectoryError,
    SourceNotFoundError,
    UnsupportedFeatureError,
)
from layoutkit.storage import AnySource, ObjectSource, RangeFile, Source, SourceLike, SourceSet, describe_store_error
from layoutkit.storage.sources import READ_BLOCK_BYTES

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

NETCDF3_MAGICS = (b"CDF\x01", b"CDF\x02", b"CDF\x05")

def _find_signature(read: Any, size: int) -> int | None:
    """Return the offset of the HDF5 signature (0, 512, 1024, ...) or None;
    ``read(offset, n)`` reads the file's bytes."""
    offset = 0
    while offset + 8 <= size:
        if read(offset, 8) == HDF5_SIGNATURE:
            return offset
        offset = 512 if offset == 0 else offset * 2
    return None

def _object_size(source: ObjectSource) -> int:
    try:
        return source.size()
    except FileNotFoundError:
        raise SourceNotFoundError(f"Source {source.url!r} does not exist.") from None
    except LayoutkitError:  # already one sentence (storage options that set up no store)
        raise
    except Exception as exc:  # obstore's errors: say what the store answered
        raise CorruptSourceError(f"Source {describe_store_error(source.url, exc)}") from None

def _check_object_head(source: ObjectSource, head: bytes, read: Any, size: int) -> None:
    if head[:4] in NETCDF3_MAGICS:
        raise NotHDF5Error(f"Source {source.url!r} is a netCDF-3 classic file, not HDF5 or netCDF-4.")
    if head[:8] != HDF5_SIGNATURE and _find_signature(read, size) is None:
        raise NotHDF5Error(f"Source {source.url!r} is not an HDF5 file (no HDF5 signature found).")

def _check_object_source(source: ObjectSource) -> ObjectSource:
    size = _object_size(source)
    # one GET tells netCDF-3 and HDF5 at byte 0 (a round trip each before)
    _check_object_head(source, source.read_range(0, min(8, size)), source.read_range, size)
    return source

def open_checked(source: ObjectSource, on_get: Any = None, block_bytes: int = 0, keep: int = 0) -> RangeFile:
    """The block-cached file object of an HDF5 file in a bucket, checked as
    :func:`check_source` checks it, for h5py to read: one GET, of the file's first block,
    which brings the object's size, holds the signature, and is what h5py reads first."""
    try:
        head, size = source.first_block(block_bytes or READ_BLOCK_BYTES)
    except FileNotFoundError:
        raise SourceNotFoundError(f"Source {source.url!r} does not exist.") from None
    except LayoutkitError:
        raise
    except Exception:  # noqa: BLE001 - an empty object (416), or what a HEAD names better: asked again
        head, size = b"", _object_size(source)
    f = source.open_file(on_get, block_bytes, size, keep)
    if head:
        f.seed(head)
    try:
        _check_object_head(source, f.pread(0, 8), f.pread, size)
    except BaseException:
        f.close()
        raise
    return f

@overload
def check_source(path: SourceSet) -> SourceSet: ...
@overload
def check_source(path: SourceLike) -> Path | ObjectSource: ...
def check_source(path: AnySource) -> Source:
    """Check that ``path`` names a readable HDF5 file.

    Raises
    ------
    SourceNotFoundError, SourceIsDirectoryError, NotHDF5Error, CorruptSourceError
    """
    if isinstance(path, ObjectSource):
        return _check_object_source(path)
    if isinstance(path, SourceSet):
        for member in path.members:
            check_source(member)
        return path
    p = Path(path)
    if not p.exists() and re.match(r"^[a-z][a-z0-9+.-]*:/", str(path)):  # "s3://b/k", or "s3:/b/k" once a Path
        url = re.sub(r"^([a-z][a-z0-9+.-]*):/+", r"\1://", str(path))
        raise SourceNotFoundError(
            f"Source {url!r} is a URL given as a local path; pass it as text, e.g. "
            "layoutkit.storage.as_source(url, storage_options), to read it from its bucket."
        )
    if not p.exists():
        raise SourceNotFoundError(f"Source {str(p)!r} does not exist.")
    if p.is_dir():
        raise SourceIsDirectoryError(f"Source {str(p)!r} is a directory, not an HDF5 file.")
    try:
        with open(p, "rb") as fh:
            head = fh.read(8)
    except PermissionError:
        raise CorruptSourceError(f"Source {str(p)!r} cannot be read (permission denied).") from None
    if head[:4] in NETCDF3_MAGICS:
        raise NotHDF5Error(
            f"Source {str(p)!r} is a netCDF-3 classic file, not HDF5 or netCDF-4; "
            "convert it first with: nccopy -k nc4 IN OUT."
        )
    with open(p, "rb") as fh:
        found = _find_signature(lambda offset, n: (fh.seek(offset), fh.read(n))[1], p.stat().st_size)
    if found is None:
        raise NotHDF5Error(f"Source {str(p)!r} is not an HDF5 file (no HDF5 signature found).")
    return p

_ON_FILE_OBJECTS: weakref.WeakSet[h5py.File] = weakref.WeakSet()
_AT_EXIT: list[bool] = []


def close_at_exit(f: h5py.File) -> h5py.File:
    """Have ``f``, an HDF5 file opened on a Python file object, closed before the
    interpreter finalizes, if it is still open then.

    HDF5 closes the files left open when the process exits, after Python has finalized:
    for a file on a Python file object (h5py's fileobj driver: a file in a bucket, or a
    counting one) that close calls back into Python, which is gone, and the process dies
    of a segmentation fault (exit 139) after the script's last line. Closed here first,
    in an :mod:`atexit` handler, the file closes while Python still runs."""
    if not _AT_EXIT:
        atexit.register(_close_left_open)
        _AT_EXIT.append(True)
    _ON_FILE_OBJECTS.add(f)
    return f


def _close_left_open() -> None:
    for f in list(_ON_FILE_OBJECTS):
        try:
            f.close()
        except Exception:  # noqa: BLE001, S110 - at exit, a file that cannot close is let go
            pass


class _FileOverObject(h5py.File):
    """An HDF5 file in a bucket, read through its block-cached file object, which closes
    with it: h5py never closes a file object it was given, so the object's shared blocks
    were let go only when h5py dropped its reference, not when the file closed."""

    def __init__(self, source: ObjectSource, **kwargs: Any) -> None:
        fileobj = source.open_file()
        try:
            super().__init__(fileobj, "r", **kwargs)
        except BaseException:
            fileobj.close()
            raise
        self._fileobj = fileobj
        close_at_exit(self)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._fileobj.close()

def open_h5(source: SourceLike, **kwargs: Any) -> h5py.File:
    """Open an HDF5 file read-only, local or in a bucket, without :func:`check_source`.
    Keyword arguments go to :class:`h5py.File` (e.g. ``page_buf_size``)."""
    if isinstance(source, ObjectSource):  # metadata through a block-cached file object
        return _FileOverObject(source, **kwargs)
    return h5py.File(source, "r", **kwargs)

def external_prefix(f: h5py.File, folder: str | None = None) -> str | None:
    """Where HDF5 is to look for the files of a dataset's external raw storage: under
    ``HDF5_EXTFILE_PREFIX`` when the environment sets it (``${ORIGIN}``: the file's
    folder), as HDF5 does, else beside the file (HDF5 itself would look in the working
    directory, which is not where anyone keeps them). ``folder``: the file's folder, when
    ``f`` is read through a file object (its name is then not a path). None: a file in a
    bucket, whose external files no one can read."""
    if folder is None:
        if f.driver == "fileobj":
            return None
        folder = os.path.dirname(os.path.abspath(f.filename))
    prefix = os.environ.get("HDF5_EXTFILE_PREFIX", "")
    return prefix.replace("${ORIGIN}", folder) if prefix else folder


@contextlib.contextmanager
def external_values(f: h5py.File, path: str, local: str | None = None) -> Iterator[h5py.Dataset]:
    """The dataset at ``path``, which keeps its raw data in other files (external raw
    storage), open to read its values through HDF5 from where :func:`external_prefix`
    says they are. ``local``: the file's path, when ``f`` is read through a file object.

    Opened on a second handle of the file, through HDF5's stdio driver, so that HDF5 holds
    it apart from ``f``: HDF5 refuses to open a dataset with another prefix than the one
    it is open with, and opens it again itself, with none, to list its attributes; on
    ``f`` the walk, the attributes and the structure keep HDF5's default."""
    if local is None and f.driver == "fileobj":
        raise UnsupportedFeatureError(path, "external raw storage (its files are not read from a bucket)")
    name = local if local is not None else os.path.abspath(f.filename)
    with h5py.File(name, "r", driver="stdio") as side:
        prefix = external_prefix(side)
        assert prefix is not None
        dapl = h5py.h5p.create(h5py.h5p.DATASET_ACCESS)
        dapl.set_efile_prefix(os.fsencode(prefix))
        yield h5py.Dataset(h5py.h5d.open(side.id, path.encode(), dapl))


def open_source(path: SourceLike, **kwargs: Any) -> h5py.File:
    """Open an HDF5 source read-only after :func:`check_source`.

    Keyword arguments go to :class:`h5py.File` (e.g. ``page_buf_size``).
    """
    p = check_source(path)
    try:
        return open_h5(p, **kwargs)
    except OSError as exc:
        raise CorruptSourceError(
            f"Source {str(p)!r} has an HDF5 signature but cannot be opened "
            f"(truncated or damaged: {first_line(exc)})."
        ) from None

MAX_OPEN_FILES = 64
"""Members of a set :class:`Members` holds open while the structure is copied."""


class Members:
    """The open files of a source or of a set's members, opened when first asked for,
    at most :data:`MAX_OPEN_FILES` at once (the least recently asked for closed)."""

    def __init__(self, source: Any) -> None:
        self.members = source.members if isinstance(source, SourceSet) else (source,)
        self._open: OrderedDict[int, h5py.File] = OrderedDict()

    def __call__(self, member: int) -> h5py.File:
        f = self._open.get(member)
        if f is None:
            while len(self._open) >= MAX_OPEN_FILES:
                self._open.popitem(last=False)[1].close()
            f = self._open[member] = open_source(self.members[member])
        self._open.move_to_end(member)
        return f

    def close(self) -> None:
        while self._open:
            self._open.popitem()[1].close()

    def __enter__(self) -> Members:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, for one-sentence errors."""
    text = str(exc).strip().splitlines()
    return text[0].rstrip(".") if text else type(exc).__name__


__all__ = ["HDF5_SIGNATURE", "MAX_OPEN_FILES", "Members", "NETCDF3_MAGICS", "check_source", "close_at_exit", "first_line", "open_checked", "open_h5",
           "open_source"]
