"""What a store was made from, kept outside its root: one log entry per run that wrote it.

A Zarr store layoutkit writes records its sources (each file's name, size and content
digest, :func:`~layoutkit.storage.sources.source_record`) so that ``convert --append``
recognises the files it has seen. An archive fed one file per shot has as many records as
shots, so they cannot live in the root document, which every reader opens and every
append rewrites (~160 bytes a file: 80 MB of root at 500,000 files). Each run that writes
the store adds one entry instead:

- in a folder or a bucket, the document ``layoutkit.sources/NNNNNNNN.json`` (the entry's
  number, from 0: the run that created the store), written before the root, never
  rewritten;
- in Icechunk, which holds Zarr keys only, the metadata of the run's commit (key
  ``layoutkit``), read back through the branch's ancestry.

The root's provenance keeps only ``"log": {"entries": N, "last": ID}``: how many entries
are committed and the last one's id (an append's journal names the id it writes, so a
killed append is known committed or not, :func:`layoutkit.appending.append.recover`). An entry
numbered N or more was written by a run that did not commit: readers never look at it,
and the next append's recovery removes it. So the root has the same size whatever the
number of files, and an append reads the log (one small document per run, fetched
concurrently) and writes one entry.

Stores written before the log carry the lists inline (provenance ``"sources"`` and
``"appends"``); they are read as they are, and an append to such a store leaves them and
starts the log beside them.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

PREFIX = "layoutkit.sources/"
"""Where a folder's or a bucket's log entries are: beside the root, as the sidecar is."""

METADATA_KEY = "layoutkit"
"""The key of an Icechunk commit's metadata that holds the run's log entry."""

LOG_KEY = "log"
"""The provenance key of the root's part of the log: ``{"entries": N, "last": ID}``."""


def entry_key(number: int) -> str:
    """The key of log entry ``number`` in a folder or a bucket."""
    return f"{PREFIX}{number:08d}.json"


def is_log_key(key: str) -> bool:
    return key.startswith(PREFIX)


def new_id() -> str:
    return uuid.uuid4().hex[:12]


def new_entry(number: int, run: str, records: list[dict[str, Any]], **counts: int) -> dict[str, Any]:
    """The log entry of a run: its number and id, ``run`` ("convert" or "append"), the
    records of the sources it wrote, and counts (``shots``, ``records``). An append's
    entry has a fresh id and its date; the entry of the run that made the store has
    neither date nor random id (its id is its records' digest), so that the same sources
    written twice give the same store, byte for byte."""
    if number == 0 and run == "convert":
        digest = hashlib.sha256(json.dumps(records, sort_keys=True).encode()).hexdigest()[:12]
        return {"entry": 0, "id": digest, "run": run, "sources": list(records), **counts}
    return {"entry": number, "id": new_id(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "run": run, "sources": list(records), **counts}


def committed(entry: dict[str, Any]) -> dict[str, Any]:
    """The root's part of the log once ``entry`` is committed."""
    return {"entries": int(entry["entry"]) + 1, "last": entry["id"]}


def encode(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Log:
    """A store's log as committed: the entries (oldest first) and, for a store written
    before the log, the records and appends its root listed inline."""

    entries: tuple[dict[str, Any], ...] = ()
    inline_sources: tuple[dict[str, Any], ...] = ()
    inline_appends: tuple[dict[str, Any], ...] = ()

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every source the store was made from (a record each), in the order written."""
        return [*self.inline_sources, *(r for e in self.entries for r in e.get("sources", ()))]

    @property
    def appends(self) -> int:
        """How many appends wrote the store."""
        return len(self.inline_appends) + sum(1 for e in self.entries if e.get("run") == "append")

    @property
    def next_number(self) -> int:
        return len(self.entries)

    def digests(self) -> set[str]:
        return {r["digest"] for r in self.records if r.get("digest")}


def root_part(provenance: dict[str, Any]) -> dict[str, Any]:
    """The provenance's ``log`` part ({} for a store without a log)."""
    found = provenance.get(LOG_KEY)
    return found if isinstance(found, dict) else {}


def last_id(provenance: dict[str, Any]) -> str | None:
    """The id of the last committed run that wrote to the log (or, in a store written
    before the log, the last inline append's)."""
    if root_part(provenance):
        return root_part(provenance).get("last")
    appends = provenance.get("appends")
    return appends[-1].get("id") if isinstance(appends, list) and appends else None


def read_log(provenance: dict[str, Any], get: Callable[[str], bytes | None] | None = None,
             commits: Iterable[dict[str, Any]] | None = None, where: str = "the store") -> Log:
    """The committed log of a store whose root provenance is ``provenance``: its entries
    read with ``get`` (a folder's or a bucket's, fetched concurrently) or found in
    ``commits`` (an Icechunk branch's commit metadata, newest first).

    Raises
    ------
    LayoutkitError
        An entry the root counts is missing: the store was damaged.
    """
    inline = (tuple(provenance["sources"]) if isinstance(provenance.get("sources"), list) else (),
              tuple(provenance["appends"]) if isinstance(provenance.get("appends"), list) else ())
    count = int(root_part(provenance).get("entries", 0))
    if count == 0:
        return Log((), *inline)
    if commits is not None:
        found: dict[int, dict[str, Any]] = {}
        for meta in commits:
            entry = (meta or {}).get(METADATA_KEY)
            if isinstance(entry, dict) and isinstance(entry.get("entry"), int) and entry["entry"] < count:
                found.setdefault(entry["entry"], entry)  # the newest commit of a number wins (--overwrite)
                if entry["entry"] == 0:
                    break
        entries = [found.get(n) for n in range(count)]
    else:
        assert get is not None
        with ThreadPoolExecutor(max_workers=min(16, count)) as pool:
            texts = list(pool.map(lambda n: get(entry_key(n)), range(count)))
        entries = [json.loads(t) if t is not None else None for t in texts]
    missing = [n for n, e in enumerate(entries) if e is None]
    if missing:
        from layoutkit.errors import LayoutkitError

        raise LayoutkitError(f"{where} is missing entry {missing[0]} of its log of sources ({entry_key(missing[0])}); "
                             f"its root counts {count}: the store was damaged, convert its sources again.")
    return Log(tuple(e for e in entries if e is not None), *inline)


__all__ = ["LOG_KEY", "METADATA_KEY", "PREFIX", "Log", "committed", "encode", "entry_key", "is_log_key", "last_id",
           "new_entry", "new_id", "read_log", "root_part"]
