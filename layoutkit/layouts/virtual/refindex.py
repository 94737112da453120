"""layoutkit's own copy of a virtual store's references, so that its reader can merge them.

Icechunk keeps each reference (file URL, offset, length) in its manifests and follows
them one chunk at a time: a shot of a source with small chunks costs one GET per chunk
(429 GETs for one shot of 70 signals, measured). Icechunk 2.3 gives no way to read a
reference back (only to set them), so a reader cannot merge the ranges that lie next to
each other in one file into one GET. Each run that sets references therefore also writes
them here, in one document:

- the document ``layoutkit.refindex/<digest>.json.zst`` beside the repository's own
  objects (in its folder, or under its bucket prefix), its name the SHA-256 of its bytes,
  so it never changes once written and a failed run's document names nothing;
- its name in the run's log entry (the commit's metadata, :mod:`layoutkit.storage.log`),
  set before the commit: a reader takes the names from the commits of the snapshot it
  reads, so it never follows a document of another snapshot.

A document is zstd-compressed JSON: ``{"format": 1, "urls": [...], "versions": {url:
version}, "arrays": {path: [[chunk index, url number, offset, length], ...]}}``, with
each source's version as its references record it (modification time, or ETag). A
reader that finds none (a repository written before the copy, a document removed) reads
through Icechunk, one GET per chunk: slower, never wrong.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from typing import Any

from layoutkit.storage.beside import get, put

PREFIX = "layoutkit.refindex/"
"""Where a repository's copies of its references are, beside its own objects."""

ENTRY_KEY = "refindex"
"""The key of a run's log entry that names its document."""

FORMAT = 1


class RefCopy:
    """The references a run sets, kept as they are set (by the run's threads)."""

    def __init__(self) -> None:
        self._arrays: dict[str, list[list[Any]]] = {}
        self._versions: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._arrays)

    def add(self, path: str, chunks: list[list[Any]], versions: dict[str, dict[str, Any]]) -> None:
        """Keep ``chunks`` (``[[chunk index, url, offset, length], ...]``) of array ``path``."""
        with self._lock:
            self._arrays.setdefault(path.strip("/"), []).extend(chunks)
            for _, url, _, _ in chunks:
                if url in versions:
                    self._versions[url] = versions[url]

    def encode(self) -> tuple[str, bytes]:
        """The document's name and bytes; the same references give the same bytes."""
        import numcodecs

        with self._lock:
            urls = sorted({url for chunks in self._arrays.values() for _, url, _, _ in chunks})
            number = {url: i for i, url in enumerate(urls)}
            arrays = {path: sorted([list(index), number[url], int(offset), int(length)]
                                   for index, url, offset, length in chunks)
                      for path, chunks in sorted(self._arrays.items())}
            doc = {"format": FORMAT, "urls": urls, "versions": {u: self._versions.get(u, {}) for u in urls},
                   "arrays": arrays}
        data = bytes(numcodecs.Zstd(level=3).encode(json.dumps(doc, separators=(",", ":")).encode()))
        return f"{PREFIX}{hashlib.sha256(data).hexdigest()[:32]}.json.zst", data


class RefIndex:
    """The references of a snapshot, looked up by chunk key (``path/c/i/j``).

    An array's references are indexed when one of its chunks is first looked up, not
    when the documents are read: one read of one signal must not cost a dictionary of
    every chunk of the archive (0.18 s of a 0.3 s group read at 8,000 shots, measured).
    """

    def __init__(self, docs: Iterable[bytes]) -> None:
        import numcodecs

        self._given: dict[str, list[tuple[list[str], list[list[Any]]]]] = {}  # path -> (urls, chunks), in order
        self._indexed: dict[str, dict[tuple[int, ...], tuple[str, int, int]]] = {}
        self._lock = threading.Lock()
        self.versions: dict[str, dict[str, Any]] = {}
        for data in docs:
            self._take(json.loads(bytes(numcodecs.Zstd().decode(data))))

    @classmethod
    def from_documents(cls, docs: Iterable[dict[str, Any]]) -> RefIndex:
        """An index of documents already parsed (a bucket of :mod:`layoutkit.storage.nodeindex`)."""
        index = cls(())
        for doc in docs:
            index._take(doc)
        return index

    def _take(self, doc: dict[str, Any]) -> None:
        if doc.get("format") != FORMAT:
            return
        urls = doc["urls"]
        self.versions.update(doc.get("versions") or {})
        for path, chunks in doc["arrays"].items():
            if chunks:
                self._given.setdefault(path, []).append((urls, chunks))

    def __bool__(self) -> bool:
        return bool(self._given)

    def arrays(self) -> Iterable[tuple[str, list[str], list[list[Any]]]]:
        """``(array path, urls, [[chunk index, url number, offset, length], ...])`` as given."""
        for path, given in self._given.items():
            for urls, chunks in given:
                yield path, urls, chunks

    def get(self, key: str) -> tuple[str, int, int] | None:
        """The reference of the chunk stored under ``key``: (URL, offset, length)."""
        path, sep, rest = key.rpartition("/c/")
        index: tuple[int, ...] | None
        if not sep:  # a zero-dimensional array's one chunk: ``path/c``
            path, index = (key[:-2], ()) if key.endswith("/c") else ("", None)
        else:
            try:
                index = tuple(int(i) for i in rest.split("/"))
            except ValueError:
                return None
        if index is None or path not in self._given:
            return None
        return self._array(path).get(index)

    def _array(self, path: str) -> dict[tuple[int, ...], tuple[str, int, int]]:
        found = self._indexed.get(path)
        if found is None:
            with self._lock:  # the reader's threads look up at once
                found = {tuple(index): (urls[url], offset, length)
                         for urls, chunks in self._given[path] for index, url, offset, length in chunks}
                self._indexed[path] = found
        return found


def names_in(commits: Iterable[dict[str, Any] | None], count: int) -> list[str]:
    """The documents named by the log entries numbered below ``count`` in ``commits``
    (an Icechunk snapshot's ancestry's metadata, newest first), as the log reads them."""
    from layoutkit.storage.log import METADATA_KEY

    found: dict[int, str | None] = {}
    for meta in commits:
        entry = (meta or {}).get(METADATA_KEY)
        if isinstance(entry, dict) and isinstance(entry.get("entry"), int) and entry["entry"] < count:
            found.setdefault(entry["entry"], entry.get(ENTRY_KEY))
            if entry["entry"] == 0:
                break
    return [name for name in found.values() if isinstance(name, str) and name.startswith(PREFIX)]


def load(repo: Any, snapshot: str, location: str, storage_options: dict[str, str],
         provenance: dict[str, Any]) -> RefIndex | None:
    """The references of ``snapshot`` of ``repo``, from the documents its log names (the
    root's ``provenance`` tells how many entries it holds); None when it names none."""
    from zarr.core.sync import sync

    from layoutkit.storage.log import root_part

    entries = int(root_part(provenance).get("entries", 0) or 0)
    names = names_in((s.metadata for s in repo.ancestry(snapshot_id=snapshot)), entries) if entries else []
    docs = [sync(get(location, storage_options, name)) for name in names]
    return RefIndex(d for d in docs if d) if names else None




def attach(kv: Any) -> None:
    """Keep a copy of the references a run sets in the Icechunk session ``kv``
    (:class:`~layoutkit.storage.icechunk_repo.IcechunkKV`): each set is copied
    (``ref_hooks``); before the commit the copy is written beside the repository and
    named in the run's log entry (``commit_hooks``); after it, the index of the
    snapshot's nodes takes the snapshot's references from the copies
    (``index_references``). Once per session."""
    if getattr(kv, "refs", None) is not None:
        return
    copy = kv.refs = RefCopy()
    kv.ref_hooks.append(copy.add)

    def keep(storage_options: dict[str, str]) -> None:
        if not copy or kv.log_entry is None:
            return
        name, data = copy.encode()
        put(kv.location, storage_options, name, data)
        kv.log_entry[ENTRY_KEY] = name

    def references(repo: Any, snapshot: str, provenance: dict[str, Any], storage_options: dict[str, str]) -> Any:
        return load(repo, snapshot, kv.location, storage_options, provenance)

    kv.commit_hooks.append(keep)
    kv.index_references = references


__all__ = ["ENTRY_KEY", "FORMAT", "PREFIX", "RefCopy", "RefIndex", "attach", "load", "names_in"]
