"""layoutkit's index of an Icechunk repository's nodes: one shot read without Icechunk's
snapshot.

Icechunk keeps the metadata of every node in one snapshot file, which a session loads
whole at its first read: 0.6 s at 50,000 shots of 5 signals (400,002 nodes), most of a
1.8 s read of one signal, and growing with the archive. So after each commit layoutkit
writes, beside the repository's own objects (:mod:`layoutkit.storage.beside`):

- **bucket documents** ``layoutkit.nodes/<digest>.json.zst``, each holding the node
  documents (``zarr.json``) and chunk references of about :data:`SHOTS_PER_BUCKET` shot
  groups. A shot group is a group at the depth of the template's shot component
  (``shots/1160930001``); its bucket is the CRC-32 of its path modulo the number of
  buckets. Named by the SHA-256 of their bytes, so a bucket an append did not change keeps
  its name and is not written again. zstd-compressed JSON: ``{"format": 1, "docs": {key:
  document}, "urls": [...], "versions": {url: version}, "refs": {array: [[chunk index,
  url number, offset, length], ...]}}``.
- **the head** ``layoutkit.nodes/snapshot-<SNAPSHOT ID>.json``: ``{"format": 1,
  "snapshot": ..., "depth": 2, "root": the root document without its consolidated
  metadata, "buckets": [names, in bucket order]}``.

A reader of snapshot S reads S's head (one small GET), the bucket of the shot it reads
(one GET) and the source bytes its chunks reference: nothing of Icechunk's. A head names
one snapshot, so it is never stale; a snapshot without one (committed by another tool, a
repository written before the index, a run whose index failed after its commit) is read
through Icechunk: slower, never wrong. The index serves node documents, the listing of a
shot group's nodes and references, nothing else: the root's whole document, listings
above the shots and written chunks come from Icechunk, so zarr-python and the proof read
the repository as Icechunk holds it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from zarr.storage import WrapperStore

from layoutkit.storage.beside import get as get_document
from layoutkit.storage.beside import put as put_document

PREFIX = "layoutkit.nodes/"
FORMAT = 1
SHOTS_PER_BUCKET = 32
"""Shot groups a bucket holds, on average: a bucket of 32 shots of 5 signals is ~10 KB
compressed; the head names one bucket per 32 shots (50 KB at 50,000 shots)."""


def head_name(snapshot: str) -> str:
    return f"{PREFIX}snapshot-{snapshot}.json"


def shot_depth(template: str) -> int:
    """How many path components a shot group has (``/shots/{shot}/signals/{signal}``: 2)."""
    return len([p for p in template[: template.index("{shot}")].split("/") if p]) + 1


_CHUNK_KEY = re.compile(r"^(.*)/c(?:/\d+)+$")  # an array's chunk (Zarr v3's default key encoding)


def _group_of(key: str, depth: int) -> str | None:
    """The shot group holding ``key`` (a node's document or a chunk), or None above the shots."""
    parts = key.split("/")
    return "/".join(parts[:depth]) if len(parts) > depth else None


def _bucket(group: str, count: int) -> int:
    return zlib.crc32(group.encode()) % count


# -- writing: after a commit ------------------------------------------------------------


def build(repo: Any, snapshot: str, location: str, storage_options: dict[str, str],
          references: Callable[..., Any] | None = None) -> bool:
    """Write the index of ``snapshot`` (a commit just made): its buckets, then its head.
    ``references(repo, snapshot, provenance, storage_options)``: the snapshot's chunk
    references (``arrays()`` giving ``(array, urls, [[chunk index, url number, offset,
    length], ...])``, and ``versions``), from the layout that set them; None: none. False
    when the repository's root holds no consolidated metadata to build the index from (it
    is then read through Icechunk)."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    from layoutkit.formats import PROVENANCE_ATTR
    from layoutkit.templates import DEFAULT_TEMPLATE

    store = repo.readonly_session(snapshot_id=snapshot).store
    buf = sync(store.get("zarr.json", default_buffer_prototype()))
    root = json.loads(buf.to_bytes()) if buf is not None else {}
    listed = (root.pop("consolidated_metadata", None) or {}).get("metadata")
    if not listed:
        return False
    provenance = _json(root.get("attributes", {}).get(PROVENANCE_ATTR))
    template = (provenance.get("recipe") or {}).get("template") or DEFAULT_TEMPLATE
    depth = shot_depth(template)
    groups = sorted({g for key in listed if (g := _group_of(f"{key.strip('/')}/zarr.json", depth))})
    count = max(1, -(-len(groups) // SHOTS_PER_BUCKET))
    buckets: list[dict[str, Any]] = [{"format": FORMAT, "docs": {}, "urls": [], "versions": {}, "refs": {}}
                                     for _ in range(count)]
    for key, doc in listed.items():
        name = f"{key.strip('/')}/zarr.json"
        group = _group_of(name, depth)
        if group is None:
            continue
        if doc.get("node_type") == "group":  # consolidation adds an empty listing to a group's own document
            doc = {k: v for k, v in doc.items() if k != "consolidated_metadata"}
        buckets[_bucket(group, count)]["docs"][name] = doc
    refs = references(repo, snapshot, provenance, storage_options) if references is not None else None
    numbers: list[dict[str, int]] = [{} for _ in range(count)]
    versions: dict[str, dict[str, Any]] = refs.versions if refs else {}
    for path, urls, chunks in refs.arrays() if refs else ():
        group = _group_of(f"{path}/c", depth)
        if group is None:
            continue
        k = _bucket(group, count)
        into, number = buckets[k], numbers[k]
        for index, url, offset, length in chunks:
            u = urls[url]
            if u not in number:
                number[u] = len(into["urls"])
                into["urls"].append(u)
                into["versions"][u] = versions.get(u, {})
            into["refs"].setdefault(path, []).append([index, number[u], offset, length])
    kept = _previous_buckets(repo, snapshot, location, storage_options)
    names = [_put_bucket(location, storage_options, b, kept) for b in buckets]
    head = {"format": FORMAT, "snapshot": snapshot, "depth": depth, "root": root, "buckets": names}
    put_document(location, storage_options, head_name(snapshot), json.dumps(head, separators=(",", ":")).encode())
    return True


def _put_bucket(location: str, storage_options: dict[str, str], bucket: dict[str, Any], kept: set[str]) -> str:
    """Write a bucket, unless the parent snapshot's index holds it already (``kept``: its
    name is its bytes' digest)."""
    import numcodecs

    data = bytes(numcodecs.Zstd(level=3).encode(json.dumps(bucket, separators=(",", ":"), sort_keys=True).encode()))
    name = f"{PREFIX}{hashlib.sha256(data).hexdigest()[:32]}.json.zst"
    if name not in kept:
        put_document(location, storage_options, name, data)
    return name


def _previous_buckets(repo: Any, snapshot: str, location: str, storage_options: dict[str, str]) -> set[str]:
    """The buckets the index of ``snapshot``'s parent names (none: no parent, or no index)."""
    import itertools

    parent = [s.id for s in itertools.islice(repo.ancestry(snapshot_id=snapshot), 2)][1:]
    index = open_index(location, storage_options, parent[0]) if parent else None
    return set(index.names) if index is not None else set()


def _json(text: Any) -> dict[str, Any]:
    try:
        found = json.loads(text) if isinstance(text, str | bytes) else text
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


# -- reading ----------------------------------------------------------------------------


class NodeIndex:
    """The index of one snapshot: its head, and its buckets read as they are needed."""

    def __init__(self, head: dict[str, Any], location: str, storage_options: dict[str, str]) -> None:
        self.depth: int = head["depth"]
        self.root: dict[str, Any] = head["root"]
        self.names: list[str] = head["buckets"]
        self.location, self.storage_options = location, storage_options
        self._buckets: dict[int, dict[str, Any]] = {}
        self._loading: dict[int, asyncio.Task[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.counted: Any = None
        """A reader's ``CountingStore.counted``: a bucket's GET is counted as the store's own."""

    def group_of(self, key: str) -> str | None:
        """The shot group whose bucket holds ``key``, or None: the key is not indexed. A
        chunk's key is placed by its array's path, as :func:`build` placed its reference
        (an array at the root, ``t2m/c/0/0/0``, is in no shot's bucket)."""
        key = key.strip("/")
        chunk = _CHUNK_KEY.match(key)
        return _group_of(f"{chunk.group(1)}/c" if chunk else key, self.depth)

    async def bucket(self, group: str) -> dict[str, Any]:
        """The bucket holding ``group``, fetched once however many reads ask for it at once."""
        k = _bucket(group, len(self.names))
        found = self._buckets.get(k)
        if found is not None:
            return found
        loop = asyncio.get_running_loop()
        with self._lock:
            task = self._loading.get(k)
            if task is None or task.get_loop() is not loop:  # a forked worker's loop is not its parent's
                task = self._loading[k] = loop.create_task(self._load(k))
        return await asyncio.shield(task)

    async def _load(self, k: int) -> dict[str, Any]:
        import numcodecs

        async def fetch() -> bytes:
            return (await get_document(self.location, self.storage_options, self.names[k])) or b""

        try:
            data = await (self.counted(fetch) if self.counted is not None else fetch())
            if not data:  # its bucket removed: the repository's own copy is still whole
                raise FileNotFoundError(f"{self.names[k]} is missing")
            found = json.loads(bytes(numcodecs.Zstd().decode(data)))
        except BaseException:
            with self._lock:
                self._loading.pop(k, None)
            raise
        with self._lock:
            self._buckets[k] = found
        return found

    async def document(self, key: str) -> bytes | None:
        """A node's ``zarr.json`` (None: there is no such node), for a key the index holds."""
        group = self.group_of(key)
        assert group is not None
        doc = (await self.bucket(group))["docs"].get(key.strip("/"))
        return None if doc is None else json.dumps(doc).encode()

    async def nodes_below(self, group: str) -> set[str]:
        """Every node in the shot group ``group`` (``/shots/S``), by path."""
        prefix = group.strip("/") + "/"
        docs = (await self.bucket(group.strip("/")))["docs"]
        return {"/" + k[: -len("/zarr.json")] for k in docs if k.startswith(prefix)}

    def bucket_number(self, group: str) -> int:
        return _bucket(group, len(self.names))

    async def load_buckets(self, keys: Iterable[str]) -> None:
        """The buckets of the shot groups holding ``keys``, fetched (each once)."""
        groups = {g for key in keys if (g := self.group_of(key))}
        await asyncio.gather(*(self.bucket(g) for g in groups))

    def loaded(self, group: str) -> dict[str, Any]:
        """The bucket of ``group``, loaded already (:meth:`load_buckets`): its ``refs``,
        ``urls`` and ``versions`` as the layout that set them wrote them."""
        return self._buckets[_bucket(group, len(self.names))]


def open_index(location: str, storage_options: dict[str, str], snapshot: str) -> NodeIndex | None:
    """The index of ``snapshot``, or None when it has none (read through Icechunk)."""
    from zarr.core.sync import sync

    data = sync(get_document(location, storage_options, head_name(snapshot)))
    head = _json(data) if data else {}
    if head.get("format") != FORMAT or head.get("snapshot") != snapshot:
        return None
    return NodeIndex(head, location, storage_options)


class IndexedStore(WrapperStore[Any]):
    """An Icechunk session's store whose node documents inside shot groups come from the
    snapshot's :class:`NodeIndex`; every other key from Icechunk."""

    node_index: NodeIndex

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        if byte_range is None and key.endswith("zarr.json") and self.node_index.group_of(key) is not None:
            try:
                data = await self.node_index.document(key)
            except FileNotFoundError:
                return await self._store.get(key, prototype, byte_range)
            return None if data is None else prototype.buffer.from_bytes(data)
        return await self._store.get(key, prototype, byte_range)


def indexed(store: Any, location: str, storage_options: dict[str, str], snapshot: str) -> Any:
    """``store`` read through the index of ``snapshot`` where it has one, else as it is."""
    try:
        index = open_index(location, storage_options, snapshot)
    except Exception:  # noqa: BLE001 - an unreadable index is no index: Icechunk reads it all
        index = None
    if index is None:
        return store
    wrapped = IndexedStore(store)
    wrapped.node_index = index
    return wrapped


def node_index_of(store: Any) -> NodeIndex | None:
    """The :class:`NodeIndex` under ``store`` (wrapped by counting or other stores), or None."""
    from layoutkit.storage.counting import layer_attribute

    return layer_attribute(store, "node_index", NodeIndex)


__all__ = ["FORMAT", "PREFIX", "SHOTS_PER_BUCKET", "IndexedStore", "NodeIndex", "build", "head_name", "indexed",
           "node_index_of", "open_index", "shot_depth"]
