"""The reader of the Zarr layout ``convert`` writes by default: the mirror of the HDF5
hierarchy (``shot-major``), over a :class:`~layoutkit.storage.counting.CountingStore`; and
the opening of a Zarr store from its one (consolidated) root document, which every Zarr
reader builds on."""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np
import xarray as xr
import zarr

from layoutkit.formats import (
    ARRAY_MEMBERS_ATTR,
    ARRAY_TYPE_ATTR,
    DIMENSIONS_ATTR,
    LAYOUT_ATTR,
    LONG_DOUBLE_ATTR,
    NODES_ATTR,
    PROVENANCE_ATTR,
    REFERENCE_MEMBERS_ATTR,
    REGION_MEMBERS_ATTR,
    RENAMED_KEY,
    SEQUENCE_ATTR,
    SEQUENCE_LENGTHS_ATTR,
    SEQUENCE_MEMBERS_ATTR,
    SIDECAR,
    TEXT_SEQUENCE_ATTR,
    TYPE_RULE_ATTRS,
    element_dims,
    joined_members,
    joined_references,
    joined_sequences,
    long_doubles,
    scale_by_name,
    sequences,
    text_sequences,
)
from layoutkit.options import ZarrFormat
from layoutkit.readers.base import (
    Archive,
    ScaleCoordinate,
    Selection,
    bytes_back,
    lazy_data,
    plain_attrs,
    scale_coordinate,
    scan_selections,
    shot_tree,
    with_coords,
)
from layoutkit.readers.zarr_direct import DirectRead, plan_direct_read
from layoutkit.storage.counting import Counter, CountingStore, LatencyModel
from layoutkit.storage.nodeindex import node_index_of
from layoutkit.templates import DEFAULT_TEMPLATE

# partial reads zarr makes at once, by the chunks they touch (fetched and decoded): a
# signal of 100 shots from shot-packed Zarr is 200 such reads, 0.6 MiB each, and 8 threads
# doing that at once held 0.8 GB
ZARR_BATCH_BYTES = 32 * 1024**2
AHEAD_DECODED_BYTES = 64 * 1024**2
"""``iter_shots`` decodes a shot ahead (while the caller builds the current one) when its
arrays hold at most this; a larger shot is only fetched ahead. Beyond the next shot, a
further one is started only while the shots on their way hold less than this."""
AHEAD_SHOTS = 3
"""How many shots ``iter_shots`` keeps on their way. One shot's GET waits for the latency
and the transfer (18 ms for 4 MB at 10 ms), longer than building a shot of 70 signals
(12 ms): with one ahead, reading 8 shots from a bucket waited on the requests in turn
(0.22-0.24 s); with three, 0.19 s (two: 0.21 s; four: 0.20 s)."""


class ZarrArchive(Archive):
    """A Zarr store from ``convert`` (the mirror of the HDF5 hierarchy: shot-major).

    Metadata comes from the consolidated copy when there is one, so listing and opening
    arrays cost no requests beyond the root document.
    """

    format = "zarr"
    names_stored = True
    layout = "shot-major"
    hidden_attrs: frozenset[str] = TYPE_RULE_ATTRS | {NODES_ATTR}
    """Attributes that carry structure, not the source's: never shown as attributes (a
    layout's reader adds its index's)."""
    reads_node_by_node: bool = True
    _kids: dict[str, list[str]] | None = None  # _child_index, and the count of nodes it was built from
    _kids_of: int = -1
    """Whether the reader can work node by node when the root's consolidated metadata is
    large (:data:`ROOT_HEAD_BYTES`): a shot's nodes are found by listing the shot's
    group and read from their own documents, and the root's metadata is read whole only
    when something needs every node (the shot list, a signal of every shot, a scan). A
    layout whose index lives in the root's metadata reads it whole at opening."""

    def __init__(
        self,
        path: Path,
        template: str = DEFAULT_TEMPLATE,
        model: LatencyModel | None = None,
        sleep: Any = None,
        root: zarr.Group | None = None,
    ) -> None:
        super().__init__(path, template)
        if root is None:
            self.store, self.root = open_counted(path, model, self.counter, sleep)
        elif isinstance(root.store, CountingStore):
            # opened by open_archive to read the layout: parsing consolidated metadata
            # costs seconds for ten thousand arrays, so it is not done twice
            self.store, self.root = root.store, root
            self.counter = self.store.counter
        else:  # a root the caller opened its own way (e.g. without consolidated metadata)
            self.store, self.root = counting_store(path, model, self.counter, sleep, base=root.store), root
        if (index := node_index_of(self.store)) is not None:
            index.counted = self.store.counted  # its buckets' GETs counted as the store's
        if getattr(self.root, "shallow", False) and not self.reads_node_by_node:
            self.root.load_all()
        self._nodes = self._list_nodes()
        self._listed: dict[str, set[str]] = {}  # node by node: a shot group -> the nodes below it
        self._scales: dict[str, list[list[str]]] | None = None
        self._sidecar_doc: dict[str, Any] | None = None
        self._source_names: dict[str, str] | None = None  # stored name -> the source's (source_name)
        self._renamed_of, self._any_renamed = -1, True  # _may_rename: of how many nodes, and its answer
        self._chunk_plans: dict[str, DirectRead | None] = {}  # of any number of chunks (_direct)
        self._local = threading.local()  # per thread: the objects fetched ahead for its next read
        self._kept_objects: dict[str, Any] = {}  # objects fetched for a later read (_fetch_with_next_read)

    def _list_nodes(self) -> dict[str, Any]:
        """Every node below the root: path -> metadata."""
        if isinstance(self.root, _LazyRoot):
            return {"/" + k: v for k, v in self.root.nodes.items()}
        meta = self.root.metadata.consolidated_metadata
        if meta is not None:
            flat = meta.flattened_metadata
        else:
            flat = {name: node.metadata for name, node in self.root.members(max_depth=None)}
        return {"/" + k.strip("/"): v for k, v in flat.items()}

    def load_nodes(self, paths: list[str]) -> dict[str, dict[str, Any]]:
        """Nodes the consolidated metadata leaves out (a layout whose root must not grow
        with the shots keeps its shots' nodes out): their own ``zarr.json`` documents,
        fetched at once and adopted (:meth:`adopt_nodes`); the documents returned by
        path (a node that does not exist has none)."""
        missing = [p for p in dict.fromkeys(paths) if p not in self._nodes]
        raw = self._fetch([f"{p.strip('/')}/zarr.json" for p in missing]) if missing else []
        docs = {p: json.loads(bytes(b)) for p, b in zip(missing, raw) if b is not None}
        self.adopt_nodes(docs)
        return docs

    def adopt_nodes(self, docs: dict[str, dict[str, Any]]) -> None:
        """Add nodes, given their ``zarr.json`` documents by path, to :attr:`_nodes` and
        to the root, as if the consolidated metadata had listed them."""
        for path, doc in docs.items():
            attrs = doc.get("attributes") or {}
            node = _ArrayDoc(tuple(doc["shape"]), attrs, doc) if doc.get("node_type") == "array" else _GroupDoc(attrs)
            self._nodes["/" + path.strip("/")] = node
            if isinstance(self.root, _LazyRoot):
                self.root.nodes[path.strip("/")] = node

    # -- node by node: a large consolidated root read only when every node is needed ----

    @property
    def _shallow(self) -> bool:
        return bool(getattr(self.root, "shallow", False))

    def _every_node(self) -> None:
        """Read the root's metadata whole (node by node until now): every node known."""
        if self._shallow:
            self.root.load_all()
            self._nodes.update({"/" + k: v for k, v in self.root.nodes.items()})

    def _shot_group(self, path: str) -> str | None:
        """The shot group holding ``path`` by the template (``/shots/S`` for
        ``/shots/S/signals/ip``), or None for a path above the shots."""
        prefix = [p for p in self.template[: self.template.index("{shot}")].split("/") if p]
        parts = [p for p in path.split("/") if p]
        if len(parts) <= len(prefix) or parts[: len(prefix)] != prefix:
            return None
        return "/" + "/".join(parts[: len(prefix) + 1])

    def _below(self, path: str) -> set[str] | None:
        """Node by node: every node in the shot group holding ``path`` (one listing of the
        group, kept), or None when ``path`` is in no shot group (then every node is read)."""
        shot = self._shot_group(path)
        if shot is None:
            self._every_node()
            return None
        from zarr.core.sync import sync

        if shot not in self._listed and (index := node_index_of(self.store)) is not None:
            with contextlib.suppress(FileNotFoundError):  # the snapshot's index: Icechunk's snapshot not loaded
                self._listed[shot] = sync(index.nodes_below(shot))
        if shot not in self._listed:
            async def listing() -> list[str]:
                return [key async for key in self.store.list_prefix(shot.strip("/") + "/")]

            keys = sync(listing())
            found = {"/" + k[: -len("/zarr.json")] for k in keys if k.endswith("/zarr.json")}
            if keys:
                found.add(shot)
            self._listed[shot] = found
        return self._listed[shot]

    def _ensure(self, paths: Iterable[str]) -> None:
        """Node by node: the documents of ``paths`` that exist, read (at once) if not yet."""
        if not self._shallow:
            return
        wanted = [p for p in paths if p not in self._nodes]
        if not wanted:
            return
        listed = [p for p in wanted if (below := self._below(p)) is not None and p in below]
        if self._shallow and listed:
            self.load_nodes(listed)

    def children(self, group: str) -> list[str]:
        key = "/" if group in ("", "/") else group.rstrip("/")
        if self._shallow and (below := self._below(key)) is not None:
            depth = key.count("/") + 1
            return sorted({p.rsplit("/", 1)[1] for p in below if p.startswith(key + "/") and p.count("/") == depth})
        return list(self._child_index().get(key, ()))

    def _child_index(self) -> dict[str, list[str]]:
        """Group -> the names of its members, built once from :attr:`_nodes` (again when
        nodes were added). Scanning every node for each group's members made listing the
        shots of a 30,000-array store take 20 s (quadratic); now 0.07 s."""
        index = self._kids
        if index is None or self._kids_of != len(self._nodes):
            index = {}
            for path in self._nodes:
                parent, _, name = path.rpartition("/")
                if name:  # not the root
                    index.setdefault(parent or "/", []).append(name)
            self._kids, self._kids_of = index, len(self._nodes)
        return index

    def node(self, path: str) -> Any | None:
        """A node's metadata as the store's documents hold it (listed or loaded so far;
        :meth:`load_nodes` fetches more), or None."""
        return self._nodes.get(path)

    def exists(self, path: str) -> bool:
        if path in self._nodes:
            return True
        if self._shallow and (below := self._below(path)) is not None:
            return path in below
        return path in self._nodes

    def has_shots(self) -> bool:
        if self._shallow:  # the shot list is the root's whole metadata: a shot's group tells as well
            return self._shot_nodes_exist()
        return super().has_shots()

    def _shot_nodes_exist(self) -> bool:
        """Node by node: whether the template's shots group has a member (one listing)."""
        from zarr.core.sync import sync

        prefix = self.template[: self.template.index("{shot}")].strip("/")

        async def first() -> bool:
            async for _ in self.store.list_dir(prefix):
                return True
            return False

        return sync(first())

    def group_attrs(self, path: str) -> dict[str, Any]:
        if path in ("", "/"):  # the root: its attributes are the root document's
            return bytes_back(plain_attrs(dict(self.root.attrs), self.hidden_attrs | {LAYOUT_ATTR}))
        self._ensure([path])
        meta = self._nodes.get(path)
        if meta is None or hasattr(meta, "shape"):
            return {}
        return bytes_back(plain_attrs(dict(meta.attributes), self.hidden_attrs))

    def zarr_array(self, path: str) -> zarr.Array:
        self._ensure([path])
        node = self.root[path.strip("/")]
        if not isinstance(node, zarr.Array):
            raise KeyError(f"{path} is a group in {self.path}, not an array")
        return node

    def arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        self._every_node()
        out = {}
        for p, m in self._nodes.items():
            if getattr(m, "node_type", None) == "array" or hasattr(m, "shape"):
                out[p] = (tuple(m.shape), zarr_dtype(m))
        return out

    def fill_attribute(self, path: str) -> Any:
        if getattr(self.root.metadata, "zarr_format", 3) != 2 or not hasattr(self._nodes.get(path), "shape"):
            return None
        meta = self.zarr_array(path).metadata
        return meta.fill_value if np.dtype(meta.dtype.to_native_dtype()).kind in "iufcb" else None

    def stored_chunks(self, path: str) -> tuple[int, ...] | None:
        self._ensure([path])
        node = self._nodes.get(path)
        if isinstance(node, _ArrayDoc):  # the outer grid: shards where there are shards
            grid = node.doc.get("chunk_grid") or {}
            shape = (grid.get("configuration") or {}).get("chunk_shape") if grid.get("name") == "regular" else None
            return tuple(shape) if shape and len(shape) == len(node.shape) else None
        if node is None or not hasattr(node, "shape"):
            return None
        a = self.zarr_array(path)
        return tuple(a.shards or a.chunks) if a.ndim else None

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        a = self.zarr_array(path)
        return self._joined(path, np.asarray(a[selection] if selection else a[...]))

    def _joined(self, path: str, values: np.ndarray) -> np.ndarray:
        """``values`` of the array at ``path`` as the source holds them: a compound's array
        members, stored a field an element, joined again (:data:`~layoutkit.formats.ARRAY_MEMBERS_ATTR`),
        and its sequence members, stored as bytes and lengths (:data:`~layoutkit.formats.SEQUENCE_MEMBERS_ATTR`);
        variable-length sequences, stored as their bytes, as arrays (:data:`~layoutkit.formats.SEQUENCE_ATTR`)."""
        if values.dtype.names:
            attrs = self._attrs_of(path)
            members, seqs = attrs.get(ARRAY_MEMBERS_ATTR), attrs.get(SEQUENCE_MEMBERS_ATTR)
            values = joined_members(values, members) if members else values
            if refs := [*attrs.get(REFERENCE_MEMBERS_ATTR, ()), *attrs.get(REGION_MEMBERS_ATTR, ())]:
                values = joined_references(values, refs)  # the paths references point at, regions' text
            return joined_sequences(values, seqs, attrs.get(SEQUENCE_LENGTHS_ATTR)) if seqs else values
        if values.dtype == np.dtype(object) and (kind := self._attrs_of(path).get(SEQUENCE_ATTR)):
            return sequences(values, str(kind))
        if values.dtype.kind in "OTU" and self._attrs_of(path).get(TEXT_SEQUENCE_ATTR):
            return text_sequences(values)
        if values.dtype.kind in "OTU" and (kind := self._attrs_of(path).get(LONG_DOUBLE_ATTR)):
            return long_doubles(values, str(kind))
        return values

    def blocks(self) -> list[tuple[str, Selection]]:
        out: list[tuple[str, Selection]] = []
        for p in sorted(self.arrays()):
            a = self.zarr_array(p)
            grid = a.shards or a.chunks
            out.extend((p, sel) for sel in scan_selections(tuple(a.shape), tuple(grid),
                                                           partial(stored_origins, a)))
        return out

    def _scale_paths(self, path: str) -> list[list[str]]:
        """The dimension scales of each axis, as ``convert`` recorded them in its sidecar;
        else found by dimension name in the array's group or an ancestor's subgroups."""
        if self._scales is None:
            self._scales = self._sidecar().get("dimension_scales", {})
        if path in self._scales:
            return self._scales[path]
        node = self._nodes.get(path)
        if isinstance(node, _ArrayDoc):  # the document says, without making a zarr array of it
            names = node.doc.get("dimension_names")
        else:
            a = self.zarr_array(path)
            names = a.metadata.dimension_names if a.metadata.zarr_format == 3 else a.attrs.get(DIMENSIONS_ATTR)
        return [self._find_scale(path, n) if n and not n.startswith("phony_dim_") else [] for n in names or ()]

    def _sidecar(self) -> dict[str, Any]:
        """The store's :data:`~layoutkit.formats.SIDECAR` document, read once ({} when none)."""
        if self._sidecar_doc is None:
            from layoutkit.storage.counting import is_icechunk_store
            from layoutkit.storage.icechunk_repo import sidecar_in

            if not is_icechunk_store(self.store):  # in Icechunk the sidecar rides in the provenance (and asking loads its snapshot)
                with contextlib.suppress(OSError, ValueError, TypeError):
                    self._sidecar_doc = json.loads(_store_text(self.store, SIDECAR))
            if not isinstance(self._sidecar_doc, dict):
                self._sidecar_doc = sidecar_in(self.root.attrs.get(PROVENANCE_ATTR))
        return self._sidecar_doc

    def _may_rename(self) -> bool:
        if self._shallow:  # node by node: not every name is known
            return True
        if self._renamed_of != len(self._nodes):  # (again when nodes were added)
            self._renamed_of, self._any_renamed = len(self._nodes), any("%5C" in p for p in self._nodes)
        return self._any_renamed

    def source_name(self, name: str) -> str:
        if "%5C" not in name:
            return name
        if self._source_names is None:  # each stored name apart from the source's, from the record of renamed nodes
            self._source_names = {}
            for stored, source in (self._sidecar().get(RENAMED_KEY) or {}).items():
                self._source_names.update(zip(stored.split("/"), source.split("/")))
        return "/".join(self._source_names.get(part, part) for part in name.split("/"))

    def _find_scale(self, path: str, name: str) -> list[str]:
        """The scale the rule :func:`~layoutkit.formats.scale_by_name` finds (node by node:
        within the array's shot group, where ``convert`` guarantees the rule holds)."""
        top = self._shot_group(path) if self._shallow else None

        def is_array(candidate: str) -> bool:
            if not self.exists(candidate):
                return False
            self._ensure([candidate])
            return hasattr(self._nodes.get(candidate), "shape")

        found = scale_by_name(path, name, is_array, self.children, top=top)
        return [found] if found else []

    def _read_many(self, reads: list[tuple[str, Any]]) -> list[np.ndarray]:
        """Several ``(array path, selection)`` reads at once: zarr fetches all their chunks
        concurrently, so reading a shot's signals costs about one round trip, not one per
        array (and another per time base)."""
        return list(self._iter_many(reads))

    def _iter_many(self, reads: list[tuple[str, Any]]) -> Iterator[np.ndarray]:
        """:meth:`_iter_stored`, each array as the source holds it (:meth:`_joined`)."""
        for (path, _), values in zip(reads, self._iter_stored(reads)):
            yield self._joined(path, values)

    def _iter_stored(self, reads: list[tuple[str, Any]]) -> Iterator[np.ndarray]:
        """:meth:`_read_many`, its arrays handed over one at a time, in order: every object
        is fetched at once, but a fetched object is decoded only when its array's turn comes,
        and its bytes are let go then. A caller that keeps a part of each array holds one
        decoded array at a time, not all of them."""
        from zarr.core.sync import sync

        # whole arrays stored as one chunk or one shard with plain codecs (most signals,
        # time bases and packed shots): one GET each, decoded here on the caller's thread
        # (zarr_direct), without building a zarr array per read; the others zarr reads,
        # its first batch in the same round of requests as the direct ones
        plans, keys = self._direct_keys(reads)
        fetched = self._take_fetched(keys)
        first, at = {}, 0
        for i, plan in plans.items():
            first[i], at = at, at + len(plan.keys)
        arrays = {i: self.zarr_array(p) for i, (p, _) in enumerate(reads) if i not in plans}  # zarr opens with sync()
        batches = _batches(list(arrays), [_working_bytes(arrays[i], reads[i][1]) for i in arrays], ZARR_BATCH_BYTES)
        batch = next(batches, [])
        own = keys if fetched is None else []
        also = [k for k in getattr(self._local, "also", ()) if k not in own]  # a later read's objects, this round
        self._local.also = ()
        raw, got = sync(self._first_round(own + also, reads, arrays, batch))
        if also:
            self._kept().update(zip(also, raw[len(own):]))
            raw = raw[: len(own)]
        by_zarr = dict(zip(batch, got))
        raw, done = fetched.result() if fetched is not None else (raw, {})

        def decoded(i: int) -> np.ndarray | None:  # None: zarr reads it (fills it)
            if i in done:  # decoded ahead, while the caller worked on its last read
                return done.pop(i)
            n = len(plans[i].keys)
            got = plans[i].decode(raw[first[i] : first[i] + n])
            raw[first[i] : first[i] + n] = [None] * n
            return got

        # a read that may yet fall to zarr (nothing stored, or a fill value only zarr
        # gives) is decoded now, to know; the others when their turn comes
        early = {i: decoded(i) for i, plan in plans.items()
                 if i not in done and not plan.decodes(raw[first[i] : first[i] + len(plan.keys)])}
        fallen = {i: self.zarr_array(reads[i][0]) for i in early if early[i] is None}
        arrays |= fallen
        for batch in [*batches, *_batches(list(fallen), [_working_bytes(a, reads[i][1]) for i, a in fallen.items()],
                                          ZARR_BATCH_BYTES)]:
            by_zarr.update(zip(batch, sync(_zarr_reads(reads, arrays, batch))))
        for i in range(len(reads)):
            if i in by_zarr:
                yield np.asarray(by_zarr.pop(i))
                continue
            value = early.pop(i) if i in early else decoded(i)  # an early None fell to zarr, above
            if value is None:  # pragma: no cover - a fetched object is never None here
                raise AssertionError(f"{reads[i][0]}: decoding gave no array")
            yield value

    async def _first_round(self, keys: list[str], reads: list[tuple[str, Any]], arrays: dict[int, zarr.Array],
                           batch: list[int]) -> tuple[list[Any], list[Any]]:
        """The direct reads' objects and zarr's first batch, in one round of requests
        (a signal's index arrays and its per-shot attributes' text array, which zarr
        decodes, waited for a round each)."""
        import asyncio

        direct = self._fetch_async(keys) if keys else asyncio.sleep(0, [])
        raw, got = await asyncio.gather(direct, _zarr_reads(reads, arrays, batch))
        return raw, got

    def _direct_keys(self, reads: list[tuple[str, Any]]) -> tuple[dict[int, DirectRead], list[str]]:
        """The reads that go direct (by their place in ``reads``) and the objects they
        fetch, in order."""
        plans = {i: plan for i, (p, sel) in enumerate(reads) if (plan := self._direct(p, sel))}
        return plans, [f"{reads[i][0].strip('/')}/{k}" for i in plans for k in plans[i].keys]

    def _fetch(self, keys: list[str]) -> list[np.ndarray | None]:
        """Objects' bytes, fetched at once (None: not stored); the arrays are the
        buffers' own bytes, not copies."""
        from zarr.core.sync import sync

        return sync(self._fetch_async(keys))

    async def _fetch_async(self, keys: list[str]) -> list[np.ndarray | None]:
        import asyncio

        from zarr.core.buffer import default_buffer_prototype

        prototype = default_buffer_prototype()

        kept = self._kept()

        async def read_one(key: str) -> np.ndarray | None:  # the store holds at most MAX_IN_FLIGHT in flight
            if key in kept:  # fetched in an earlier round (fetch_with_next_read)
                return kept.pop(key)
            buf = await self.store.get(key, prototype)
            return None if buf is None else buf.as_numpy_array()

        return list(await asyncio.gather(*(read_one(key) for key in keys)))

    def _kept(self) -> dict[str, Any]:
        """Objects fetched for a read still to come (:meth:`_fetch_with_next_read`), by key:
        one dict for every thread, as the fetches run on zarr's event loop thread."""
        return self._kept_objects

    @contextmanager
    def _fetch_with_next_read(self, paths: Iterable[str]) -> Iterator[None]:
        """While the caller reads: the whole arrays at ``paths`` (those read direct) are
        fetched in the same round of requests as the next read this thread makes, and
        a later read of them takes them from there. A read whose next step depends on its
        first (a signal-major signal: its index, then its data) then costs one round of
        requests, not two, when the second step's objects are known before the first.
        Objects nobody takes are let go at the end."""
        keys = [f"{p.strip('/')}/{k}" for p in paths if (plan := self._direct(p, ())) is not None for k in plan.keys]
        self._local.also = tuple(keys)
        try:
            yield
        finally:
            self._local.also = ()
            kept = self._kept()
            for key in keys:
                kept.pop(key, None)

    def _fetch_ahead(self, reads: list[tuple[str, Any]]) -> _Ahead | None:
        """Start fetching the objects of ``reads`` in the background, and decoding them
        when the arrays hold at most :data:`AHEAD_DECODED_BYTES`. Set as the calling
        thread's ``_local.fetched``, the result serves its next :meth:`_iter_many` if it
        fetches exactly these objects (anything else fetches as usual)."""
        plans, keys = self._direct_keys(reads)
        if not keys:
            return None
        nbytes = sum(math.prod(p.shape) * p.dtype.itemsize for p in plans.values())
        decode = nbytes <= AHEAD_DECODED_BYTES

        def fetch() -> tuple[list[Any], dict[int, np.ndarray | None]]:
            raw, at = self._fetch(keys), 0
            done: dict[int, np.ndarray | None] = {}
            for i, plan in plans.items():
                part = raw[at : at + len(plan.keys)]
                if decode and plan.decodes(part):  # the decoding releases the GIL: it overlaps the caller's work
                    done[i] = plan.decode(part)
                    raw[at : at + len(plan.keys)] = [None] * len(plan.keys)
                at += len(plan.keys)
            return raw, done

        return _Ahead(tuple(keys), _ahead_pool().submit(fetch), nbytes)

    def _take_fetched(self, keys: list[str]) -> Future | None:
        ahead = getattr(self._local, "fetched", None)
        self._local.fetched = None
        return ahead.future if ahead is not None and ahead.keys == tuple(keys) else None

    def _direct(self, path: str, selection: Any, any_size: bool = False) -> DirectRead | None:
        """The direct-read plan of a whole-array read (worked out once per array), or None.
        ``any_size``: of an array of any number of chunks too, for reading parts of it
        (:meth:`DirectRead.part`; such a plan of a large array lists no keys)."""
        if path not in self._chunk_plans:  # one plan per array: a large one's lists no keys
            self._ensure([path])
            node, plan = self._nodes.get(path), None
            if isinstance(node, _ArrayDoc):
                try:
                    plan = plan_direct_read(node.doc, tuple(node.shape), node.native_dtype, any_size=True)
                except (TypeError, ValueError):  # a data type zarr's parser refuses: zarr reads it
                    pass
            self._chunk_plans[path] = plan
        plan = self._chunk_plans[path]
        if plan is None or not (any_size or plan.keys):
            return None
        return plan if _whole(selection, plan.shape) else None

    def _attrs_of(self, path: str) -> dict[str, Any]:
        self._ensure([path])
        node = self._nodes.get(path)
        return dict(node.attributes) if isinstance(node, _ArrayDoc) else dict(self.zarr_array(path).attrs)

    def _axes(self, paths: list[str]) -> tuple[dict[str, list[list[str]]], list[str]]:
        """Each array's first scale per axis, and every array to read for them: the
        arrays, then their scales, each once."""
        axes = {}
        self._ensure(paths)
        for p in paths:
            node = self._nodes.get(p)
            ndim = len(node.shape) if isinstance(node, _ArrayDoc) else self.zarr_array(p).ndim
            scales = self._scale_paths(p) or [[]] * ndim
            self._ensure(s[0] for s in scales if s)
            # a scale that is not stored (a netCDF dimension without a variable) names its axis only
            axes[p] = [s[:1] if s and hasattr(self._nodes.get(s[0]), "shape") else
                       [DIMENSION_ONLY + s[0].rsplit("/", 1)[-1]] if s else [] for s in scales]
        return axes, list(dict.fromkeys([*paths, *(s[0] for p in paths for s in axes[p] if s and _stored(s[0]))]))

    def _shot_reads(self, shot: str) -> list[tuple[str, Any]]:
        """The reads :meth:`shot` starts with: what :meth:`iter_shots` fetches ahead."""
        return [(n, ()) for n in self._axes([path for _, _, path in self._expand({"shot": shot})])[1]]

    def iter_shots(self, shots: Iterable[str | int]) -> Iterator[tuple[str, xr.DataTree]]:
        """As :meth:`Archive.iter_shots`: while one shot is decoded and built, the objects
        of the next ones are on their way (their GETs start before this shot is read): up
        to :data:`AHEAD_SHOTS`, the next one always, a further one while those on their
        way hold less than :data:`AHEAD_DECODED_BYTES` of arrays. Arrays that zarr reads
        (not whole objects) are not fetched ahead."""
        names = [str(s) for s in shots]
        ahead: dict[int, _Ahead | None] = {}  # shot index -> its objects on their way
        coming = 1  # the next shot to fetch ahead
        for i, shot in enumerate(names):
            coming = max(coming, i + 1)
            while coming < min(i + 1 + AHEAD_SHOTS, len(names)):
                if coming > i + 1 and sum(a.nbytes for a in ahead.values() if a is not None) >= AHEAD_DECODED_BYTES:
                    break
                ahead[coming] = self._fetch_ahead(self._shot_reads(names[coming]))
                coming += 1
            self._local.fetched = ahead.pop(i, None)
            try:
                tree = self.shot(shot)
            finally:
                self._local.fetched = None
            yield shot, tree

    def _variables(self, paths: Iterable[str], lazy: bool = False) -> list[xr.DataArray]:
        """Several arrays with their dimension scales as coordinates, read together
        (each scale once, however many arrays it serves); with ``lazy``, the scales only,
        the arrays' values when asked for (:meth:`lazy_variables`)."""
        paths = list(paths)
        axes, needed = self._axes(paths)
        self._ensure(needed)
        if lazy:
            needed = list(dict.fromkeys(s[0] for p in paths for s in axes[p] if s and _stored(s[0])))
        values = dict(zip(needed, self._read_many([(n, ()) for n in needed])))
        index: dict[str, ScaleCoordinate] = {}  # scale path -> its coordinate, built once
        out = []
        for p in paths:
            dims, coords = [], {}
            attrs_of = self._attrs_of(p)
            element = int(attrs_of.get(ARRAY_TYPE_ATTR, 0))  # an HDF5 array type's elements, the last axes
            for axis, scales in enumerate(axes[p][: len(axes[p]) - element]):
                if scales and not _stored(scales[0]):
                    dims.append(scales[0][len(DIMENSION_ONLY):])
                elif scales:
                    name = scales[0].rsplit("/", 1)[-1]
                    if scales[0] not in index:
                        attrs = bytes_back(plain_attrs(self._attrs_of(scales[0]), self.hidden_attrs))
                        index[scales[0]] = scale_coordinate(name, values[scales[0]], attrs)
                    coords[name] = index[scales[0]]
                    dims.append(name)
                else:
                    dims.append(f"dim_{axis}")
            dims.extend(element_dims(p.rsplit("/", 1)[-1], element) if element else ())
            attrs = bytes_back(plain_attrs(attrs_of, self.hidden_attrs))
            node = self._nodes[p] if lazy else None
            data = values[p] if node is None else lazy_data(self, p, tuple(node.shape), self._joined(
                p, np.empty(0, zarr_dtype(node))).dtype)
            out.append(with_coords(data, dims, coords, attrs))
        return out

    def variable(self, path: str) -> xr.DataArray:
        return self._variables([path])[0]

    def lazy_variables(self, paths: Iterable[str]) -> list[xr.DataArray]:
        return self._variables(paths, lazy=True)

    def shot(self, shot: str | int) -> xr.DataTree:
        """Every signal of one shot (as :meth:`Archive.shot`), fetched concurrently."""
        shot = str(shot)
        found = [(sig, path) for _, sig, path in self._expand({"shot": shot})]
        arrays = self._variables([path for _, path in found])
        return shot_tree(shot, [(sig, a) for (sig, _), a in zip(found, arrays)], self.group_attrs(self.shot_path(shot)))

    def signal(self, signal: str) -> dict[str, xr.DataArray]:
        """One signal of every shot (as :meth:`Archive.signal`), fetched concurrently."""
        found = [(shot, path) for shot, _, path in self._expand({"signal": signal})]
        arrays = self._variables([path for _, path in found])
        return {shot: a.rename(signal) for (shot, _), a in zip(found, arrays)}


DIMENSION_ONLY = "dimension-only:"
"""What :meth:`ZarrArchive._axes` puts before the name of an axis whose scale is not stored."""


def _stored(scale: str) -> bool:
    return not scale.startswith(DIMENSION_ONLY)


async def _zarr_reads(reads: list[tuple[str, Any]], arrays: dict[int, zarr.Array], batch: list[int]) -> list[Any]:
    """zarr's reads of ``batch`` (positions in ``reads``), concurrently (the counting
    store holds at most MAX_IN_FLIGHT requests in flight)."""
    import asyncio

    return list(await asyncio.gather(*(
        arrays[i].async_array.getitem(reads[i][1] if reads[i][1] not in ((), None) else Ellipsis) for i in batch
    )))  # fmt: skip


def _working_bytes(array: zarr.Array, selection: Any) -> int:
    """What zarr fetches and decodes to read ``selection``: the chunks (a shard's inner
    chunks) it touches, each counted twice (stored and decoded)."""
    shape, chunks = tuple(array.shape), tuple(array.chunks)
    sel = selection if isinstance(selection, tuple) else () if selection in (None, Ellipsis) else (selection,)
    touched = 1
    for axis, (n, c) in enumerate(zip(shape, chunks)):
        s = sel[axis] if axis < len(sel) else slice(None)
        if isinstance(s, (int, np.integer)):
            touched *= 1
        elif isinstance(s, slice) and s.step in (None, 1) and c:
            lo, hi, _ = s.indices(n)
            touched *= max(1, -(-hi // c) - lo // c) if hi > lo else 0
        else:
            touched *= -(-n // c) if c else 1
    return 2 * touched * math.prod(chunks) * max(1, np.dtype(array.dtype).itemsize)


_AHEAD_POOL: ThreadPoolExecutor | None = None


class _Ahead(NamedTuple):
    """A shot's objects on their way: the keys, what fetches (and decodes) them, and the
    bytes of the arrays they hold."""

    keys: tuple[str, ...]
    future: Future
    nbytes: int


def _ahead_pool() -> ThreadPoolExecutor:
    """The threads that wait for objects fetched ahead (the fetching itself runs on zarr's
    event loop); made on first use."""
    global _AHEAD_POOL
    if _AHEAD_POOL is None:
        _AHEAD_POOL = ThreadPoolExecutor(8, thread_name_prefix="layoutkit-ahead")
    return _AHEAD_POOL


def _forget_ahead_pool() -> None:
    # a forked child inherits the pool but not its threads: work sent to it would never run
    global _AHEAD_POOL
    _AHEAD_POOL = None


os.register_at_fork(after_in_child=_forget_ahead_pool)


def _batches(items: list[int], sizes: list[int], budget: int) -> Iterator[list[int]]:
    """``items`` in order, in runs whose ``sizes`` add up to at most ``budget`` (an item
    larger than that alone)."""
    batch: list[int] = []
    held = 0
    for item, size in zip(items, sizes):
        if batch and held + size > budget:
            yield batch
            batch, held = [], 0
        batch.append(item)
        held += size
    if batch:
        yield batch


def stored_objects(array: Any) -> dict[str, tuple[int, ...]]:
    """The objects a zarr array has in its store (shards, or chunks where there are no
    shards), from one listing of the array's prefix: each key, relative to the array,
    with where its object starts."""
    from zarr.core.sync import sync

    store, prefix = array.store_path.store, array.store_path.path.strip("/")
    prefix = f"{prefix}/" if prefix else ""

    async def listed() -> list[str]:
        return [k async for k in store.list_prefix(prefix)]

    grid = tuple(array.shards or array.chunks)
    meta = array.metadata
    if meta.zarr_format == 3:
        decode = meta.chunk_key_encoding.decode_chunk_key
    else:
        separator = meta.dimension_separator or "."

        def decode(key: str) -> tuple[int, ...]:
            return tuple(int(x) for x in key.split(separator))

    objects = {}
    for key in sync(listed()):
        name = key[len(prefix):]
        if name.rsplit("/", 1)[-1] in ("zarr.json", ".zarray", ".zattrs", ".zgroup"):
            continue
        try:
            index = tuple(int(i) for i in decode(name))
        except (ValueError, TypeError):
            continue
        if len(index) == len(grid):
            objects[name] = tuple(i * g for i, g in zip(index, grid))
    return objects


def stored_origins(array: Any) -> list[tuple[int, ...]]:
    """Where each object a zarr array has in its store starts (:func:`stored_objects`)."""
    return list(stored_objects(array).values())


def _whole(selection: Any, shape: tuple[int, ...]) -> bool:
    """Whether a selection is the whole array (``()``, ``...``, or full slices)."""
    if selection is None or selection is Ellipsis or selection == ():
        return True
    if not isinstance(selection, tuple) or len(selection) > len(shape):
        return False
    return all(isinstance(s, slice) and s.step in (None, 1) and s.indices(n)[:2] == (0, n)
               for s, n in zip(selection, shape))


def _store_text(store: Any, key: str) -> str:
    """A small document of a store (a local folder or a bucket), as text."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    buf = sync(store.get(key, default_buffer_prototype()))
    if buf is None:
        raise OSError(f"{key} is not in the store")
    return buf.to_bytes().decode()


def counting_store(
    path: Path | str, model: LatencyModel | None, counter: Counter, sleep: Any, base: Any = None
) -> CountingStore:
    """``base`` (zarr's ObjectStore over a bucket prefix), or the local folder ``path``,
    wrapped so that every request is counted (and charged, with a latency model)."""
    base = base if base is not None else zarr.storage.LocalStore(path, read_only=True)
    return CountingStore(base, model, counter, **({"sleep": sleep} if sleep else {}), name=str(path))


@dataclass(frozen=True)
class _GroupDoc:
    """A group's entry in consolidated metadata, as JSON (no ``shape``: not an array)."""

    attributes: dict[str, Any]
    node_type: str = "group"


@dataclass(frozen=True)
class _ArrayDoc:
    """An array's entry in consolidated metadata, as JSON; parsed by zarr only when the
    array is opened."""

    shape: tuple[int, ...]
    attributes: dict[str, Any]
    doc: dict[str, Any]
    node_type: str = "array"

    @property
    def native_dtype(self) -> np.dtype:
        data_type = self.doc.get("data_type")
        if isinstance(data_type, str) and data_type in _SIMPLE_DTYPES:
            return _SIMPLE_DTYPES[data_type]
        from zarr.core.dtype import get_data_type_from_json

        return np.dtype(get_data_type_from_json(data_type, zarr_format=3).to_native_dtype())


_SIMPLE_DTYPES = {
    name: np.dtype(name)
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64", "complex64", "complex128")
}  # fmt: skip


class _LazyRoot:
    """The root of a Zarr v3 store with consolidated metadata (or the node listing of
:data:`~layoutkit.formats.NODES_ATTR`), read as JSON.

    ``zarr.open_group`` parses every array's metadata in the consolidated document into
    zarr objects (codecs, chunk grid, fill value) before it returns: 2.8 s for 23,636
    arrays, measured. This root reads the same one document (one request) and parses an
    array only when it is opened, so ``layoutkit.open`` of a big store costs the JSON
    and nothing more. It offers what the archives use of a ``zarr.Group``: ``store``,
    ``attrs``, ``metadata.zarr_format``, item access to arrays and groups, and the raw
    ``nodes``.
    """

    def __init__(self, store: CountingStore, doc: dict[str, Any], shallow: bool = False) -> None:
        self.store = store
        self.shallow = shallow
        """Whether the nodes are not read yet: the root's document is larger than
        :data:`ROOT_HEAD_BYTES` and only its head (up to the consolidated metadata) was
        read, or the root has no consolidated metadata; :meth:`load_all` reads every
        node's metadata (the rest of the root's document, or every node's own)."""
        self._lock = threading.Lock()
        self._opened: dict[str, Any] = {}
        self.nodes: dict[str, _GroupDoc | _ArrayDoc] = {}
        self._take(doc)

    def load_all(self) -> None:
        """Read the root's whole document (every node's metadata), once."""
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        with self._lock:
            if not self.shallow:
                return
            buf = sync(self.store.get("zarr.json", default_buffer_prototype()))
            doc = json.loads(buf.to_bytes())
            if not doc.get("consolidated_metadata"):  # a root that lists nothing: every node's own document
                doc["consolidated_metadata"] = {"metadata": sync(_every_document(self.store))}
            self._take(doc)
            self.shallow = False

    def _take(self, doc: dict[str, Any]) -> None:
        attrs = dict(doc.get("attributes") or {})
        listed = attrs.pop(NODES_ATTR, None)  # a root that lists the nodes outside shot groups
        self.attrs: dict[str, Any] = attrs
        self.metadata = SimpleNamespace(zarr_format=3, consolidated_metadata=None)
        entries = listed or (doc.get("consolidated_metadata") or {}).get("metadata") or {}
        for name, entry in entries.items():
            attrs = entry.get("attributes") or {}
            if entry.get("node_type") == "array":
                self.nodes[name.strip("/")] = _ArrayDoc(tuple(entry["shape"]), attrs, entry)
            else:
                self.nodes[name.strip("/")] = _GroupDoc(attrs)

    def __getitem__(self, path: str) -> Any:
        from zarr.core.array import AsyncArray
        from zarr.core.group import AsyncGroup, GroupMetadata
        from zarr.storage import StorePath

        path = path.strip("/")
        with self._lock:
            if path not in self._opened:
                node = self.nodes[path]  # KeyError, as zarr's Group raises
                where = StorePath(self.store, path)
                if isinstance(node, _ArrayDoc):
                    self._opened[path] = zarr.Array(AsyncArray.from_dict(where, node.doc))
                else:
                    meta = GroupMetadata(attributes=node.attributes, zarr_format=3)
                    self._opened[path] = zarr.Group(AsyncGroup(meta, where))
            return self._opened[path]


def open_counted(
    path: Path | str, model: LatencyModel | None, counter: Counter, sleep: Any, base: Any = None,
    zarr_format: ZarrFormat | None = None, document: Any = None,
) -> tuple[CountingStore, Any]:
    """The root group of a store, read through a CountingStore: a :class:`_LazyRoot` when
    it is Zarr v3 with consolidated metadata, else zarr's own group. ``document``: the
    root ``zarr.json`` (a buffer) when the caller fetched it already."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    store = counting_store(path, model, counter, sleep, base)
    # naming the format saves the requests for the other format's documents
    if zarr_format is None:
        zarr_format = 3 if (Path(path) / "zarr.json").exists() else 2
    if zarr_format == 3:
        from layoutkit.storage.counting import is_icechunk_store

        buf = document if document is not None else root_head(store)
        raw = buf.to_bytes() if buf is not None else None
        icechunk = is_icechunk_store(store)
        if raw is not None and len(raw) >= ROOT_HEAD_BYTES and (
                icechunk or sync(store.getsize("zarr.json")) > ROOT_WHOLE_BYTES):
            # a large root: its head may do. Icechunk serves the document whole (no ranges)
            # from the snapshot it has loaded anyway, and a node's document without a round
            # trip: parsing the root is what costs (2 s for 24 MB)
            head = head_of_document(raw[:ROOT_HEAD_BYTES]) or (head_of_document(raw) if icechunk else None)
            if head is not None and head.get("node_type") == "group" and "consolidated_metadata" in head:
                return store, _LazyRoot(store, head, shallow=True)
        if raw is not None and len(raw) >= ROOT_HEAD_BYTES and not icechunk:  # the rest, after the head
            from zarr.abc.store import OffsetByteRequest

            rest = sync(store.get("zarr.json", default_buffer_prototype(), OffsetByteRequest(len(raw))))
            raw += rest.to_bytes() if rest is not None else b""
        doc = json.loads(raw) if raw is not None else None
        if isinstance(doc, dict) and doc.get("node_type") == "group" and (
                doc.get("consolidated_metadata") or NODES_ATTR in (doc.get("attributes") or {})):
            return store, _LazyRoot(store, doc)
        if isinstance(doc, dict) and doc.get("node_type") == "group":  # no consolidated metadata: node by node
            return store, _LazyRoot(store, doc, shallow=True)
    return store, zarr.open_group(store, mode="r", zarr_format=zarr_format)


ROOT_HEAD_BYTES = 256 * 1024
"""How much of a store's root ``zarr.json`` opening reads first: the whole document when
it is smaller; else its head, the root's attributes before its consolidated metadata
(which grows with the shots: 3.6 MB for 1,000 shots of 5 signals, 29 MB for 8,000)."""

ROOT_WHOLE_BYTES = 8 * 1024**2
"""A root document up to this size is read whole (one more GET; its nodes parsed when
used): reading many shots then costs their data alone. A larger one is read node by node
(:attr:`ZarrArchive.reads_node_by_node`): a shot's group listed and its nodes' documents
read, two round trips a shot, until something needs every node (the shot list, a signal
of every shot, a scan), which reads the root whole then."""


async def _every_document(store: Any) -> dict[str, Any]:
    """Every node's ``zarr.json`` below the root of a store without consolidated
    metadata, by path: one listing, then the documents fetched at once."""
    import asyncio

    from zarr.core.buffer import default_buffer_prototype

    keys = [k async for k in store.list_prefix("") if k.endswith("/zarr.json")]
    bufs = await asyncio.gather(*(store.get(k, default_buffer_prototype()) for k in keys))
    return {k[: -len("/zarr.json")]: json.loads(b.to_bytes()) for k, b in zip(keys, bufs) if b is not None}


def root_head(store: Any) -> Any:
    """The first :data:`ROOT_HEAD_BYTES` of the root ``zarr.json`` (a buffer; None when
    there is none): one ranged GET, the whole document when it is smaller."""
    from zarr.abc.store import RangeByteRequest
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    from layoutkit.storage.counting import is_icechunk_store

    index = node_index_of(store)
    if index is not None:  # the root's attributes, without Icechunk's snapshot (its whole document: Icechunk's)
        return default_buffer_prototype().buffer.from_bytes(json.dumps(index.root).encode())
    if is_icechunk_store(store):  # its documents are made on request: no ranges (it panics)
        return sync(store.get("zarr.json", default_buffer_prototype()))
    return sync(store.get("zarr.json", default_buffer_prototype(), RangeByteRequest(0, ROOT_HEAD_BYTES)))


def head_of_document(raw: bytes) -> dict[str, Any] | None:
    """The top-level members of a JSON object that come before its
    ``consolidated_metadata`` member, read from the first bytes of the document; that
    member is named with the value None. None when the bytes end first (or are no JSON
    object): then the whole document is needed."""
    import re

    text = raw.decode("utf-8", errors="ignore")
    space = re.compile(r"\s*")
    decoder = json.JSONDecoder()
    out: dict[str, Any] = {}
    try:
        at = space.match(text, 0).end()  # type: ignore[union-attr]
        if text[at] != "{":
            return None
        at += 1
        while True:
            at = space.match(text, at).end()  # type: ignore[union-attr]
            if text[at] == "}":
                return None  # the whole object, and no consolidated metadata in it
            key, at = decoder.raw_decode(text, at)
            at = space.match(text, at).end()  # type: ignore[union-attr]
            if text[at] != ":":
                return None
            at = space.match(text, at + 1).end()  # type: ignore[union-attr]
            if key == "consolidated_metadata":
                out[key] = None
                return out
            out[key], at = decoder.raw_decode(text, at)
            at = space.match(text, at).end()  # type: ignore[union-attr]
            if text[at] == ",":
                at += 1
    except (ValueError, IndexError):
        return None


def zarr_dtype(meta: Any) -> np.dtype:
    if isinstance(meta, _ArrayDoc):
        return meta.native_dtype
    dt = getattr(meta, "data_type", None) or getattr(meta, "dtype", None)
    native = getattr(dt, "to_native_dtype", None)
    try:
        return np.dtype(native() if native is not None else dt)
    except TypeError:
        return np.dtype(object)


def tree_of(paths: Iterator[str]) -> dict[str, set[str]]:
    """Group -> member names of the hierarchy that holds ``paths``."""
    tree: dict[str, set[str]] = {}
    for path in paths:
        while path.count("/") > 0 and path != "/":
            parent, _, name = path.rpartition("/")
            tree.setdefault(parent or "/", set()).add(name)
            path = parent
    return tree


__all__ = ["AHEAD_DECODED_BYTES", "AHEAD_SHOTS", "ROOT_HEAD_BYTES", "ROOT_WHOLE_BYTES", "ZARR_BATCH_BYTES", "ZarrArchive", "counting_store", "head_of_document", "open_counted", "root_head", "stored_objects", "stored_origins", "tree_of", "zarr_dtype"]
