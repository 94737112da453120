"""Write a Zarr store (v3 by default, v2 on request) that mirrors an HDF5 hierarchy.

The writer creates every group and array up front (metadata only), then accepts whole
write blocks (chunks, or shards when sharding) from any number of workers, and finally
consolidates the metadata. Worker processes reopen the store by path.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import struct
import threading
import warnings
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numcodecs
import numpy as np
import zarr
import zarr.api.asynchronous
import zarr.codecs
import zarr.codecs.numcodecs
import zarr.storage
from zarr.core.dtype import VariableLengthBytes
from zarr.core.metadata.v2 import ArrayV2Metadata
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.core.sync import sync
from zarr.storage import StorePath

from layoutkit.errors import InvalidOptionError
from layoutkit.formats import (
    DIMENSIONS_ATTR,
    NODES_ATTR,
    SIDECAR,
    json_attrs,
    long_double_text,
    member_field,
    sequence_length_field,
)
from layoutkit.hdf5.inventory import ArrayInfo, Inventory
from layoutkit.hdf5.model import (
    long_double,
)
from layoutkit.options import CompressorSpec, ZarrFormat
from layoutkit.plan import ArrayPlan, Region
from layoutkit.storage.kv import as_kv
from layoutkit.timings import timed
from layoutkit.writers.zarr_raw import encode_shard, shard_index_supported, zarr2_codecs, zarr3_codecs
from layoutkit.zarr_plan import element_axes, target_dtype


def _zarr3_compressors(spec: CompressorSpec, itemsize: int) -> list[Any]:
    # byte shuffling only means something for fixed-size elements of 2 bytes or more
    use_shuffle = spec.shuffle and spec.name != "blosc" and itemsize > 1
    shuffle = [zarr.codecs.numcodecs.Shuffle(elementsize=itemsize)] if use_shuffle else []
    if spec.name == "none":
        return []
    if spec.name == "zstd":
        return [*shuffle, zarr.codecs.ZstdCodec(level=spec.codec_level)]
    if spec.name == "gzip":
        return [*shuffle, zarr.codecs.GzipCodec(level=spec.codec_level)]
    if spec.name == "lz4":
        return [zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle" if spec.shuffle else "noshuffle")]
    if spec.name == "blosc":
        return [
            zarr.codecs.BloscCodec(
                cname=spec.blosc_cname, clevel=spec.codec_level, shuffle="shuffle" if spec.shuffle else "noshuffle"
            )
        ]
    raise InvalidOptionError(
        f"Compressor {spec} is an HDF5 filter that Zarr does not have; "
        "choose none, zstd, gzip, lz4 or blosc for a Zarr target."
    )


def _zarr2_codecs(spec: CompressorSpec, itemsize: int) -> tuple[list[Any], Any]:
    use_shuffle = spec.shuffle and spec.name != "blosc" and itemsize > 1
    filters = [numcodecs.Shuffle(elementsize=itemsize)] if use_shuffle else []
    if spec.name == "none":
        return filters, None
    if spec.name == "zstd":
        return filters, numcodecs.Zstd(level=spec.level)
    if spec.name == "gzip":
        return filters, numcodecs.GZip(level=spec.level)
    if spec.name == "lz4":
        return [], numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1 if spec.shuffle else 0)
    if spec.name == "blosc":
        return [], numcodecs.Blosc(cname=spec.cname, clevel=spec.level, shuffle=1 if spec.shuffle else 0)
    raise InvalidOptionError(
        f"Compressor {spec} is an HDF5 filter that Zarr does not have; "
        "choose none, zstd, gzip, lz4 or blosc for a Zarr target."
    )


def encode_fill_attr(value: Any, dtype: np.dtype) -> Any:
    """Encode a ``_FillValue`` attribute for Zarr v3 the way xarray reads it back
    (xarray.backends.zarr.FillValueCoder; importing xarray just for this costs ~1.5 s):
    floats as base64 of a little-endian double, bytes as base64, ints and bools as is."""
    if dtype.kind == "S":
        return base64.standard_b64encode(value).decode()
    if dtype.kind == "b":
        return bool(value)
    if dtype.kind in "iu":
        return int(value)
    if dtype.kind == "f":
        return base64.standard_b64encode(struct.pack("<d", float(value))).decode()
    if dtype.kind == "c":
        return [encode_fill_attr(value.real, np.dtype("f8")), encode_fill_attr(value.imag, np.dtype("f8"))]
    return value


def _node_items(node: str, files: dict[str, dict[str, Any]]) -> list[tuple[str, bytes]]:
    """The keys and bytes of a node's metadata documents (``node``: its path without the
    leading slash; "" for the root)."""
    return [(f"{node}/{name}" if node else name, json.dumps(doc, allow_nan=False).encode()) for name, doc in files.items()]


def sequence_bytes(data: Any) -> Any:
    """Variable-length sequences (an object array of arrays, as h5py reads them) as the
    bytes of their values (:data:`~layoutkit.formats.SEQUENCE_ATTR`); anything else as it is."""
    if getattr(data, "dtype", None) != np.dtype(object) or not data.size:
        return data
    if not isinstance(data.reshape(-1)[0], np.ndarray):
        return data
    out = np.empty(data.shape, dtype=object)
    flat = out.reshape(-1)
    for i, values in enumerate(data.reshape(-1)):
        if values.dtype.kind in "OUT":  # of strings: the JSON of its strings (TEXT_SEQUENCE_ATTR), the empty one ""
            flat[i] = json.dumps([str(v) for v in values], ensure_ascii=False) if values.size else ""
        else:
            flat[i] = np.ascontiguousarray(values).tobytes()
    return out


def _is_sequence_field(data: Any, name: str) -> bool:
    """Whether a compound's member holds variable-length sequences (h5py reads each as an
    array; its type says so, or its values do)."""
    sub = data.dtype[name]
    if sub.kind != "O":
        return False
    if sub.metadata and "vlen" in sub.metadata:
        return sub.metadata["vlen"] not in (str, bytes)
    return bool(data.size) and isinstance(data[name].reshape(-1)[0], np.ndarray)


def _is_text_field(data: Any, name: str) -> bool:
    """Whether a compound's object member holds text (str), as a reference member's paths are read."""
    return data.dtype[name].kind == "O" and bool(data.size) and isinstance(data[name].reshape(-1)[0], str)


def _utf8_fields(data: Any, names: set[str]) -> Any:
    """``data`` with the text of its fields ``names`` as UTF-8 bytes."""
    out = np.array(data, copy=True)
    for name in names:
        held = out[name].reshape(-1)
        out[name] = np.array([v.encode("utf-8", "surrogateescape") if isinstance(v, str) else v for v in held] + [None],
                             dtype=object)[:-1].reshape(out[name].shape)
    return out


def _has_array_member(dtype: np.dtype) -> bool:
    """Whether a compound has an array member, at any depth."""
    return any(dtype[n].subdtype is not None or (dtype[n].names and _has_array_member(dtype[n]))
               for n in dtype.names or ())


def _sequence_raw(values: Any) -> bytes:
    """A sequence's values' bytes; None (HDF5's unset sequence: a fill value's) the empty one."""
    return b"" if values is None else np.ascontiguousarray(values).tobytes()


def flat_members(data: Any) -> Any:
    """Values of a compound with array members (``v``: float32 x 3) with each member's
    elements in fields of their own, named by :func:`~layoutkit.formats.member_field`
    (zarr-python has no structured type with an array field), and its sequence members
    as their values' bytes and their lengths
    (:data:`~layoutkit.formats.SEQUENCE_MEMBERS_ATTR`); anything else as it is."""
    dtype = getattr(data, "dtype", None)
    if dtype is None or not dtype.names:
        return data
    seqs = {n for n in dtype.names if _is_sequence_field(data, n)}
    texts = {n for n in dtype.names if n not in seqs and _is_text_field(data, n)}
    if texts:  # text in a field (a reference member's path): its UTF-8 bytes, as h5py gives a text member's
        data = _utf8_fields(data, texts)
    nested = {}  # nested members holding arrays or text (paths), as they are stored
    for n in dtype.names:
        if dtype[n].names and (dtype[n].hasobject or _has_array_member(dtype[n])):
            if (stored := flat_members(held := data[n])) is not held:
                nested[n] = stored
    if not seqs and not _has_array_member(dtype) and all(s.dtype == dtype[n] for n, s in nested.items()):
        if nested:  # (their text as bytes: the same type)
            data = np.array(data, copy=True)
            for n, stored in nested.items():
                data[n] = stored
        return data
    fields: list[tuple[str, Any]] = []
    for name in dtype.names:
        sub = dtype[name]
        if name in nested:  # a nested member's array members, a field an element in its place
            fields.append((name, nested[name].dtype))
        elif name in seqs:
            raw = [_sequence_raw(v) for v in data[name].reshape(-1)]
            fields += [(name, f"S{max(map(len, raw), default=1) or 1}"), (sequence_length_field(name, dtype.names), "<u8")]
        elif sub.subdtype is None:
            fields.append((name, sub))
        else:
            fields.extend((member_field(name, index), sub.base) for index in np.ndindex(*sub.shape))
    out = np.empty(np.shape(data), np.dtype(fields))
    for name in dtype.names:
        if name in nested:
            out[name] = nested[name]
        elif name in seqs:
            values = data[name]
            out[name] = np.array([_sequence_raw(v) for v in values.reshape(-1)],
                                 dtype=out.dtype[name]).reshape(values.shape)
            out[sequence_length_field(name, dtype.names)] = np.array([0 if v is None else np.size(v) for v in values.reshape(-1)],
                                                        dtype="<u8").reshape(values.shape)
        elif dtype[name].subdtype is None:
            out[name] = data[name]
        else:
            for index in np.ndindex(*dtype[name].shape):
                out[member_field(name, index)] = data[name][(..., *index)]
    return out


def _text_fill(fv: Any, dtype: np.dtype) -> Any:
    """A compound's fill value with its text members as bytes (None, HDF5's unset
    variable-length string, as the empty one)."""
    out = np.zeros((), dtype)
    source = np.asarray(fv)
    for name in dtype.names or ():
        value = source[name][()] if source.dtype.names and name in source.dtype.names else None
        if dtype[name].names:  # a nested member: its own text members so too
            out[name] = _text_fill(value if value is not None else np.zeros((), dtype[name]), dtype[name])
        elif dtype[name].kind == "S":  # (a reference member's: an unset reference, the empty path)
            out[name] = value.encode("utf-8") if isinstance(value, str) else value if isinstance(value, bytes) else b""
        elif value is not None:
            out[name] = value
    return out[()]


def _fill_value(info: ArrayInfo, dtype: Any, zarr_format: ZarrFormat, is_netcdf4: bool) -> Any:
    if long_double(info.dtype):  # the text of HDF5's (LONG_DOUBLE_ATTR)
        return long_double_text(info.fill_value if info.fill_value is not None else 0)[()]
    if dtype is str:
        return ""
    if dtype is bytes:  # a sequence's: the empty one
        return b""
    fv = info.fill_value
    if info.dtype.subdtype is not None and fv is not None:  # an array type's: one element (target_dtype)
        fv = np.asarray(fv).reshape(-1)[0] if np.asarray(fv).size else None
    if fv is not None and info.dtype.base.names:
        fv = flat_members(np.asarray(fv))[()]
    if info.text_widths and fv is not None:  # a compound's text members: HDF5's empty string, as bytes
        fv = _text_fill(fv, np.dtype(dtype))
    if zarr_format == 3:
        if fv is None:
            return None
        return fv if info.dtype.base.names else np.asarray(fv).astype(dtype)[()]
    # v2: xarray reads fill_value as the netCDF _FillValue (a mask), so only a real
    # _FillValue, or a deliberate non-default fill of a plain HDF5 file, goes there. A
    # compound's is HDF5's own (xarray masks no compound; its _FillValue attribute stays
    # an attribute)
    if info.dtype.base.names:
        return fv
    if "_FillValue" in info.attrs:
        return np.asarray(info.attrs["_FillValue"]).astype(dtype).reshape(-1)[0]
    if is_netcdf4 or fv is None:
        return None
    fv = np.asarray(fv).astype(dtype)[()]
    return None if (fv == np.zeros((), dtype)[()]) else fv


class ZarrWriter:
    """Creates the Zarr hierarchy for a plan and writes blocks into it.

    Parameters
    ----------
    path
        The directory of the store (layoutkit writes to a temporary sibling and renames).
    zarr_format
        2 or 3.
    """

    name = "zarr"

    def __init__(self, path: Any, zarr_format: ZarrFormat = 3) -> None:
        self.kv = as_kv(path)  # a folder, a bucket prefix or an Icechunk session
        self.path = getattr(self.kv, "path", None)
        self.zarr_format = zarr_format
        self._arrays: dict[str, zarr.Array] = {}
        self._docs: dict[str, dict[str, Any]] = {}
        self._zarr_store: Any = None
        self._encoders: dict[str, _ChunkEncoder | None] = {}
        self._stored_targets: dict[str, _StoredChunks | None] = {}
        self._fetched: dict[str, dict[str, Any]] = {}  # array documents read back from the store
        self._writing: Future[None] | None = None  # the documents create() writes in the background
        self._stop = threading.Event()

    # -- creation ---------------------------------------------------------------

    def create(
        self, inventory: Inventory, plans: list[ArrayPlan], sidecar: dict[str, Any], root_attrs: dict[str, Any] | None = None,
        amend: Callable[[dict[str, dict[str, Any]]], None] | None = None, background: bool = False,
    ) -> None:
        """Write the metadata of every group and planned array, and consolidate it.
        ``root_attrs`` are added to the root group's attributes (layoutkit's provenance).
        ``amend`` may change the documents before they are written (node path without
        its leading slash -> file name -> JSON document): a layout that copies one node's
        metadata into another's, as shot-packed copies a shot's unpacked arrays' into
        the shot's index.

        With ``background`` the documents are written by a thread while the caller goes
        on (the copy's tasks in this process need none of them: this writer holds them),
        where the target takes chunks before their array's document (``any_order``: a
        folder, a bucket; not an Icechunk session, which refuses a chunk of an array it
        does not hold yet); :meth:`written` waits for them, :meth:`stop` abandons them.
        A shot archive's skeleton is thousands of small files, whose creation waits on the file system
        (1.0-2.0 s for 3,910 documents of a 40-shot sample, 0.7-1.2 s of it CPU), time
        the copy can use.

        zarr-python spends about 5 ms of Python per array it creates or opens, and a shot
        archive has tens of thousands of arrays. So zarr builds one metadata document per
        distinct (dtype, codecs, sharding, rank) - a template that carries zarr's own codec
        configuration and fill-value encoding - and each array's document is that template
        with its shape, chunks, fill value, attributes and dimension names put in.
        Everything written is read back through zarr by the checks and the tests.
        """
        self.kv.create()
        infos = {a.path: a for a in inventory.arrays}
        docs: dict[str, dict[str, Any]] = {}  # node path -> {file name: JSON document}
        for g in inventory.groups:
            docs[g.path.strip("/")] = self._group_docs(json_attrs(g.attrs))
        templates = _Templates(self.zarr_format)
        for plan in plans:
            kwargs = self._array_kwargs(infos[plan.path], plan, inventory.is_netcdf4)
            docs[plan.path.strip("/")] = templates.array_docs(kwargs, plan)
        if root_attrs:
            root = docs.setdefault("", self._group_docs({}))
            (root["zarr.json"]["attributes"] if self.zarr_format == 3 else root[".zattrs"]).update(root_attrs)
        for node in list(docs):  # parents of arrays that are not in the inventory's groups
            parent = node.rpartition("/")[0]
            while parent and parent not in docs:
                docs[parent] = self._group_docs({})
                parent = parent.rpartition("/")[0]
        if amend is not None:
            amend(docs)
        self._docs = docs
        self.kv.put(SIDECAR, json.dumps(sidecar, indent=2, default=str).encode())
        if not (background and getattr(self.kv, "any_order", False)):
            self._write_nodes(docs)
            return
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="layoutkit-skeleton")
        self._writing = pool.submit(self._write_nodes, docs)
        pool.shutdown(wait=False)

    def written(self) -> None:
        """Wait for the documents :meth:`create` writes in the background; raise what
        stopped them (an ``OSError`` of the destination)."""
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def stop(self) -> None:
        """Stop writing documents in the background and wait until none is being written
        (before the staged output is discarded: nothing may appear in it afterwards)."""
        self._stop.set()
        writing, self._writing = self._writing, None
        if writing is not None:
            futures.wait([writing])

    def _write_nodes(self, docs: dict[str, dict[str, dict[str, Any]]]) -> None:
        """Every node's documents, parents before children; file-system calls release
        the GIL and a bucket's PUTs wait on the network, so 16 threads write them."""
        nodes = sorted(docs, key=lambda n: n.count("/"))
        if hasattr(self.kv, "put_many"):  # a target that takes many documents in one call (an Icechunk session)
            for _, level in itertools.groupby(nodes, key=lambda n: n.count("/")):
                if not self._stop.is_set():
                    self.kv.put_many([item for node in level for item in _node_items(node, docs[node])])
            return
        with ThreadPoolExecutor(max_workers=16) as pool:
            depth = -1
            batch: list[str] = []
            for node in nodes + [None]:
                d = node.count("/") if node is not None else -2
                if d != depth and batch:
                    list(pool.map(lambda n: self._write_node(n, docs[n]), batch))
                    batch = []
                depth = d
                if node is not None:
                    batch.append(node)

    def fill_matches_source(self, infos: dict[str, ArrayInfo]) -> list[str]:
        """Paths of the arrays whose Zarr fill value equals the HDF5 fill value, so a
        missing chunk reads back as the source's unwritten data."""
        out = []
        for path, info in infos.items():
            encoder = self._encoder(path) or (stored.encoder if (stored := self._stored(path)) else None)
            if encoder is None or info.fill_value is None:
                continue
            want = np.asarray(info.fill_value).astype(encoder.dtype)
            got = np.asarray(encoder.fill, dtype=encoder.dtype)
            if want.tobytes() == got.tobytes():
                out.append(path)
        return out

    def _write_node(self, node: str, files: dict[str, dict[str, Any]]) -> None:
        if self._stop.is_set():
            return
        for key, data in _node_items(node, files):
            self.kv.put(key, data)

    def _group_docs(self, attrs: dict[str, Any]) -> dict[str, dict[str, Any]]:
        if self.zarr_format == 3:
            return {"zarr.json": {"zarr_format": 3, "node_type": "group", "attributes": attrs}}
        return {".zgroup": {"zarr_format": 2}, ".zattrs": attrs}

    def _consolidate_from_docs(self, keep: Callable[[str], bool] | None = None) -> None:
        docs = self._docs
        if self.zarr_format == 3 and keep is not None:
            self._list_nodes(keep)
        elif self.zarr_format == 3:
            inline = {}
            for node, files in docs.items():
                if not node:
                    continue
                doc = dict(files["zarr.json"])
                if doc["node_type"] == "group":
                    doc["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": {}}
                inline[node] = doc
            root = dict(docs[""]["zarr.json"])
            root["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": inline}
            self.kv.put("zarr.json", json.dumps(root, allow_nan=False).encode())
        else:
            meta = {}
            for node, files in docs.items():
                for filename, doc in files.items():
                    meta[f"{node}/{filename}" if node else filename] = doc
            doc = {"metadata": meta, "zarr_consolidated_format": 1}
            self.kv.put(".zmetadata", json.dumps(doc, allow_nan=False).encode())

    def _list_nodes(self, keep: Callable[[str], bool]) -> None:
        """The root of a store that must not grow with the shots: the nodes ``keep``
        keeps listed in the root's :data:`~layoutkit.formats.NODES_ATTR`, not in Zarr's
        consolidated metadata, which must list every node (zarr would not find the
        others). No group gets consolidated metadata of its own either: one copy of each
        node's document besides its own, so a node changed in place is seen as it is by
        whatever reads the store node by node (zarr, xarray, the comparator)."""
        docs = self._docs
        kept = {node: files["zarr.json"] for node, files in docs.items() if node and keep(node)}
        root = dict(docs[""]["zarr.json"])
        root["attributes"] = {**root.get("attributes", {}), NODES_ATTR: kept}
        self.kv.put("zarr.json", json.dumps(root, allow_nan=False).encode())

    def _array_kwargs(self, info: ArrayInfo, plan: ArrayPlan, is_netcdf4: bool) -> dict[str, Any]:
        dtype = target_dtype(info)
        np_dtype = np.dtype(dtype) if dtype is not str and dtype is not bytes else np.dtype(object)
        element_size = 0 if dtype is str or dtype is bytes or np_dtype.names else np_dtype.itemsize
        attrs = {**info.attrs, **plan.type_attrs}  # the type rules' attributes, as planned (and dry-run printed)
        _, element_dims = element_axes(info)
        dims = [*info.dims, *element_dims]
        kwargs: dict[str, Any] = dict(
            shape=plan.shape,
            dtype=VariableLengthBytes() if dtype is bytes else dtype,
            chunks=plan.chunks if plan.shape else "auto",
            fill_value=_fill_value(info, dtype, self.zarr_format, is_netcdf4),
            overwrite=False,
        )
        if self.zarr_format == 3:
            if "_FillValue" in attrs and np_dtype.kind in "biufcS":
                fv = attrs["_FillValue"]
                fv = fv.encode() if np_dtype.kind == "S" and isinstance(fv, str) else fv
                fv = np.asarray(fv, np_dtype).reshape(-1)[0]  # netCDF stores a 1-element array
                attrs["_FillValue"] = encode_fill_attr(fv.item(), np_dtype)
            kwargs["dimension_names"] = dims or None
            if plan.source_encoding is not None:
                kwargs["compressors"] = zarr3_codecs(plan.source_encoding)
            else:
                kwargs["compressors"] = _zarr3_compressors(plan.compressor, element_size)
            if plan.shards:
                kwargs["shards"] = plan.shards
            if np_dtype.byteorder == ">" and np_dtype.kind in "iufc":
                kwargs["serializer"] = zarr.codecs.BytesCodec(endian="big")
        else:
            attrs.pop("_FillValue", None)
            attrs[DIMENSIONS_ATTR] = dims
            if plan.source_encoding is not None:
                filters, compressor = zarr2_codecs(plan.source_encoding)
            else:
                filters, compressor = _zarr2_codecs(plan.compressor, element_size)
            kwargs["filters"] = filters or "auto"  # auto adds the string codecs v2 needs
            kwargs["compressors"] = compressor
        kwargs["attributes"] = json_attrs(attrs)
        return kwargs

    # -- data -------------------------------------------------------------------

    def write_many(self, blocks: list[tuple[str, Region, np.ndarray]]) -> None:
        """Write several whole blocks, possibly of different arrays.

        A block of an unsharded numeric array is one chunk: it is encoded here, on the
        calling worker thread, with the numcodecs codecs zarr itself uses (so the bytes
        are the ones zarr would write) and stored under its chunk key. zarr's own write
        path costs about a millisecond of event-loop Python per chunk and runs on one
        thread; this one runs on all workers. Everything else goes through zarr.
        """
        rest = []
        for path, region, data in blocks:
            data = sequence_bytes(flat_members(data))
            if long_double(getattr(data, "dtype", np.dtype(object))):  # as text (LONG_DOUBLE_ATTR)
                data = long_double_text(data)
            if not region and np.ndim(data) == 0 and isinstance(held := np.asarray(data)[()], bytes):
                if self._scalar_bytes(path, held):  # a scalar sequence: zarr-python cannot encode it itself
                    continue
            encoder = self._encoder(path)
            if encoder is None or not region:
                rest.append((path, region, data))
            else:
                encoder.write(region, data)
        if not rest:
            return
        missing = list(dict.fromkeys(p for p, _, _ in rest if p not in self._arrays))
        if missing:

            async def open_all() -> list[Any]:
                return await asyncio.gather(*(self._open(p) for p in missing))

            for path, arr in zip(missing, sync(open_all())):
                self._arrays[path] = zarr.Array(arr)

        async def write_all() -> None:
            await asyncio.gather(
                *(
                    self._arrays[path].async_array.setitem(
                        tuple(slice(a, b) for a, b in region) if region else Ellipsis, data
                    )
                    for path, region, data in rest
                )
            )

        with timed("zarr"):
            sync(write_all())

    def _scalar_bytes(self, path: str, value: bytes) -> bool:
        """Store the one chunk of a variable-length bytes array without dimensions (a
        scalar sequence, :data:`~layoutkit.formats.SEQUENCE_ATTR`), encoded here with the
        codecs its metadata names: numcodecs' ``VLenBytes`` fails on a 0-d array ("Expected
        bytes, got numpy.ndarray", zarr-python 3.4.2), while the bytes of one item are
        the same for one dimension or none, and zarr-python reads them back. False when
        the metadata is not the plain one the writer makes (zarr then writes it, or fails)."""
        node = path.strip("/")
        doc = self._array_files(node).get("zarr.json" if self.zarr_format == 3 else ".zarray") or {}
        if self.zarr_format == 3:
            codecs = [c["name"] for c in doc.get("codecs", [])]
            if codecs[:1] != ["vlen-bytes"] or not set(codecs[1:]) <= set(_BYTES_CODECS) \
                    or doc.get("chunk_key_encoding", {}).get("name") != "default":  # (its key: "c")
                return False
            chain = [_BYTES_CODECS[c["name"]](c.get("configuration") or {}) for c in doc["codecs"][1:]]
            key = "c"
        else:
            filters, compressor = doc.get("filters") or [], doc.get("compressor")
            if [f["id"] for f in filters] != ["vlen-bytes"] or compressor and compressor["id"] not in _V2_CODECS:
                return False
            chain = [numcodecs.get_codec(compressor)] if compressor else []
            key = "0"
        buf: Any = numcodecs.VLenBytes().encode(np.array([value], dtype=object))
        for codec in chain:
            buf = codec.encode(buf)
        self.kv.put(f"{node}/{key}" if node else key, bytes(buf))
        return True

    def _array_files(self, node: str) -> dict[str, Any]:
        """An array's metadata documents: the driver's own, or (in a worker process) read
        from the store once."""
        files = self._docs.get(node)
        if files is None:
            files = self._fetched.get(node)
        if files is None:
            name = "zarr.json" if self.zarr_format == 3 else ".zarray"
            try:
                files = {name: json.loads(self.kv.get(f"{node}/{name}" if node else name) or b"")}
            except (OSError, ValueError):
                files = {}
            self._fetched[node] = files
        return files

    def _encoder(self, path: str) -> _ChunkEncoder | None:
        if path not in self._encoders:
            node = path.strip("/")
            self._encoders[path] = _ChunkEncoder.from_metadata(self.kv, node, self._array_files(node), self.zarr_format)
        return self._encoders[path]

    def write_stored(self, path: str, region: Region, stored: dict[tuple[int, ...], tuple[bytes | None, int]],
                     decode: Any, skip_missing: bool) -> None:
        """Store one write block (a chunk, or a shard) of ``path`` from the source's stored
        chunks, copied as they are (``--compressor source``).

        Parameters
        ----------
        stored
            Every chunk origin of the block: its stored bytes (None when not allocated)
            and its filter mask.
        decode
            ``decode(origin)`` gives the values of one chunk, for the chunks that must be
            encoded here: those stored with a filter skipped, and unallocated ones unless
            ``skip_missing`` (the Zarr fill value equals the source's).
        """
        target = self._stored(path)
        if target is None:
            raise RuntimeError(f"{path}: the Zarr metadata does not allow copying stored chunks")
        target.write(region, stored, decode, skip_missing)

    def _stored(self, path: str) -> _StoredChunks | None:
        if path not in self._stored_targets:
            node = path.strip("/")
            doc = self._array_files(node).get("zarr.json" if self.zarr_format == 3 else ".zarray")
            self._stored_targets[path] = _StoredChunks.from_metadata(self.kv, node, doc, self.zarr_format)
        return self._stored_targets[path]

    async def _open(self, path: str) -> Any:
        node = path.strip("/")
        files = self._docs.get(node)
        if files is None:  # a worker process: read the metadata zarr wrote
            return await zarr.api.asynchronous.open_array(
                store=self._store, path=node, mode="r+", zarr_format=self.zarr_format
            )
        # the driver already holds the document; skip zarr's open (reads and checks)
        meta: ArrayV2Metadata | ArrayV3Metadata
        if self.zarr_format == 3:
            meta = ArrayV3Metadata.from_dict(json.loads(json.dumps(files["zarr.json"])))
        else:
            meta = ArrayV2Metadata.from_dict({**files[".zarray"], "attributes": files[".zattrs"]})
        return zarr.AsyncArray(meta, StorePath(self._store, node))

    @property
    def _store(self) -> Any:
        if self._zarr_store is None:
            self._zarr_store = self.kv.zarr_store()
        return self._zarr_store

    def finish(self, consolidate: bool, keep: Callable[[str], bool] | None = None) -> None:
        """Consolidate the metadata (one read to open the whole hierarchy): of every node,
        or with ``keep`` of the nodes it keeps (a node path without its leading slash;
        the others stay readable at their own documents)."""
        self.written()
        if consolidate:
            self._consolidate_from_docs(keep)


_BYTES_CODECS = {
    "zstd": lambda c: numcodecs.Zstd(level=c["level"], checksum=c.get("checksum", False)),
    "gzip": lambda c: numcodecs.GZip(level=c["level"]),
    "blosc": lambda c: numcodecs.Blosc(
        cname=c["cname"], clevel=c["clevel"], blocksize=c.get("blocksize", 0),
        shuffle={"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[c["shuffle"]] if isinstance(c["shuffle"], str) else c["shuffle"],
    ),
    "numcodecs.shuffle": lambda c: numcodecs.Shuffle(elementsize=c["elementsize"]),
    "numcodecs.zlib": lambda c: numcodecs.Zlib(level=c.get("level", 1)),
    "numcodecs.fletcher32": lambda c: numcodecs.Fletcher32(),
}
_V2_CODECS = {"zstd", "gzip", "blosc", "shuffle", "zlib", "fletcher32"}


class _ChunkEncoder:
    """Encodes and stores whole chunks of one unsharded numeric array."""

    def __init__(self, kv: Any, node: str, dtype: np.dtype, chunks: tuple[int, ...], fill: Any,
                 codecs: list[Any], zarr_format: ZarrFormat, separator: str) -> None:
        self.kv = kv
        self.prefix = f"{node}/" if node else ""
        self.dtype = dtype
        self.chunks = chunks
        self.fill = fill
        self.codecs = codecs
        self.zarr_format = zarr_format
        self.separator = separator

    @classmethod
    def from_metadata(cls, kv: Any, node: str, files: dict[str, Any], zarr_format: ZarrFormat) -> _ChunkEncoder | None:
        try:
            if zarr_format == 3:
                return cls._from_v3(kv, node, files["zarr.json"])
            return cls._from_v2(kv, node, files[".zarray"])
        except (KeyError, TypeError, ValueError):
            return None

    @classmethod
    def _from_v3(cls, kv: Any, node: str, doc: dict[str, Any]) -> _ChunkEncoder | None:
        codecs = doc["codecs"]
        if not codecs or codecs[0]["name"] != "bytes" or not isinstance(doc["data_type"], str):
            return None  # sharded, strings, structured...
        if doc["chunk_key_encoding"]["name"] != "default":
            return None
        try:
            dtype = np.dtype(doc["data_type"])
        except TypeError:
            return None
        if dtype.kind not in "biufc":
            return None
        endian = (codecs[0].get("configuration") or {}).get("endian", "little")
        dtype = dtype.newbyteorder("<" if endian == "little" else ">")
        chain = []
        for c in codecs[1:]:
            make = _BYTES_CODECS.get(c["name"])
            if make is None:
                return None
            chain.append(make(c.get("configuration") or {}))
        fill = _json_fill(doc["fill_value"], dtype)
        separator = doc["chunk_key_encoding"].get("configuration", {}).get("separator", "/")
        return cls(kv, node, dtype, tuple(doc["chunk_grid"]["configuration"]["chunk_shape"]), fill,
                   chain, 3, separator)

    @classmethod
    def _from_v2(cls, kv: Any, node: str, doc: dict[str, Any]) -> _ChunkEncoder | None:
        dtype = np.dtype(doc["dtype"])
        if dtype.kind not in "biufc" or doc.get("order", "C") != "C":
            return None
        chain = []
        for c in [*(doc.get("filters") or []), *([doc["compressor"]] if doc.get("compressor") else [])]:
            if c["id"] not in _V2_CODECS:
                return None
            chain.append(numcodecs.get_codec(c))
        fill = _json_fill(doc["fill_value"], dtype) if doc["fill_value"] is not None else 0
        return cls(kv, node, dtype, tuple(doc["chunks"]), fill, chain, 2, doc.get("dimension_separator", "."))

    def write(self, region: Region, data: np.ndarray) -> None:
        index = tuple(a // c for (a, _), c in zip(region, self.chunks))
        self.kv.put(self.key(index), self.encode(region, data))

    def key(self, index: tuple[int, ...]) -> str:
        """The store key of the chunk (or shard) at grid position ``index``."""
        key = self.separator.join(str(i) for i in index)
        if self.zarr_format == 3:
            key = "c" + self.separator + key
        return self.prefix + key

    def encode(self, region: Region, data: np.ndarray) -> bytes:
        """The stored bytes of the chunk holding ``region``'s values (``data``)."""
        shape = tuple(b - a for a, b in region)
        block = np.asarray(data).astype(self.dtype, copy=False)
        if shape != self.chunks:  # an edge chunk: zarr stores it whole, padded with the fill value
            full = np.full(self.chunks, self.fill, dtype=self.dtype)
            full[tuple(slice(0, s) for s in shape)] = block
            block = full
        with timed("encode"):
            buf: Any = np.ascontiguousarray(block).tobytes()
            for codec in self.codecs:
                buf = codec.encode(buf)
            return bytes(buf) if not isinstance(buf, bytes) else buf


class _StoredChunks:
    """Stores already-encoded chunks of one numeric array, whole or packed into shards."""

    def __init__(self, encoder: _ChunkEncoder, shape: tuple[int, ...], shard: tuple[int, ...] | None,
                 sharding: dict[str, Any] | None) -> None:
        self.encoder = encoder
        self.shape = shape
        self.shard = shard
        self.sharding = sharding or {}

    @classmethod
    def from_metadata(cls, kv: Any, node: str, doc: dict[str, Any] | None, zarr_format: ZarrFormat) -> _StoredChunks | None:
        if not doc:
            return None
        name = "zarr.json" if zarr_format == 3 else ".zarray"
        codecs = doc.get("codecs") or [{}]
        if zarr_format == 3 and codecs[0].get("name") == "sharding_indexed":
            conf = codecs[0]["configuration"]
            if not shard_index_supported(conf):
                return None
            inner = {**doc, "codecs": conf["codecs"],
                     "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": conf["chunk_shape"]}}}
            encoder = _ChunkEncoder.from_metadata(kv, node, {name: inner}, zarr_format)
            shard = tuple(doc["chunk_grid"]["configuration"]["chunk_shape"])
            return cls(encoder, tuple(doc["shape"]), shard, conf) if encoder else None
        encoder = _ChunkEncoder.from_metadata(kv, node, {name: doc}, zarr_format)
        return cls(encoder, tuple(doc["shape"]), None, None) if encoder else None

    def write(self, region: Region, stored: dict[tuple[int, ...], tuple[bytes | None, int]],
              decode: Any, skip_missing: bool) -> None:
        chunks = self.encoder.chunks

        def chunk_bytes(origin: tuple[int, ...]) -> bytes | None:
            data, mask = stored.get(origin, (None, 0))
            if data is not None and not mask:
                return data
            if data is None and skip_missing:
                return None
            # stored with a filter skipped, or never written and the fill values differ
            part = tuple((o, min(o + c, n)) for o, c, n in zip(origin, chunks, self.shape))
            return self.encoder.encode(part, decode(origin))

        if self.shard is None:
            for origin in stored:
                data = chunk_bytes(origin)
                if data is not None:
                    self.encoder.kv.put(self.encoder.key(tuple(o // c for o, c in zip(origin, chunks))), data)
            return
        start = tuple(a for a, _ in region)
        per_shard = tuple(s // c for s, c in zip(self.shard, chunks))
        inner: list[bytes | None] = []
        for position in np.ndindex(*per_shard):
            origin = tuple(s + i * c for s, i, c in zip(start, position, chunks))
            inner.append(None if any(o >= n for o, n in zip(origin, self.shape)) else chunk_bytes(origin))
        with timed("encode"):
            blob = encode_shard(inner, per_shard, self.sharding)
        if blob is not None:
            self.encoder.kv.put(self.encoder.key(tuple(a // s for a, s in zip(start, self.shard))), blob)


def _json_fill(value: Any, dtype: np.dtype) -> Any:
    if isinstance(value, str):  # "NaN", "Infinity", "-Infinity", or hex bytes
        special = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}
        if value in special:
            return special[value]
        if value.startswith("0x"):
            return np.frombuffer(bytes.fromhex(value[2:])[::-1], dtype=dtype.newbyteorder("<"))[0]
        raise ValueError(value)
    if isinstance(value, list):  # complex
        return complex(value[0], value[1])
    return value


class _Templates:
    """One zarr-built metadata document per kind of array, specialised per array."""

    def __init__(self, zarr_format: ZarrFormat) -> None:
        self.zarr_format = zarr_format
        self._cache: dict[str, tuple[dict[str, Any], Any]] = {}

    def array_docs(self, kwargs: dict[str, Any], plan: ArrayPlan) -> dict[str, dict[str, Any]]:
        ndim = len(plan.shape)
        sharded = bool(kwargs.get("shards"))
        key = repr((kwargs["dtype"], kwargs.get("compressors"), kwargs.get("filters"),
                    kwargs.get("serializer"), sharded, ndim))
        if key not in self._cache:
            self._cache[key] = self._template(kwargs, ndim, sharded)
        template, zdtype = self._cache[key]
        doc = json.loads(json.dumps(template))
        fill = kwargs["fill_value"]
        if fill is None and self.zarr_format == 3:
            fill = zdtype.default_scalar()
        fill_json = None if fill is None else zdtype.to_json_scalar(zdtype.cast_scalar(fill), zarr_format=self.zarr_format)
        shape = list(plan.shape)
        chunks = list(plan.chunks)
        if self.zarr_format == 3:
            doc["shape"] = shape
            doc["fill_value"] = fill_json
            doc["attributes"] = kwargs["attributes"]
            if kwargs.get("dimension_names"):
                doc["dimension_names"] = kwargs["dimension_names"]
            else:
                doc.pop("dimension_names", None)
            if sharded:
                doc["chunk_grid"]["configuration"]["chunk_shape"] = list(plan.shards or ())
                doc["codecs"][0]["configuration"]["chunk_shape"] = chunks
            else:
                doc["chunk_grid"]["configuration"]["chunk_shape"] = chunks
            return {"zarr.json": doc}
        doc[".zarray"].update(shape=shape, chunks=chunks, fill_value=fill_json)
        return {".zarray": doc[".zarray"], ".zattrs": kwargs["attributes"]}

    def _template(self, kwargs: dict[str, Any], ndim: int, sharded: bool) -> tuple[dict[str, Any], Any]:
        store: dict[str, Any] = {}
        sample = dict(kwargs, attributes={}, dimension_names=None, fill_value=None)
        sample.pop("overwrite", None)
        if self.zarr_format == 2:
            sample.pop("dimension_names")
        sample["shape"] = (2,) * ndim
        sample["chunks"] = (1,) * ndim if ndim else "auto"
        if sharded:
            sample["shards"] = (2,) * ndim
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = zarr.create_array(zarr.storage.MemoryStore(store), zarr_format=self.zarr_format, **sample)
        if isinstance(arr.metadata, ArrayV3Metadata):
            return json.loads(store["zarr.json"].to_bytes()), arr.metadata.data_type
        return {".zarray": json.loads(store[".zarray"].to_bytes())}, arr.metadata.dtype


WRITERS = {"zarr": ZarrWriter}
