"""``layoutkit inspect``: how an HDF5 file or a Zarr store is laid out, and what to do about it.

:func:`inspect_path` reads metadata and chunk indexes only, never the data, so it is fast
on large files: one walk of the objects (``H5Ovisit``) with each dataset's creation
properties and chunk index (``H5Dchunk_iter``), the file's own space accounting
(``H5Fget_info2``), and for Zarr the metadata documents, the sizes of the chunk files and
the index at the end of each shard. One exception: dimension scales that could be
duplicates (same dtype, shape and attributes as another scale) are read, to compare their
contents; scales are coordinate vectors, small next to the data they label.

The result is a frozen :class:`InspectReport`, with plain recommendations that each name
the command or recipe that applies. The metadata size is the one ``h5stat -S`` reports
as "File metadata" (superblock and its extension, user block, object headers, group,
attribute and chunk indexes and heaps, shared-message tables, free-space headers).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from layoutkit.inspect.hdf5 import PARALLEL_MIN_DATASETS, inspect_hdf5
from layoutkit.inspect.recommend import recommend
from layoutkit.inspect.report import SMALL_CHUNK_BYTES, CodecUse, FileSpace, HistogramBin, InspectReport, Recommendation
from layoutkit.inspect.zarr_ import BucketFiles, NotAStoreError, StoreFiles, inspect_zarr, inspect_zarr_store
from layoutkit.options import parse_workers
from layoutkit.storage import ObjectSource, is_icechunk, is_url, store_at
from layoutkit.storage.icechunk_repo import named as named_repository
from layoutkit.storage.icechunk_repo import parse, readonly_store, repository_bytes
from layoutkit.templates import DEFAULT_TEMPLATE, compile_template


def inspect_path(
    path: str | os.PathLike, template: str = DEFAULT_TEMPLATE, storage_options: dict[str, str] | None = None,
    workers: int = 1, progress: Callable[[int, int], None] | None = None,
) -> InspectReport:
    """Diagnose how an HDF5 file (netCDF-4 included) or a Zarr store is laid out.

    Parameters
    ----------
    path
        An HDF5 file or a Zarr store (a directory, v2 or v3); an HDF5 file may be in a
        bucket (``s3://...``, with ``storage_options``), read by ranged GETs.
    template
        Where shots and signals are (``{shot}`` and ``{signal}`` match one path
        component each), to report the shots x signals found.
    workers
        Processes that read the datasets of a local HDF5 file with at least
        :data:`~layoutkit.hdf5.inventory.PARALLEL_MIN_DATASETS` of them (h5py serialises
        every call into HDF5, so threads would not help); 1 reads them here.
    progress
        Called as ``progress(done, total)`` while an HDF5 file's datasets are read
        (``total`` is known once the walk has found them all).

    Returns
    -------
    InspectReport

    Raises
    ------
    LayoutkitError
        The path is missing, not HDF5, damaged, or a directory that is not a Zarr store;
        or the template is malformed.
    """
    compile_template(template)  # refuse a malformed template, or a worker count below 1, before any work
    parse_workers(workers)
    t0 = time.perf_counter()
    path = named_repository(path, storage_options)  # an Icechunk repository named without icechunk:
    if is_icechunk(str(path)):
        report = inspect_zarr_store(StoreFiles(readonly_store(str(path), storage_options or {})), str(path), template)
        # what the repository holds, not the sizes its keys report (a virtual chunk's is the
        # range it points to in a source: 21.2 MiB "on disk" for a repository of 1.6 MB)
        report = replace(report, total_bytes=repository_bytes(parse(str(path))[0], storage_options or {}),
                         recommendations=tuple(recommend(report)))
        return replace(report, seconds=time.perf_counter() - t0)
    if is_url(str(path)):
        from layoutkit.archive import zarr_format_at

        prefixed = store_at(str(path), storage_options or {})
        if zarr_format_at(prefixed) is not None:  # a store: one LIST, its documents, and shard indexes by range
            report = inspect_zarr_store(BucketFiles(prefixed), str(path), template)
            report = replace(report, recommendations=tuple(recommend(report)))
            return replace(report, seconds=time.perf_counter() - t0)
        source = ObjectSource(str(path), tuple(sorted((storage_options or {}).items())))
        report = inspect_hdf5(source, template, progress=progress)  # type: ignore[arg-type]
        report = replace(report, recommendations=tuple(recommend(report)))
        return replace(report, seconds=time.perf_counter() - t0)
    p = Path(path)
    if p.is_dir():
        report = inspect_zarr(p, template)
    else:
        report = inspect_hdf5(p, template, workers, progress)
    report = replace(report, recommendations=tuple(recommend(report)))
    return replace(report, seconds=time.perf_counter() - t0)


__all__ = ["PARALLEL_MIN_DATASETS", "SMALL_CHUNK_BYTES", "CodecUse", "FileSpace", "HistogramBin", "InspectReport",
           "NotAStoreError", "Recommendation", "inspect_path", "recommend"]
