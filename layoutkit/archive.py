"""One reader for every layout layoutkit reads or writes.

``layoutkit.open(path)`` returns an :class:`Archive` over an HDF5 source, a ``reorder``
output (paged HDF5 in any order) or a Zarr store from ``convert``. Whatever the layout,
it offers the same view of a shot archive (``shots``, ``signals``, ``read``, ``shot``,
``signal``) and of arrays in general (``arrays``, ``get``, ``blocks``), so that the
read patterns of ``layoutkit verify`` run the same code on every variant.

Each layout's reader is in its package (:mod:`layoutkit.layouts`), found through the
registry by what a store records; HDF5 files of any origin are read by
:class:`~layoutkit.readers.hdf5.HDF5Archive`. This module is the entry point.

Every read goes through :mod:`layoutkit.storage.counting`: a :class:`CountingFile` under
h5py, a :class:`CountingStore` under zarr. Requests and bytes are always counted;
latency and bandwidth are simulated when a :class:`LatencyModel` is given.

A Zarr store says which layout it holds in its root attribute ``layoutkit_layout``
(``{"name": ..., "version": ...}``); a store without it is the mirror of the HDF5
hierarchy that ``convert`` writes (``shot-major``). A path that is neither Zarr nor HDF5
is offered to each registered layout (:meth:`~layoutkit.layout.Layout.guess_can_open`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import h5py

from layoutkit.errors import LayoutkitError, SourceNotFoundError, UnknownLayoutError, says_it_in_python
from layoutkit.formats import HDF5_SUFFIXES, LAYOUT_ATTR
from layoutkit.layouts import detect
from layoutkit.options import ZarrFormat
from layoutkit.readers.base import Archive, NotAnArchiveError, Selection, scan_grid
from layoutkit.readers.combined import CombinedArchive, expand_sources, is_source_set
from layoutkit.readers.hdf5 import HDF5Archive, is_paged
from layoutkit.readers.zarr_ import counting_store, open_counted, root_head
from layoutkit.storage import ObjectSource, is_url, store_at
from layoutkit.storage.counting import Counter, LatencyModel
from layoutkit.storage.icechunk_repo import named as named_repository
from layoutkit.storage.kv import bucket_zarr_store
from layoutkit.storage.retry import retrying
from layoutkit.templates import DEFAULT_TEMPLATE


@says_it_in_python
def open_archive(
    path: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    template: str = DEFAULT_TEMPLATE,
    model: LatencyModel | None = None,
    page_buffer: int | None = None,
    sleep: Any = None,
    storage_options: dict[str, str] | None = None,
) -> Archive:
    """Open any layout layoutkit knows as an :class:`Archive`.

    Parameters
    ----------
    path
        An HDF5 file (source or ``reorder`` output) or a Zarr store directory, local or
        a URL; or several of them (a list, or a shell-style glob such as
        ``"exports/shots-*.h5"``), read as one archive: the union of their shots
        (:class:`~layoutkit.readers.combined.CombinedArchive`).
    template
        Where signals live, e.g. ``/shots/{shot}/signals/{signal}``.
    model
        Simulated object-store latency and bandwidth (None: no delay; reads are
        counted either way in ``archive.counter``).
    page_buffer
        HDF5 page buffer bytes, for paged HDF5 files. None (the default) or 0: none of
        HDF5's; a paged file in a bucket or under ``model`` is read a page per GET all the
        same (:data:`~layoutkit.readers.hdf5.DEFAULT_PAGE_BUFFER` says why).
    sleep
        Replaces the wait (tests record instead of sleeping).
    storage_options
        For a URL (``s3://bucket/key``): endpoint, credentials... (``--storage-option``).
        Its requests are real, and counted as GETs of the store.

    Raises
    ------
    NotAnArchiveError
        When the path does not exist or is neither HDF5 nor Zarr.
    """
    if not isinstance(path, (str, os.PathLike)) or is_source_set(path):
        return _open_set(expand_sources(path, storage_options), template, model, page_buffer, sleep, storage_options)
    if isinstance(path, str) and path.startswith("file://"):  # a local path, as the commands take it
        path = path.removeprefix("file://")
    path = named_repository(path, storage_options)  # an Icechunk repository named without icechunk:
    if is_url(str(path)):
        return _open_url(str(path), template, model, page_buffer, sleep, storage_options or {})
    p = Path(path)
    if not p.exists():
        raise SourceNotFoundError(f"{p} does not exist.")
    if p.is_dir() and ((p / "zarr.json").exists() or (p / ".zgroup").exists()):
        try:
            _, root = open_counted(p, model, Counter(), sleep)
        except (ValueError, KeyError, OSError) as exc:
            raise NotAnArchiveError(f"{p} is not a readable Zarr store: {exc}.") from None
        return _open_zarr(p, root, template, model, sleep)
    if p.is_file() and h5py.is_hdf5(p):
        return HDF5Archive(p, template, model, page_buffer, sleep)
    try:
        layout = detect(p, path=p)  # a layout of another format
    except UnknownLayoutError:
        if p.is_dir():
            raise NotAnArchiveError(f"{p} is a directory but not a Zarr store (no zarr.json or .zgroup).") from None
        raise NotAnArchiveError(f"{p} is not an HDF5 file or a Zarr store.") from None
    return layout.open(p, template=template, model=model, sleep=sleep, page_buffer=page_buffer)


def _open_set(sources: list[str], template: str, model: LatencyModel | None, page_buffer: int | None, sleep: Any,
              storage_options: dict[str, str] | None) -> Archive:
    """Several sources as one archive (:class:`~layoutkit.readers.combined.CombinedArchive`);
    one source as itself."""
    members: list[Archive] = []
    try:
        for source in sources:
            members.append(open_archive(source, template=template, model=model, page_buffer=page_buffer, sleep=sleep,
                                        storage_options=storage_options))
    except BaseException:
        for member in members:
            member.close()
        raise
    if not members:
        raise SourceNotFoundError("No sources given.")
    return members[0] if len(members) == 1 else CombinedArchive(members, template)


def _open_zarr(where: Any, root: Any, template: str, model: LatencyModel | None, sleep: Any) -> Archive:
    """The reader of the layout the Zarr store at ``where`` records in its root."""
    try:
        layout = detect(where, root.attrs.get(LAYOUT_ATTR, {}) or {})
    except UnknownLayoutError as exc:
        raise NotAnArchiveError(str(exc)) from None
    return layout.open(where, template=template, model=model, sleep=sleep, root=root)


def zarr_format_at(store: Any, formats: tuple[ZarrFormat, ...] = (3, 2)) -> ZarrFormat | None:
    """3 or 2 when an obstore store (rooted at a Zarr store) has a root document of one
    of ``formats``, else None."""
    import obstore

    documents: tuple[tuple[str, ZarrFormat], ...] = (("zarr.json", 3), (".zgroup", 2))
    for name, fmt in documents:
        if fmt not in formats:
            continue
        try:
            retrying(lambda: obstore.head(store, name))  # noqa: B023 - called at once
            return fmt
        except FileNotFoundError:
            continue
    return None


def _open_url(url: str, template: str, model: LatencyModel | None, page_buffer: int | None, sleep: Any,
              storage_options: dict[str, str]) -> Archive:
    """A Zarr store or an HDF5 file in a bucket, or a version of an Icechunk repository,
    read with real requests."""
    from layoutkit.storage.icechunk_repo import is_icechunk, readonly_store

    if is_icechunk(url):
        try:
            base = readonly_store(url, storage_options)
        except LayoutkitError as exc:
            raise NotAnArchiveError(str(exc)) from None
        return _zarr_archive(url, base, 3, template, model, sleep)

    source = ObjectSource(url, tuple(sorted(storage_options.items())))
    if source.name.lower().endswith(HDF5_SUFFIXES):  # a file's name: asked as a file first, a round trip less
        with contextlib.suppress(SourceNotFoundError):  # no such object: a store named like a file
            return HDF5Archive(source, template, model, page_buffer, sleep)  # type: ignore[arg-type]
    counter = Counter()
    try:
        prefixed = store_at(url, storage_options)
        base = bucket_zarr_store(prefixed, read_only=True)
        # one GET tells a v3 store and brings its root document (a HEAD first cost a round trip more)
        document = root_head(counting_store(url, model, counter, sleep, base))
        fmt: ZarrFormat | None = 3 if document is not None else zarr_format_at(prefixed, formats=(2,))
    except FileNotFoundError:
        fmt = None
    except LayoutkitError:  # one sentence already (storage options that set up no store)
        raise
    except Exception as exc:  # obstore's own errors: name what the store said
        from layoutkit.storage import describe_store_error

        raise NotAnArchiveError(describe_store_error(url, exc)) from None
    if fmt is None:  # an object, not a store: HDF5 (or refused in one sentence)
        return HDF5Archive(source, template, model, page_buffer, sleep)  # type: ignore[arg-type]
    return _zarr_archive(url, base, fmt, template, model, sleep, counter, document)


def _zarr_archive(url: str, base: Any, fmt: ZarrFormat, template: str, model: LatencyModel | None, sleep: Any,
                  counter: Counter | None = None, document: Any = None) -> Archive:
    """The archive of the layout a Zarr store (over the zarr store ``base``) records;
    ``document``: its root ``zarr.json`` when already fetched (counted in ``counter``)."""
    try:
        _, root = open_counted(url, model, counter or Counter(), sleep, base=base, zarr_format=fmt, document=document)
    except (ValueError, KeyError, OSError) as exc:
        raise NotAnArchiveError(f"{url} is not a readable Zarr store: {exc}.") from None
    return _open_zarr(url, root, template, model, sleep)


__all__ = [
    "Archive",
    "CombinedArchive",
    "HDF5Archive",
    "NotAnArchiveError",
    "Selection",
    "is_paged",
    "open_archive",
    "scan_grid",
    "zarr_format_at",
]
