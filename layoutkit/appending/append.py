"""``convert --append``: new sources added to an existing store, writing only what is new.

An archive grows: a tokamak adds shots every run day, a reanalysis a file a month. An
append adds the shots of new source files to a store that layoutkit wrote, in any Zarr
layout, locally, in a bucket or in Icechunk:

1. The store's root document says its layout and its recipe; its log, outside the root,
   lists the sources it was made from with a content digest (SHA-256 of a local file;
   the ETag and size of an object in a bucket): :mod:`layoutkit.storage.log`. Sources
   already listed are recognised and skipped, so running the same append twice writes
   nothing and says so. The append adds one log entry, its new sources'.
2. The remaining sources are walked as one archive (:mod:`layoutkit.hdf5.combined`). A
   shot the store already holds is left out when its data are the same and refused by
   name when not; what lies outside the shots must be what the store holds.
3. The new shots are written with the store's recipe, as any run writes, into a staging
   folder (local, ``--tmpdir``; for a store in a bucket written by a cluster's workers, a
   prefix beside it in the bucket, copied in by the bucket: :class:`Staged`), and the
   layout's ``append.merge`` says how they join the store (:class:`Merge`): which objects are added under which keys (nothing of the
   store is rewritten but its small shared documents; a signal-major series grows in
   place, :mod:`layoutkit.appending.grow`), which new documents are written, and the new root
   document. netCDF files along a record dimension are not staged: their rows are
   written after the store's through zarr, the new shapes held back until the root.
4. They are written in an order that keeps the store readable and whole
   (:func:`_apply`): under a lock (another append is refused in one sentence), a journal
   of the keys about to be added, then the added objects, then the root document, which
   is the commit: a reader sees the old store or the new one. What the old root
   referenced and the new one does not is deleted after it. In Icechunk all of it is
   one commit. A killed append leaves the journal; the next append (or
   :func:`recover`) removes what it added, or finishes what it committed.

A paged HDF5 file is not appended to: its pages order every shot's bytes by shot or by
signal across the whole file, and a new shot belongs in the middle of that order; run
``reorder`` on all the sources instead (refused in one sentence).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from layoutkit.errors import InvalidOptionError, LayoutkitError, OutputNotWritableError
from layoutkit.formats import LAYOUT_ATTR, PROVENANCE_ATTR, SIDECAR
from layoutkit.hdf5.combined import shot_of, walk_sources
from layoutkit.hdf5.files import check_source
from layoutkit.hdf5.model import Inventory
from layoutkit.layout import Layout
from layoutkit.merging import Merge, StoreDocs, folder_docs
from layoutkit.schedulers import file_mapper
from layoutkit.storage import SourceSet, as_sources
from layoutkit.storage.editing import JOURNAL, LOCK, BucketEditor, StoreEditor, editor_for
from layoutkit.storage.kv import settle_writes
from layoutkit.storage.log import LOG_KEY, committed, encode, entry_key, last_id, new_entry
from layoutkit.storage.sources import KnownFiles, digest_algorithm, source_record
from layoutkit.templates import natural_key
from layoutkit.timings import Stages

PAUSE_ENV = "LAYOUTKIT_APPEND_PAUSE"
"""Tests only: a path. Before its commit an append creates that file and waits while it
exists (at most a minute), so that a test can kill it there, or start a second append."""


# -- the run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AppendSummary:
    dest: str
    sources: int  # named
    new_sources: int  # not recorded in the store before
    new_shots: int
    known_shots: int  # in the new sources, and already in the store (equal)
    objects: int  # written (added, or documents rewritten)
    bytes_written: int
    seconds: float
    appends: int  # the store's appends, this one included
    records: int = 0  # rows added along the record dimension (netCDF files)
    data_bytes: int = 0  # the new shots' (or rows') data, uncompressed
    skipped: tuple[tuple[str, str], ...] = ()  # --skip-unsupported: datasets left out, and why
    store_bytes: int | None = None  # what a local store holds after it (written bytes replace rewritten ones)

    @property
    def wrote_nothing(self) -> bool:
        return self.objects == 0


def append(
    src: Any,
    dst: str | os.PathLike,
    typed: dict[str, Any] | None = None,
    storage_options: dict[str, str] | None = None,
    progress: Callable[[int], None] | None = None,
    stages: Stages | None = None,
    tmpdir: str | os.PathLike | None = None,
    concat_dim: str | None = None,
    shown: str | None = None,
) -> AppendSummary:
    """Add the shots of ``src`` (a path, a URL, several, a glob) to the store ``dst``.

    ``typed``: options given on the command line; only those of the run (workers,
    memory limit, scheduler) may differ from the store's recipe. ``shown``: how messages
    name what the store holds (a run in batches, :mod:`layoutkit.appending.batches`: its earlier
    files); by default ``dst``.

    Raises
    ------
    LayoutkitError
        For every expected failure (the store is then as it was): no store, a layout that
        cannot be appended to, another append running, a shot that differs.
    """
    t0 = time.perf_counter()
    if Path(str(dst)).is_file() or str(dst).endswith((".h5", ".hdf5", ".nc")):
        raise OutputNotWritableError(
            f"{dst} is an HDF5 file, and layoutkit does not append to paged HDF5: its pages order the bytes of every "
            "shot by shot or by signal across the whole file, so new shots belong in the middle of that order and the "
            "file would be rewritten whole; run reorder on all the sources into a new file instead."
        )
    editor = editor_for(str(dst), storage_options)
    root = _root(editor, dst)
    layout, provenance = _recorded(root, dst)
    options = _options(layout, provenance, typed or {}, dst)
    with editor.lock():
        if recover(editor):
            root = _root(editor, dst)
            provenance = json.loads(root["attributes"][PROVENANCE_ATTR])
        sources = as_sources(src if isinstance(src, (str, os.PathLike)) else list(src), options.template,
                             storage_options)
        members = sources.members if isinstance(sources, SourceSet) else (sources,)
        for m in members:
            check_source(m)
        log = editor.read_log(provenance)
        recorded = log.records  # joined once: a property over every entry
        seen = KnownFiles(recorded)
        algorithm = digest_algorithm(recorded)  # the store's own: SHA-256 in stores begun before BLAKE3
        records = {m: source_record(m, seen, read=layout.rewrites, algorithm=algorithm) for m in members}  # virtual: no byte read
        known = log.digests()
        new = [m for m in members if records[m]["digest"] not in known]
        appends = log.appends
        if not new:
            editor.discard()
            return AppendSummary(str(dst), len(members), 0, 0, 0, 0, 0, time.perf_counter() - t0, appends)
        fresh = SourceSet(tuple(new), options.template, concat_dim)
        added = _append_new(
            editor, root, layout, fresh, options, str(dst), storage_options, progress, stages, tmpdir, provenance,
            new_entry(log.next_number, "append", [records[m] for m in new]), shown)
        entry = added.entry
        editor.commit(f"layoutkit convert --append: {len(new)} sources, "
                      + (f"{entry['records']} records" if "records" in entry else f"{entry['shots']} shots"))
    return AppendSummary(str(dst), len(members), len(new), entry.get("shots", 0), added.known_shots, added.objects,
                         added.bytes_written, time.perf_counter() - t0, appends + 1, entry.get("records", 0),
                         added.data_bytes, added.skipped, _local_bytes(dst))


def _local_bytes(dst: str | os.PathLike) -> int | None:
    """Bytes of a local store (an Icechunk repository's folder included); None in a bucket."""
    from layoutkit.storage import is_url
    from layoutkit.storage.icechunk_repo import is_icechunk, parse, repository_bytes

    where = parse(str(dst))[0] if is_icechunk(str(dst)) else str(dst)
    return None if is_url(where) else repository_bytes(where, {})


@dataclass
class Added:
    """What an append added: the provenance's entry for it, the shots the store held
    already (equal), the objects and bytes written, the bytes of data added, and the
    datasets left out (``--skip-unsupported``)."""

    entry: dict[str, Any]
    known_shots: int = 0
    objects: int = 0
    bytes_written: int = 0
    data_bytes: int = 0
    skipped: tuple[tuple[str, str], ...] = ()


def _append_new(editor: StoreEditor, root: dict[str, Any], layout: Layout, sources: SourceSet, options: Any, dst: str,
                storage_options: dict[str, str] | None, progress: Any, stages: Stages | None,
                tmpdir: str | os.PathLike | None, provenance: dict[str, Any], entry: dict[str, Any],
                shown: str | None) -> Added:
    """Walk the new sources, join what they bring to the store, write it: the shots
    they add (staged, then merged), or the rows they add along the record dimension
    (netCDF files: :mod:`layoutkit.appending.grow`). ``entry``: the append's log entry, which
    records the new sources and, here, what they added."""
    inventory = walk_sources(sources, options.workers, file_mapper(options.scheduler, options.workers))
    added = Added(entry)
    with _staging(dst, tmpdir, options, storage_options) as staged:
        if _count_shots(inventory, options.template) == 0 and any(a.segments for a in inventory.arrays):
            merge = _records(editor, root, sources, inventory, shown or dst)
            added.data_bytes = sum(a.nbytes for a in inventory.arrays if a.segments is not None)
            entry["records"] = next(a.shape[0] for a in inventory.arrays if a.segments)
        else:
            inventory, added.known_shots = _new_shots(sources, inventory, editor, root, dst, storage_options, options,
                                                      shown or dst)
            entry["shots"] = _count_shots(inventory, options.template)
            if entry["shots"]:
                merge, summary = _stage_and_merge(layout, sources, inventory, options, staged, editor, progress,
                                                  stages)
                added.data_bytes, added.skipped = summary.logical_bytes, tuple(summary.skipped)
            else:  # every shot of the new sources is in the store already: only they are recorded
                merge = Merge(root=root)
        merge.root.setdefault("attributes", {})[PROVENANCE_ATTR] = json.dumps({**provenance, LOG_KEY: committed(entry)})
        merge.documents[entry_key(entry["entry"])] = encode(entry)  # a new key: journaled, removed if not committed
        added.objects, added.bytes_written = _apply(editor, merge, staged, entry["id"], dst)
    return added


def _records(editor: StoreEditor, root: dict[str, Any], sources: SourceSet, inventory: Inventory, dst: str) -> Merge:
    """netCDF files appended along the record dimension (:mod:`layoutkit.appending.grow`): they
    must continue the store, and what lies outside the dimension must be the store's."""
    import zarr

    from layoutkit.appending.grow import RecordsError, grow, plan_growth
    from layoutkit.hdf5.combined import read_whole

    plans = plan_growth(inventory, root, editor.get, dst)
    _check_outside(sources, replace(inventory, arrays=tuple(a for a in inventory.arrays if a.segments is None),
                                    groups=(), links=()), editor, root, dst,
                   "an append along the record dimension adds rows: what lies outside it must be what the store holds")
    dim = plans[0][1].dims[0]
    coordinate = next(((key, info) for key, info, _ in plans if info.dims == (dim,) and info.name == dim), None)
    if coordinate is not None:
        key, info = coordinate
        last = zarr.open_array(editor.zarr_store(), path=key, mode="r")[-1]
        segments = info.segments or ()  # an array grown along the record dimension has its segments
        first = read_whole(sources, replace(info, shape=segments[0].shape, segments=segments[:1]))[0]
        if not last < first:
            raise RecordsError(f"The new sources start at {first!s} along {dim!r}, and {dst} ends at {last!s}; an append "
                               "along the record dimension must follow the store.")
    after, added, write = grow(editor.zarr_store(), sources, plans, root)
    return Merge(root=root, after=after, added=added, write=write)


def _root(editor: StoreEditor, dst: Any) -> dict[str, Any]:
    data = editor.get("zarr.json")
    if data is None:
        raise OutputNotWritableError(
            f"{dst} holds no Zarr v3 store to append to (no zarr.json); write it first with layoutkit convert "
            "(an append adds to a store in Zarr format 3)."
        )
    return json.loads(data)


def _recorded(root: dict[str, Any], dst: Any) -> tuple[Layout, dict[str, Any]]:
    """The store's layout and provenance; refuses a store layoutkit did not write, and
    one whose layout keeps a document that grows with the shots (written before)."""
    from layoutkit.layouts import detect

    attrs = root.get("attributes") or {}
    try:
        provenance = json.loads(attrs.get(PROVENANCE_ATTR) or "")
    except ValueError:
        provenance = None
    if not isinstance(provenance, dict) or not isinstance(provenance.get("recipe"), dict):
        raise OutputNotWritableError(f"{dst} was not written by layoutkit convert (its root has no {PROVENANCE_ATTR!r} "
                                     "recipe), so layoutkit cannot append to it.")
    layout = detect(dst, attrs.get(LAYOUT_ATTR) or {})
    if not layout.appendable(attrs.get(LAYOUT_ATTR) or {}):
        said = layout.name
        raise OutputNotWritableError(
            f"{dst} is a {said} store of a version layoutkit does not append to (it keeps an index that grows with "
            "the shots in its root document); convert all its sources again into a new store."
        )
    return layout, provenance


RUN_KEYS = frozenset({"workers", "memory_limit", "batch_files", "scheduler", "overwrite", "skip_unsupported"})


def _options(layout: Layout, provenance: dict[str, Any], typed: dict[str, Any], dst: Any) -> Any:
    """The store's recipe, with the run's own options (workers...) as typed; a layout
    option typed that differs from the recipe is refused."""
    from layoutkit.recipes import build_options, recipe_from_provenance

    recipe = recipe_from_provenance(provenance, str(dst))
    recorded = build_options("convert", recipe, {})
    options = build_options("convert", recipe, {k: v for k, v in typed.items() if k in RUN_KEYS})
    given = build_options("convert", recipe, typed)
    for f in type(options).__dataclass_fields__:
        if f not in RUN_KEYS and getattr(given, f) != getattr(recorded, f):
            raise InvalidOptionError(
                f"{dst} was written with --{f.replace('_', '-')} {getattr(recorded, f)}; an append writes with the "
                f"store's own recipe: leave out --{f.replace('_', '-')}."
            )
    if getattr(options, "zarr_format", 3) != 3:
        raise OutputNotWritableError(f"{dst} is a Zarr format 2 store; layoutkit appends to Zarr format 3 stores.")
    return replace(options, overwrite=False)


def _count_shots(inventory: Inventory, template: str) -> int:
    shot = shot_of(template)
    return len({s for p in inventory.node_paths() if (s := shot(p)) is not None})


def _check_outside(sources: SourceSet, outside: Inventory, editor: StoreEditor, root: dict[str, Any], dst: str,
                   why: str) -> None:
    """Refuse new sources whose nodes outside what an append adds (``outside``: groups,
    and arrays every layout mirrors at their paths) differ from the store's. Compared as
    a mirrored store is (not through the layout's comparator, which would check the whole
    index); the attributes layoutkit adds to its nodes (``layoutkit*``) aside."""
    from layoutkit.equality.zarr_ import compare_zarr

    ours = frozenset(k for k in root.get("attributes", {}) if k.startswith("layoutkit"))
    # (the record of renamed nodes is the whole store's: held against every source by verify)
    found = [m for m in compare_zarr(sources, editor.zarr_store(), outside, index_attrs=ours, name=dst, names=False)
             if m.what != "extra"]
    if found:
        raise LayoutkitError(f"{found[0].path} differs between the new sources and {dst} ({found[0].detail}); {why}.")


def _new_shots(sources: SourceSet, inventory: Inventory, editor: StoreEditor, root: dict[str, Any], dst: str,
               storage_options: dict[str, str] | None, options: Any, shown: str) -> tuple[Inventory, int]:
    """The inventory of the shots of ``sources`` the store does not hold, and how many
    it holds already (equal). Refuses a shot the store holds with other data, and what
    lies outside the shots when it differs from the store's."""
    from layoutkit.archive import open_archive
    from layoutkit.readers.combined import same_shot

    shot = shot_of(options.template)
    mine = {s for p in inventory.node_paths() if (s := shot(p)) is not None}
    outside = replace(inventory, arrays=tuple(a for a in inventory.arrays if shot(a.path) is None),
                      groups=tuple(g for g in inventory.groups if shot(g.path) is None), links=())
    _check_outside(sources, outside, editor, root, shown,
                   "an append adds shots: what lies outside them must be what the store holds")
    with open_archive(dst, template=options.template, storage_options=storage_options) as store:
        held = mine & set(store.shots)
        if held:
            owners = {s: a.member for a in inventory.arrays if (s := shot(a.path)) in held}
            for s in sorted(held, key=natural_key):
                with open_archive(sources.members[owners.get(s, 0)], template=options.template,
                                  storage_options=storage_options) as member:
                    same_shot(s, store, member, shown)
    if not held:
        return inventory, 0
    keep = (lambda p: shot(p) not in held)
    return replace(inventory, arrays=tuple(a for a in inventory.arrays if keep(a.path)),
                   groups=tuple(g for g in inventory.groups if keep(g.path))), len(held)


@dataclass
class Staged:
    """Where the new shots' store is written before it joins the store: a local folder
    (beside a local store, so its files are renamed into it; else in ``--tmpdir``), or,
    for a store in a bucket written by a cluster's workers (``--scheduler tcp://...``),
    a prefix beside the store in its bucket, which every worker reaches and whose
    objects are copied into the store by the bucket itself (``CopyObject``)."""

    where: Path | str  # the folder, or the URL of the staged store
    storage_options: dict[str, str] = field(default_factory=dict)
    _listed: dict[str, int] | None = field(default=None, repr=False)  # the staged objects' sizes, listed once

    @property
    def in_bucket(self) -> bool:
        return isinstance(self.where, str)

    def destination(self) -> Any:
        from layoutkit.storage import destination
        from layoutkit.storage.local import StagingDestination

        if self.in_bucket:
            return destination(self.where, self.storage_options)
        return StagingDestination(self.where)

    def docs(self) -> StoreDocs:
        if not self.in_bucket:
            return folder_docs(Path(self.where))
        staged = BucketEditor(str(self.where), self.storage_options)
        return StoreDocs(staged.get, lambda: sorted(self._sizes()), staged.zarr_store)

    def _sizes(self) -> dict[str, int]:
        if self._listed is None:
            from layoutkit.storage.buckets import list_keys, store_at

            self._listed = dict(list_keys(store_at(str(self.where), self.storage_options), ""))
        return self._listed

    def move(self, editor: StoreEditor, key: str, to: str) -> int:
        """Put the staged object ``key`` into the store at ``to``; its bytes."""
        if self.in_bucket:
            assert isinstance(editor, BucketEditor)  # staged beside the store in its bucket (_staging)
            editor.copy_object(f"{self.where}/{key}", to)
            return self._sizes()[key]
        path = Path(self.where) / key
        nbytes = path.stat().st_size
        editor.put_file(to, path)
        return nbytes


@contextlib.contextmanager
def _staging(dst: Any, tmpdir: str | os.PathLike | None, options: Any,
             storage_options: dict[str, str] | None) -> Iterator[Staged]:
    """The staging of an append (:class:`Staged`), removed after it."""
    from layoutkit.storage import is_url
    from layoutkit.storage.buckets import delete_keys, list_keys, store_at
    from layoutkit.storage.icechunk_repo import is_icechunk

    text = str(dst).rstrip("/")
    if is_url(text) and not is_icechunk(text) and tmpdir is None and "://" in str(getattr(options, "scheduler", "")):
        name = text.rsplit("/", 1)
        url = f"{name[0]}/.{name[1]}.layoutkit-append-{uuid.uuid4().hex[:12]}"
        try:
            yield Staged(f"{url}/new.zarr", dict(storage_options or {}))
        finally:
            with contextlib.suppress(Exception):  # what is left is hidden, and named by the next listing
                store = store_at(url, dict(storage_options or {}))
                delete_keys(store, [k for k, _ in list_keys(store, "")])
        return
    local = not is_url(text) and not is_icechunk(text)
    where = Path(dst).resolve().parent if local and tmpdir is None else tmpdir
    folder = Path(tempfile.mkdtemp(prefix=f".{Path(text).name}.layoutkit-append-", dir=where))
    try:
        yield Staged(folder / "new.zarr")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _stage_and_merge(layout: Layout, sources: SourceSet, inventory: Inventory, options: Any, staged: Staged,
                     editor: StoreEditor, progress: Any, stages: Stages | None) -> tuple[Merge, Any]:
    """The new shots written as a store of their own, and how it joins the store; with the
    summary of their run."""
    from layoutkit import pipeline

    dest = staged.destination()
    planned = pipeline.plan(layout, sources, str(staged.where), options, inventory=inventory, stages=stages)
    summary = pipeline.run(layout, sources, dest, options, progress, planned, stages=stages)
    old = StoreDocs(editor.get, zarr_store=editor.zarr_store, set_refs=getattr(editor, "set_refs", None),
                    session=getattr(editor, "kv", None))
    return layout.merge(old, staged.docs(), options), summary


def _apply(editor: StoreEditor, merge: Merge, staged: Staged, append_id: str, name: str) -> tuple[int, int]:
    """Write a merge in the order that keeps the store whole (module docstring); returns
    the objects and bytes written."""
    added = [*merge.moves.values(), *(k for k in merge.documents if k != SIDECAR), *merge.added]
    sidecar_before = editor.get(SIDECAR) if SIDECAR in merge.documents else None
    journal = {"id": append_id, "added": added, "after": {k: v.decode() for k, v in merge.after.items()},
               "garbage": merge.garbage,
               "sidecar": sidecar_before.decode() if sidecar_before is not None else None}
    nbytes = 0
    if not editor.transactional:
        editor.put(JOURNAL, json.dumps(journal).encode())
    try:
        for key, data in merge.documents.items():  # the new nodes' metadata before their chunks (Icechunk wants it)
            nbytes += len(data)
            editor.put(key, data)
        if editor.transactional:  # and grown arrays' shapes before their new chunks: nothing shows before the commit
            for key, data in merge.after.items():
                editor.put(key, data)
        moves = list(merge.moves.items())
        if editor.transactional:  # a node's metadata before its chunks, as above
            moves.sort(key=lambda item: not item[1].endswith("zarr.json"))
        for source, key in moves:
            nbytes += staged.move(editor, source, key)
        if merge.write is not None:
            nbytes += merge.write()
        _pause()
        root = json.dumps(merge.root, allow_nan=False).encode()
        editor.put("zarr.json", root)  # the commit
    except BaseException:
        settle_writes()  # zarr's loop writes on for an interrupted main thread: undone only after
        if editor.transactional:
            editor.discard()
        else:
            _undo(editor, journal)
        raise
    _finish(editor, {**journal, "after": {}} if editor.transactional else journal)  # (put above, in the commit)
    return len(merge.moves) + len(merge.documents) + len(merge.added) + 1 + len(merge.after), nbytes + len(root)


def _pause() -> None:
    flag = os.environ.get(PAUSE_ENV)
    if not flag:
        return
    Path(flag).write_text(str(os.getpid()))
    deadline = time.monotonic() + 60
    while os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.05)


def _undo(editor: StoreEditor, journal: dict[str, Any]) -> None:
    """Remove what an append that did not commit added; put the sidecar back."""
    editor.delete(list(journal.get("added", [])))
    if journal.get("sidecar") is not None:
        editor.put(SIDECAR, journal["sidecar"].encode())
    if not editor.transactional:
        editor.delete([JOURNAL])


def _finish(editor: StoreEditor, journal: dict[str, Any]) -> None:
    """After the commit: the copies no reader relies on, the old lists gone, the journal gone."""
    for key, text in journal.get("after", {}).items():
        editor.put(key, text.encode())
    editor.delete(list(journal.get("garbage", [])))
    if not editor.transactional:
        editor.delete([JOURNAL])


def recover(editor: StoreEditor) -> bool:
    """Clean up after an append that was killed (its journal is there): remove what it
    added when it did not commit, finish it when it did. True when there was one."""
    data = editor.get(JOURNAL)
    if data is None:
        return False
    journal = json.loads(data)
    root = json.loads(editor.get("zarr.json") or b"{}")
    try:
        provenance = json.loads((root.get("attributes") or {}).get(PROVENANCE_ATTR) or "{}")
    except ValueError:
        provenance = {}
    if last_id(provenance) == journal.get("id"):  # appends hold the lock: the last committed is the journal's or not
        _finish(editor, journal)
    else:
        _undo(editor, journal)
    return True


__all__ = ["Added", "JOURNAL", "LOCK", "PAUSE_ENV", "AppendSummary", "append", "recover"]
