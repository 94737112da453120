"""The source as the HDF5 library itself reads it: the reference every comparator checks a
variant against.

The converters read raw chunk bytes and decode them themselves
(:mod:`layoutkit.hdf5.source`): fast, and written by the same hands as the writers. The
proof must not share those eyes (a wrong chunk index would write wrong data and then
read the same wrong data back as "equal"), so it reads every block through h5py's
``Dataset`` reads: HDF5's own chunk lookup, its own filters, its own type conversion.
``tests/test_architecture.py`` holds that no comparator imports the raw path.

HDF5 runs one call at a time in a process, so with ``processes`` the blocks are read in
worker processes that each open the source themselves, while the comparing threads of
this process read the variant.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any

import numpy as np

from layoutkit.hdf5.files import Members
from layoutkit.hdf5.model import ArrayInfo
from layoutkit.hdf5.reference import read_block
from layoutkit.plan import Region
from layoutkit.storage import ObjectSource, SourceSet

PROCESS_MIN_BYTES = 256 << 20
"""Below this much data a worker process costs more to start (about a second, h5py and
numpy imported) than it saves: the blocks are read in this process."""


# -- worker processes: each opens the source once --------------------------------------

_WORKER: dict[str, Any] = {}


def _start_worker(source: Any) -> None:
    _WORKER["files"] = Members(source)


def _read_in_worker(info: ArrayInfo, region: Region) -> np.ndarray:
    return read_block(_WORKER["files"], info, region)


class ReferenceReader:
    """Reads regions of a source's datasets through HDF5's own read; safe to share
    between threads.

    Parameters
    ----------
    source
        A file, a file in a bucket, or a set of files.
    arrays
        The inventory entries of the datasets that will be read.
    processes
        Worker processes that read (HDF5 reads one block at a time per process): 0
        reads here. ``None`` chooses: ``os.cpu_count()`` for a local source of at least
        :data:`PROCESS_MIN_BYTES`, else 0.
    """

    def __init__(self, source: str | os.PathLike | ObjectSource | SourceSet, arrays: dict[str, ArrayInfo],
                 processes: int | None = None) -> None:
        self.arrays = arrays
        self._files = Members(source)
        self._lock = threading.Lock()  # Members keeps its open files in one ordered dict
        if processes is None:
            local = not isinstance(source, ObjectSource) and not (
                isinstance(source, SourceSet) and any(isinstance(m, ObjectSource) for m in source.members))
            big = sum(a.nbytes for a in arrays.values() if not a.null_space) >= PROCESS_MIN_BYTES
            processes = (os.cpu_count() or 1) if local and big else 0
        self._pool: Executor | None = None
        if processes > 0:
            import multiprocessing

            self._pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_start_worker, initargs=(source,))

    def read(self, path: str, region: Region) -> np.ndarray:
        """The values of ``path`` in ``region``.

        Raises
        ------
        ChunkDecodeError
            When HDF5 cannot read them.
        """
        info = self.arrays[path]
        if self._pool is not None and info.shape and not info.dtype.hasobject:
            return self._pool.submit(_read_in_worker, info, region).result()
        with self._lock:
            return read_block(self._files, info, region)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        with self._lock:
            self._files.close()

    def __enter__(self) -> ReferenceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["PROCESS_MIN_BYTES", "ReferenceReader", "read_block"]
