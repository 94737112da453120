"""How the staged store of new shots joins a store: the contract of a layout's append
part, below the layouts.

A layout that can append (:attr:`layoutkit.layout.Layout.appends`) ships an ``append.py``
whose ``merge(old, new, options)`` returns a :class:`Merge`: which staged objects move
into the store under which keys, which documents are written before the root, the new
root document (the commit), what is rewritten after it and what it no longer references.
:mod:`layoutkit.appending.append` (the command) stages the new shots, asks the layout's merge, and
applies it with a journal so that a killed append leaves the store as it was. What the
merges share is here: the store's documents as they read them (:class:`StoreDocs`), the
shots of a listing, the sidecar and root-level lists joined, and arrays grown by rows
(:func:`copy_rows`: the new rows written after the store's, each array's new shape held
back until the root gives it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from layoutkit.hdf5.combined import shot_of
from layoutkit.templates import natural_key

SLAB_BYTES = 16 * 1024**2
"""Rows written at a time, at most this many bytes of them (memory bound)."""


@dataclass
class Merge:
    """How the staged store of the new shots joins the store (a layout's ``append.merge``)."""

    moves: dict[str, str] = field(default_factory=dict)  # staged key -> the store's key (new keys only)
    documents: dict[str, bytes] = field(default_factory=dict)  # new keys, written before the root
    root: dict[str, Any] = field(default_factory=dict)  # the new root document: the commit
    after: dict[str, bytes] = field(default_factory=dict)  # copies no reader relies on, written after the root
    garbage: list[str] = field(default_factory=list)  # keys the new root no longer references
    added: list[str] = field(default_factory=list)  # keys ``write`` adds (for the journal)
    write: Callable[[], int] | None = None  # writes into the store itself, before the root; its bytes


class StoreDocs:
    """JSON documents and objects of a store, read as the merges need them."""

    def __init__(self, get: Callable[[str], bytes | None], keys: Callable[[], list[str]] | None = None,
                 zarr_store: Callable[[], Any] | None = None, set_refs: Callable[..., None] | None = None,
                 session: Any = None) -> None:
        self._get = get
        self._keys = keys
        self._zarr_store = zarr_store
        self._set_refs = set_refs
        self.session = session
        """The store's Icechunk session, as the writers see it (an
        :class:`~layoutkit.storage.icechunk_repo.IcechunkKV`), when it is an Icechunk
        repository's: a layout adds to its commit there."""

    def set_refs(self, path: str, chunks: list[list[Any]], versions: dict[str, dict[str, Any]]) -> None:
        """Make chunks of array ``path`` references into source files (a store that holds
        them: an Icechunk repository's, :meth:`~layoutkit.storage.editing.IcechunkEditor.set_refs`)."""
        if self._set_refs is None:
            raise TypeError("this store holds no references to source files")
        self._set_refs(path, chunks, versions)

    def zarr_store(self) -> Any:
        """The store as a zarr store (to read its arrays, or to write the store's own)."""
        assert self._zarr_store is not None
        return self._zarr_store()

    def get(self, key: str) -> bytes | None:
        return self._get(key)

    def json(self, key: str) -> dict[str, Any]:
        data = self._get(key)
        return json.loads(data) if data else {}

    def keys(self) -> list[str]:
        """Every key (the staged store only: the store itself is never listed)."""
        assert self._keys is not None
        return self._keys()


def folder_docs(path: Path) -> StoreDocs:
    """The staged store (a local folder) as :class:`StoreDocs`."""

    def get(key: str) -> bytes | None:
        try:
            return (path / key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def zarr_store() -> Any:
        import zarr.storage

        return zarr.storage.LocalStore(str(path), read_only=True)

    return StoreDocs(get, lambda: sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()),
                     zarr_store)


def shots_in(keys: Sequence[str], template: str) -> set[str]:
    """The shots whose groups hold ``keys`` (store keys mirror source paths; the key of
    an object names its node's folder, so ``shots/zarr.json`` is no shot)."""
    shot = shot_of(template)
    return {s for k in keys if "/" in k and (s := shot("/" + k.rsplit("/", 1)[0])) is not None}


def shot_keys(keys: Sequence[str], template: str, shots: set[str]) -> list[str]:
    """The keys that lie inside the groups of ``shots``."""
    shot = shot_of(template)
    return [k for k in keys if "/" in k and shot("/" + k.rsplit("/", 1)[0]) in shots]


def merged_sidecar(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The store's ``layoutkit.json`` with the new shots' entries added: lists joined
    (without repeats), maps joined, the rest the store's."""
    out = dict(old)
    for key, value in new.items():
        mine = out.get(key)
        if isinstance(mine, list) and isinstance(value, list):
            seen = {json.dumps(v, sort_keys=True) for v in mine}
            out[key] = mine + [v for v in value if json.dumps(v, sort_keys=True) not in seen]
        elif isinstance(mine, dict) and isinstance(value, dict):
            out[key] = {**mine, **value}
        elif key not in out:
            out[key] = value
    return out


def mirrored_merge(old: StoreDocs, new: StoreDocs, template: str) -> Merge:
    """How the new shots of a store that mirrors the hierarchy join it: their nodes are
    objects of their own, moved in at their paths; the root's consolidated metadata (when
    it has some) lists them too, and the sidecars are joined. The shot-major merge, and
    the base of any layout that mirrors the shots' nodes."""
    from layoutkit.formats import SIDECAR

    keys = new.keys()
    shots = shots_in(keys, template)
    shot = shot_of(template)
    root, staged = old.json("zarr.json"), new.json("zarr.json")
    listed = (root.get("consolidated_metadata") or {}).get("metadata")
    if listed is not None:
        added = (staged.get("consolidated_metadata") or {}).get("metadata") or {}
        listed.update({k: v for k, v in added.items() if shot("/" + k) in shots})
    sidecar = merged_sidecar(old.json(SIDECAR), new.json(SIDECAR))
    return Merge(moves={k: k for k in shot_keys(keys, template, shots)},
                 documents={SIDECAR: json.dumps(sidecar, indent=2).encode()}, root=root)


def text_list(name: str, values: list[str], like: dict[str, Any]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A root-level list of names (``/_shots``...) written as a new text array ``name``
    with the codecs of ``like`` (the old list's metadata): its metadata and its objects."""
    import zarr
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync
    from zarr.storage import MemoryStore

    meta = json.loads(json.dumps(like))
    meta["shape"] = [len(values)]
    meta["chunk_grid"]["configuration"]["chunk_shape"] = [max(1, len(values))]
    held: dict[str, Any] = {}
    store = MemoryStore(held)
    sync(store.set(f"{name}/zarr.json", default_buffer_prototype().buffer.from_bytes(json.dumps(meta).encode())))
    if values:
        zarr.open_array(store, path=name, mode="r+")[:] = values
    objects = {k: v.to_bytes() for k, v in held.items()}
    return meta, objects


def read_list(docs: StoreDocs, name: str, meta: dict[str, Any]) -> list[str]:
    """The values of a root-level text array of a store (its metadata ``meta`` from the root)."""
    import zarr
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync
    from zarr.storage import MemoryStore

    store = MemoryStore()
    for key in array_keys(name, meta):
        data = json.dumps(meta).encode() if key.endswith("zarr.json") else docs.get(key)
        if data is not None:
            sync(store.set(key, default_buffer_prototype().buffer.from_bytes(data)))
    return [str(v) for v in np.asarray(zarr.open_array(store, path=name, mode="r")[:])]


def join_list(old: StoreDocs, new: StoreDocs, root: dict[str, Any], staged: dict[str, Any], field: str, base: str,
              out: Merge) -> None:
    """A root-level list of names (the layout attribute's ``field``: ``"shots"``...) with
    the staged store's values added, written again under a new name (``{base}_aN``)
    which the root's layout attribute and node listing take: a reader holding the old
    root reads the old list, removed once the new root is in. Shots in natural order."""
    from layoutkit.formats import LAYOUT_ATTR, NODES_ATTR

    layout, nodes = root["attributes"][LAYOUT_ATTR], root["attributes"][NODES_ATTR]
    staged_layout, staged_nodes = staged["attributes"][LAYOUT_ATTR], staged["attributes"][NODES_ATTR]
    listed, theirs = layout.get(field), staged_layout.get(field)
    if listed is None and theirs is None:
        return
    values = read_list(old, listed, nodes[listed]) if listed else []
    values += read_list(new, theirs, staged_nodes[theirs]) if theirs else []
    name = next_name(base, set(nodes))
    like = nodes.pop(listed) if listed else staged_nodes[theirs]
    meta, objects = text_list(name, natural(values) if field == "shots" else sorted(set(values)), like)
    nodes[name] = meta
    layout[field] = name
    out.documents.update(objects)
    if listed:
        out.garbage += array_keys(listed, like)


def next_name(base: str, taken: set[str]) -> str:
    """``base`` followed by the first ``_aN`` not in ``taken`` (a new name for a list)."""
    n = 1
    while f"{base}_a{n}" in taken:
        n += 1
    return f"{base}_a{n}"


def array_keys(name: str, meta: dict[str, Any]) -> list[str]:
    """Every object of a one-dimensional array ``name`` (its metadata and chunks)."""
    n = int(meta.get("shape", [0])[0])
    chunk = max(1, int(meta["chunk_grid"]["configuration"]["chunk_shape"][0]))
    return [f"{name}/zarr.json"] + [f"{name}/c/{i}" for i in range(-(-n // chunk))]


def natural(values: Sequence[str]) -> list[str]:
    return sorted(dict.fromkeys(values), key=natural_key)


# -- arrays grown by rows ---------------------------------------------------------------


def new_chunk_keys(key: str, meta: dict[str, Any], rows: int, at: int | None = None) -> list[str]:
    """The keys of the chunks (or shards) an array gains when ``rows`` rows follow its
    last (from row ``at``, when given)."""
    import itertools

    grid = meta["chunk_grid"]["configuration"]["chunk_shape"]
    sep = meta.get("chunk_key_encoding", {}).get("configuration", {}).get("separator", "/")
    old = int(meta["shape"][0]) if at is None else at
    new = old + rows
    first, last = -(-old // grid[0]), -(-new // grid[0])
    spans = [range(first, last), *(range(-(-n // c)) for n, c in zip(meta["shape"][1:], grid[1:]))]
    return [f"{key}/c{sep}" + sep.join(map(str, idx)) for idx in itertools.product(*spans)]


def _held_class() -> type:
    from zarr.storage import WrapperStore

    class HeldMetadata(WrapperStore):
        """A zarr store whose array documents named in ``held`` are read from there and
        never written (the root gives them, later); every other key goes through."""

        def __init__(self, store: Any, held: dict[str, bytes]) -> None:
            super().__init__(store)
            self.held = held

        async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
            if key in self.held:
                return prototype.buffer.from_bytes(self.held[key])
            return await self._store.get(key, prototype, byte_range)

        async def set(self, key: str, value: Any) -> None:
            if key not in self.held:
                await self._store.set(key, value)

    return HeldMetadata


def held_store(store: Any, held: dict[str, bytes]) -> Any:
    """``store`` with the array documents ``held`` read from there and never written."""
    return _held_class()(store, held)


def grown(meta: dict[str, Any], rows: int, at: int | None = None) -> dict[str, Any]:
    """An array's metadata with ``rows`` more rows (after row ``at``, when given)."""
    return {**meta, "shape": [(int(meta["shape"][0]) if at is None else at) + rows, *meta["shape"][1:]]}


def next_boundary(meta: dict[str, Any]) -> int:
    """The first row of the array's first chunk (or shard) that holds none of its rows:
    rows written from there leave every object of the array as it is."""
    grid = int(meta["chunk_grid"]["configuration"]["chunk_shape"][0])
    return -(-int(meta["shape"][0]) // grid) * grid


IN_FLIGHT = 16
"""Arrays appended to at once (:func:`copy_rows`): their Python work is small and their
I/O waits, so many at once cost one array's time; each holds at most a slab of rows."""


def copy_rows(source: Any, target: Any, items: list[tuple[str, str, dict[str, Any], Any, int | None]]) -> int:
    """Append the rows of arrays of the zarr store ``source`` to arrays of ``target``:
    each item ``(source array, target array, the target's metadata now, transform or
    None, first row or None: after the last)``, the new shapes held back
    (:func:`held_store`); :data:`IN_FLIGHT` arrays at a time, a slab of rows at a time,
    on zarr's own event loop (one round trip into it for them all). Returns the bytes."""
    import asyncio

    import zarr.api.asynchronous as za
    from zarr.core.sync import sync

    async def one(gate: asyncio.Semaphore, name: str, key: str, meta: dict[str, Any], transform: Any,
                  at: int | None) -> int:
        async with gate:
            src = await za.open_array(store=source, path=name, mode="r")
            rows = int(src.shape[0])
            held = {f"{key}/zarr.json": json.dumps(grown(meta, rows, at)).encode()}
            dst = await za.open_array(store=held_store(target, held), path=key, mode="r+")
            first = int(meta["shape"][0]) if at is None else at
            row_bytes = max(1, int(np.prod(src.shape[1:], dtype=np.int64)) * np.dtype(src.dtype).itemsize)
            step, nbytes = max(1, SLAB_BYTES // row_bytes), 0
            for lo in range(0, rows, step):
                hi = min(rows, lo + step)
                values = np.asarray(await src.getitem(slice(lo, hi)))
                await dst.setitem(slice(first + lo, first + hi), transform(values) if transform else values)
                nbytes += values.nbytes
            return nbytes

    async def every() -> int:
        gate = asyncio.Semaphore(IN_FLIGHT)  # made on zarr's loop
        return sum(await asyncio.gather(*(one(gate, *item) for item in items)))

    return sync(every())


__all__ = ["IN_FLIGHT", "SLAB_BYTES", "Merge", "StoreDocs", "array_keys", "copy_rows", "folder_docs", "grown",
           "mirrored_merge",
           "held_store", "join_list", "merged_sidecar", "natural", "new_chunk_keys", "next_boundary", "next_name",
           "read_list", "shot_keys", "shots_in", "text_list"]
