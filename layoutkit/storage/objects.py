"""Destinations in a bucket: Zarr stores written in place, HDF5 files uploaded whole."""

from __future__ import annotations

import os
from pathlib import Path

from layoutkit.errors import OutputExistsError, OutputNotWritableError
from layoutkit.storage.buckets import (
    METADATA_NAMES,
    UPLOAD_THREADS,
    delete_keys,
    list_keys,
    object_store,
    store_error,
)
from layoutkit.storage.kv import BucketKV
from layoutkit.storage.local import remove_path
from layoutkit.storage.retry import retrying


class ObjectDestination:
    """A destination in a bucket (``s3://bucket/key``), behind the same seam as
    :class:`~layoutkit.storage.local.LocalDestination`.

    A **Zarr store** is written in place by every worker (:class:`BucketKV`), with its
    root metadata held back and written last by :meth:`publish`: a reader finds the
    store only when every object under it exists. A failed or interrupted run deletes
    every object under the key. Objects already under the key when the run starts
    (what a killed run left, or with ``--overwrite`` the old store) are deleted first,
    the root metadata before the rest: a bucket cannot swap a prefix atomically, so an
    overwritten store is gone before the new one appears (an Icechunk destination,
    ``--icechunk``, replaces it in one commit instead).

    An **HDF5 file** is written to a local temporary file under ``tmpdir`` (``--tmpdir``;
    by default ``TMPDIR``), then uploaded; obstore splits a large object into a multipart
    upload, which becomes visible only when complete. The temporary file is removed
    either way.
    """

    kind = "bucket"  # what Layout.destinations names it

    def __init__(self, url: str, storage_options: dict[str, str], tmpdir: str | os.PathLike | None = None) -> None:
        self.tmpdir = tmpdir
        self.url = url.rstrip("/")
        self.storage_options = storage_options
        self.store, self.key = object_store(self.url, storage_options)
        if not self.key:
            raise OutputNotWritableError(f"Destination {url!r} names a bucket, not an object: add a key, e.g. {url.rstrip('/')}/out.zarr.")
        self.path = Path(self.key)  # the name, for messages and summaries
        self._uploaded: list[str] = []
        self._bytes = 0
        self._root: Path | None = None

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"ObjectDestination({self.url!r})"

    def _existing(self) -> list[str]:
        return [k for k, _ in list_keys(self.store, self.key)]

    def _published(self) -> bool:
        """Whether a reader would find something at the destination: the object itself (a
        file) or a root metadata document (a store). Objects under the key without one are
        what a killed run left; the next run removes them."""
        import obstore

        for key in (self.key, *(f"{self.key}/{name}" for name in (".zgroup", ".zarray", "zarr.json"))):
            try:
                retrying(lambda: obstore.head(self.store, key))  # noqa: B023 - called at once
                return True
            except FileNotFoundError:
                continue
        return False

    def check(self, overwrite: bool) -> None:
        """Refuse an existing destination (unless ``overwrite``), a missing bucket, denied
        access, an endpoint that does not answer, or a ``tmpdir`` that is not a writable
        folder, before any work."""
        import obstore

        if self.tmpdir is not None and not (Path(self.tmpdir).is_dir() and os.access(self.tmpdir, os.W_OK)):
            raise OutputNotWritableError(f"--tmpdir {str(self.tmpdir)!r} is not a writable folder.")
        try:
            # a LIST answers for the bucket and the access
            retrying(lambda: next(iter(obstore.list(self.store, prefix=self.key, chunk_size=1)), None))
            exists = self._published()
        except Exception as exc:  # obstore raises builtins and its own errors: name what it said
            raise store_error(self.url, exc) from None
        if exists and not overwrite:
            raise OutputExistsError(f"Destination {self.url!r} exists; pass --overwrite to replace it.")

    def stage(self, output: str = "file") -> Path | BucketKV:
        """A store: clear the key and write there (:class:`BucketKV`). A file: a local
        temporary path, uploaded by :meth:`publish`."""
        import tempfile

        if output == "store":
            try:
                delete_keys(self.store, [k for k in self._existing() if k == self.key or k.startswith(self.key + "/")])
            except Exception as exc:
                raise store_error(self.url, exc) from None
            return BucketKV(self.url, tuple(sorted(self.storage_options.items())))
        self._root = Path(tempfile.mkdtemp(prefix="layoutkit-upload-", dir=self.tmpdir))
        return self._root / self.path.name

    def publish(self, staged: Path | BucketKV, note: str = "") -> None:
        """Make the output visible: a store's held root metadata, or a file's upload; then
        remove what an overwritten destination had that the new one does not."""
        try:
            if isinstance(staged, BucketKV):
                staged.release()
                self._bytes = sum(n for _, n in list_keys(self.store, self.key))
                return
            old = set(self._existing())
            self._upload([(staged, self.key)])
            stale = sorted(old - set(self._uploaded))
            if stale:
                delete_keys(self.store, stale)
        except Exception as exc:
            raise store_error(self.url, exc) from None
        self._uploaded = []  # published: nothing to take back
        if self._root is not None:
            remove_path(self._root)

    def _upload(self, items: list[tuple[Path, str]]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        import obstore

        def put(item: tuple[Path, str]) -> int:
            local, key = item
            def once() -> None:  # the file opened again for each try
                with open(local, "rb") as fh:
                    obstore.put(self.store, key, fh)

            retrying(once)
            self._uploaded.append(key)
            return local.stat().st_size

        with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
            self._bytes += sum(pool.map(put, items))

    def discard(self, staged: Path | BucketKV) -> None:
        """Remove what this run wrote: every object under the key of a store (nothing
        of it was visible), or the uploaded file and the local temporary one."""
        if isinstance(staged, BucketKV):
            self.remove()
        elif self._uploaded:
            try:
                delete_keys(self.store, self._uploaded)
            except Exception:  # noqa: BLE001 - best effort while failing already
                pass
        self._uploaded = []
        if self._root is not None:
            remove_path(self._root)

    def remove(self) -> None:
        """Delete every object under the key: a run that published before it failed (one
        in batches, :mod:`layoutkit.appending.batches`) takes its store back. Best effort, as the run
        is failing already."""
        try:
            delete_keys(self.store, self._existing())
        except Exception:  # noqa: BLE001 - best effort while failing already
            pass

    def size(self) -> int:
        """Bytes written."""
        return self._bytes


__all__ = ["METADATA_NAMES", "ObjectDestination"]
