"""A hypothesis strategy for HDF5 files as real files carry them (issue 41).

:func:`files` draws a *spec*: plain data (dicts, tuples, strings, ints) naming groups,
datasets, scales, attributes and links, so a failing example prints as a literal that
can be kept as a regression case (``@example(spec)``). :func:`write` makes the file with
h5py (and hdf5plugin's filters); the values come from the spec's seed, with the values
that break code (NaN, infinities, -0.0, the ends of integer ranges, empty strings,
non-ASCII text) mixed in.

The feature space, drawn in combination: integer (both byte orders), float (float16,
big-endian), bool and enum, fixed and variable-length strings (ASCII, UTF-8), compound,
array and object-reference types; padded big-endian tables, nested compounds with enums,
strings padded with spaces or NUL-terminated, long double, region references (boxes,
points, unions, the whole dataset, unset) and references inside compounds (issue 48);
HDF5 virtual datasets mapping another file in part and external raw storage (issue 65);
every chunk index (the earliest or the latest
file format, fixed, finite, first-, last- or all-unlimited maximum shapes); scalar, empty,
null and zero-length dataspaces;
contiguous, compact and chunked storage with partial edge chunks and chunks never
written; fill values set or not; gzip, shuffle, fletcher32, scaleoffset, nbit, lzf,
zstd, blosc, lz4, bitshuffle; dimension scales shared, attached to several axes, and
dimension-only (netCDF's); attributes of every type, empty and non-UTF-8 bytes; groups
with creation order; soft, external and dangling links; unlimited dimensions; deep and
wide hierarchies; shot archives the template matches in part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import hdf5plugin
import numpy as np
from hypothesis import strategies as st

NUMERIC = ("<i1", "<u1", ">i2", "<u2", "<i4", ">u4", "<i8", ">i8", "<u8", "<f2", ">f2", "<f4", ">f4", "<f8", ">f8")
# issue 48's: a padded big-endian table (PyTables, pandas), a nested compound with an enum,
# strings padded with spaces or NUL-terminated (HDF5 converts both as it reads), long double,
# region references and object references inside a compound
TYPES = (*NUMERIC, "bool", "enum", "S6", "vstr", "vbytes", "compound", "array", "ref",
         "table", "nested", "spacepad", "nullterm", "longdouble", "regionref", "cref",
         # issue 65's: a compound with a text member (AnnData), one with array members, ragged arrays,
         # an array type of compounds, a compound with an array-of-text member (jhdf's), text inside a
         # nested member, sequences of fixed-length bytes, a compound of sequence members (jhdf's),
         # sequences of a big-endian type (h5py labels their arrays native), an array type of text,
         # array members (of numbers, of text) inside a nested member, sequences of strings
         "ctext", "carray", "ragged", "acomp", "ctextarr", "ntext", "bseq", "cseq", "rbe", "atext", "narray",
         "sstr", "clongdouble",
         # a sequence member inside a nested member, an array type of compounds holding text and arrays
         "nseq", "acompt")
STRPAD = {"spacepad": h5py.h5t.STR_SPACEPAD, "nullterm": h5py.h5t.STR_NULLTERM}
FILTERS = ("gzip", "shuffle", "fletcher32", "scaleoffset", "nbit", "lzf", "zstd", "blosc", "lz4", "bitshuffle")
ATTRS = ("int", "float_be", "floats", "bytes", "str", "str_ascii", "strs", "empty", "not_utf8", "bool", "compound",
         "ref", "f16", "regionref", "compound_ref", "longdouble", "clongdouble", "opaque")
# the chunk index HDF5 picks: a v1 B-tree (earliest); with the latest format a single chunk,
# an implicit index, a fixed array (fixed or finite maximum), an extensible array (one
# unlimited axis: the first, or the last, where HDF5's chunk queries misplace chunks)
# or a v2 B-tree (several unlimited axes)
MAXSHAPES = ("fixed", "first", "last", "all", "finite")
ELSEWHERE = (*NUMERIC, "bool", "enum", "compound", "table", "S6")  # kinds drawn as virtual or external storage
REGION_TARGET = "/regions"  # the dataset region references select from, made with the first one
NAMES = ("a", "b", "data", "x", "time", "Ip", "µs", "with space", "v1", "back\\slash")
DIM_ONLY = "This is a netCDF dimension but not a netCDF variable."


# -- the spec -----------------------------------------------------------------------------


@st.composite
def datasets(draw: Any, path: str) -> dict[str, Any]:
    """One dataset: type, dataspace, storage, filters, fill value, how much is written."""
    kind = draw(st.sampled_from(TYPES))
    space = draw(st.sampled_from(("simple", "simple", "simple", "scalar", "null", "zero")))
    if space == "simple":
        shape = tuple(draw(st.lists(st.integers(1, 17), min_size=1, max_size=3)))
    elif space == "zero":
        shape = (0, *draw(st.lists(st.integers(1, 5), max_size=1)))
    else:
        shape = ()
    storage = "contiguous"
    if space in ("simple", "zero"):
        storage = draw(st.sampled_from(("contiguous", "compact", "chunked", "chunked")))
    if space == "simple" and storage == "contiguous" and kind in ELSEWHERE:
        # its values in other files (issue 65): an HDF5 virtual dataset mapping another
        # file in part, or external raw storage
        storage = draw(st.sampled_from(("contiguous", "contiguous", "virtual", "external")))
    spec: dict[str, Any] = {"path": path, "kind": kind, "space": space, "shape": shape, "storage": storage}
    if storage == "chunked":
        spec["chunks"] = tuple(draw(st.integers(1, max(1, n))) for n in shape)
        spec["unlimited"] = draw(st.booleans()) or space == "zero"
        spec["maxshape"] = ("fixed" if not spec["unlimited"] else draw(st.sampled_from(("first", "all")))
                            if space == "zero" else draw(st.sampled_from(MAXSHAPES)))
        fits = [f for f in FILTERS if _filter_fits(f, kind)]
        spec["filters"] = tuple(draw(st.lists(st.sampled_from(fits), max_size=2, unique=True))) if fits else ()
        spec["written"] = draw(st.sampled_from(("all", "all", "part", "none")))
    if kind not in ("ref", "vstr", "vbytes", "regionref", "cref", "nested", "spacepad", "nullterm", "ctext", "carray",
                    "ragged", "acomp", "ctextarr", "ntext", "bseq", "cseq", "rbe", "atext", "narray", "sstr", "nseq",
                    "acompt") and space != "null":
        spec["fill"] = draw(st.sampled_from((None, "set")))
    if kind in (*NUMERIC, "enum", "compound", "table") and space != "null" and storage not in ("virtual", "external"):
        # of a committed (named) datatype, as netCDF-4 keeps its enums (issue 48)
        spec["committed"] = draw(st.booleans())
    return spec


def _filter_fits(name: str, kind: str) -> bool:
    if kind in ("vstr", "vbytes", "ref", "regionref", "cref", "ctext", "ragged", "ctextarr", "ntext", "bseq", "cseq",
                "rbe", "atext", "narray", "sstr"):
        return False  # HDF5 filters variable-length data as heap references: h5py refuses most
    if name in ("scaleoffset", "nbit"):
        # (not floats: HDF5 cannot read back the chunks its scaleoffset filter wrote of the
        # NaN and infinities every float dataset here holds, "filter returned failure
        # during read", so no reader could read the file; found by the long run of 2026-11-27)
        return kind in NUMERIC and kind[1] in "iu"
    if name in ("lz4", "bitshuffle", "blosc", "zstd"):
        return kind in NUMERIC or kind in ("bool", "compound", "array", "table", "carray")
    return True


@st.composite
def files(draw: Any) -> dict[str, Any]:
    """A whole file: a hierarchy (maybe in part a shot archive), its datasets,
    scales, attributes and links."""
    groups: list[tuple[str, bool]] = []
    paths: list[str] = []
    if draw(st.booleans()):  # a shot archive, matched by the template in part
        for shot in draw(st.lists(st.sampled_from(("1001", "1002", "1003", "notashot")), min_size=1, max_size=3,
                                  unique=True)):
            groups.append((f"/shots/{shot}/signals", draw(st.booleans())))
            for sig in draw(st.lists(st.sampled_from(("ip", "ne", "te")), min_size=1, max_size=3, unique=True)):
                paths.append(f"/shots/{shot}/signals/{sig}")
            if draw(st.booleans()):
                paths.append(f"/shots/{shot}/other")  # beside the signals, not one
    depth = draw(st.integers(0, 5))
    base = ""
    for i in range(depth):  # deep
        base += f"/{draw(st.sampled_from(NAMES))}{i}"
        groups.append((base, draw(st.booleans())))
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=8, unique=True)):  # wide
        paths.append(f"{base}/{name}")
    paths = list(dict.fromkeys(paths))[:12]
    dsets = [draw(datasets(p)) for p in paths]
    one_d = [d for d in dsets if d["space"] == "simple" and len(d["shape"]) == 1 and d["kind"] in NUMERIC]
    scales = []
    if one_d and draw(st.booleans()):
        scale = draw(st.sampled_from(one_d))
        n = scale["shape"][0]
        users = [(d["path"], axis) for d in dsets if d is not scale and d["space"] == "simple"
                 for axis, m in enumerate(d["shape"]) if m == n]
        attach = draw(st.lists(st.sampled_from(users), unique=True, max_size=4)) if users else []
        scales.append({"path": scale["path"], "name": draw(st.sampled_from(("", "time", DIM_ONLY))),
                       "attach": tuple(attach)})
    nodes = ["/", *(g for g, _ in groups), *paths]
    attrs = draw(st.lists(st.tuples(st.sampled_from(nodes), st.sampled_from(NAMES), st.sampled_from(ATTRS)),
                          max_size=6, unique_by=lambda t: (t[0], t[1])))
    links = draw(st.lists(st.tuples(st.sampled_from(("soft", "dangling", "external", "hard")),
                                    st.sampled_from(("l1", "l2"))), max_size=2, unique_by=lambda t: t[1]))
    return {"seed": draw(st.integers(0, 2**16)), "groups": tuple(groups), "datasets": tuple(dsets),
            "scales": tuple(scales), "attrs": tuple(attrs), "links": tuple(links),
            "track_order": draw(st.booleans()), "libver": draw(st.sampled_from(("earliest", "latest")))}


# -- the file -----------------------------------------------------------------------------


def write(spec: dict[str, Any], path: Path) -> Path:
    """Make the file ``spec`` describes."""
    rng = np.random.default_rng(spec["seed"])
    with h5py.File(path, "w", track_order=spec["track_order"], libver=spec.get("libver", "earliest")) as f:
        for group, order in spec["groups"]:
            if order:
                _ordered_group(f, group)
            else:
                f.require_group(group)
        for d in spec["datasets"]:
            _dataset(f, d, rng)
        for s in spec["scales"]:
            ds = f[s["path"]]
            ds.make_scale(f"{s['name']}{ds.shape[0]:10d}" if s["name"] == DIM_ONLY else s["name"])
            for target, axis in s["attach"]:
                f[target].dims[axis].attach_scale(ds)
        for node, name, kind in spec["attrs"]:
            _attribute(f, f[node], name, kind, rng)
        targets = [d["path"] for d in spec["datasets"]]
        for kind, name in spec["links"]:
            if kind == "soft" and targets:
                f[name] = h5py.SoftLink(targets[0])
            elif kind == "hard" and targets:
                f[name] = f[targets[-1]]
            elif kind == "external":
                f[name] = h5py.ExternalLink("no-such-file.h5", "/x")
            else:
                f[name] = h5py.SoftLink("/nowhere")
    return path


def _ordered_group(f: h5py.File, path: str) -> None:
    parent = "/"
    for part in path.strip("/").split("/"):
        here = f"{parent.rstrip('/')}/{part}"
        if here not in f:
            f[parent].create_group(part, track_order=True)
        parent = here


def dtype_of(kind: str) -> np.dtype:
    if kind in NUMERIC:
        return np.dtype(kind)
    return {
        "bool": np.dtype(bool),
        "enum": h5py.enum_dtype({"OFF": 0, "ON": 1, "FAULT": 7}, basetype="i1"),
        "S6": np.dtype("S6"),
        "vstr": h5py.string_dtype("utf-8"),
        "vbytes": h5py.string_dtype("ascii"),
        "compound": np.dtype([("t", "<f8"), ("n", ">i2"), ("tag", "S3")]),
        "array": np.dtype(("<f4", (3,))),
        "ref": h5py.ref_dtype,
        "table": np.dtype({"names": ["idx", "v"], "formats": [">i2", ">f8"], "offsets": [0, 8], "itemsize": 24}),
        "nested": np.dtype([("a", "<i4"), ("n", [("e", h5py.enum_dtype({"A": 0, "B": 1}, basetype="i1")),
                                                 ("f", "<f4")])]),
        "spacepad": np.dtype("S6"),
        "nullterm": np.dtype("S6"),
        "longdouble": np.dtype(np.longdouble),
        "clongdouble": np.dtype(np.clongdouble),
        "regionref": h5py.regionref_dtype,
        "cref": np.dtype([("a", "<i4"), ("r", h5py.ref_dtype), ("n", [("q", h5py.ref_dtype), ("d", "<f4")]),
                          ("g", h5py.regionref_dtype), ("v", h5py.ref_dtype, (2,))]),
        "ctext": np.dtype([("id", "<i4"), ("name", h5py.string_dtype())]),
        "carray": np.dtype([("id", "<i2"), ("v", "<f4", (3,)), ("m", ">i4", (2, 2))]),
        "ragged": h5py.vlen_dtype(np.dtype("<f8")),
        "rbe": h5py.vlen_dtype(np.dtype(">i4")),
        "atext": np.dtype((h5py.string_dtype(), (2,))),
        "sstr": h5py.vlen_dtype(h5py.string_dtype()),
        "narray": np.dtype([("id", "<i2"), ("n", [("v", "<f4", (2,)), ("s", h5py.string_dtype(), (2,)), ("d", ">i4")])]),
        "acomp": np.dtype((np.dtype([("a", "<i4"), ("b", ">f4")]), (2,))),
        "ctextarr": np.dtype([("id", "<i2"), ("name", h5py.string_dtype(), (2,))]),
        "ntext": np.dtype([("a", "<i4"), ("n", [("s", h5py.string_dtype()), ("d", "<f4")])]),
        "bseq": h5py.vlen_dtype(np.dtype("S3")),
        "cseq": np.dtype([("id", "<i2"), ("v", h5py.vlen_dtype("<i4")), ("b", h5py.vlen_dtype(np.dtype("S2"))),
                          ("v.length", "<u2")]),  # a member named as v's lengths' field
        "nseq": np.dtype([("id", "<i2"), ("n", [("q", h5py.vlen_dtype(">i2")), ("k", "<f4")])]),
        "acompt": np.dtype((np.dtype([("a", "<i4"), ("s", h5py.string_dtype()), ("v", "<f4", (2,))]), (2,))),
    }[kind]


# long: one branch a kind of TYPES, each the values it draws
def values(kind: str, shape: tuple[int, ...], rng: np.random.Generator, f: h5py.File | None = None) -> Any:
    """Values of ``kind`` with the awkward ones mixed in."""
    dt = dtype_of(kind)
    n = int(np.prod(shape, dtype=np.int64))
    if kind in NUMERIC:
        if dt.kind == "f":
            out = rng.normal(scale=1e3, size=n).astype(dt)
            special = np.array([np.nan, np.inf, -np.inf, -0.0, np.finfo(dt).max, np.finfo(dt).tiny], dtype=dt)
        else:
            info = np.iinfo(dt)
            out = rng.integers(info.min, info.max, size=n, dtype=dt.newbyteorder("="), endpoint=True).astype(dt)
            special = np.array([info.min, info.max, 0], dtype=dt)
        k = min(n, len(special))
        out[:k] = special[:k]
        return out.reshape(shape)
    if kind == "bool":
        return rng.integers(0, 2, size=n).astype(bool).reshape(shape)
    if kind == "enum":
        return rng.choice(np.array([0, 1, 7], dtype="i1"), size=n).reshape(shape)
    if kind in ("S6", "spacepad", "nullterm"):
        return np.array([b"", b"ab", b"x\x00y", b"123456", b"a  b  "] * n, dtype="S6")[:n].reshape(shape)
    if kind == "longdouble":
        return (rng.normal(size=n).astype(np.longdouble) / 3).reshape(shape)
    if kind == "clongdouble":
        return ((rng.normal(size=n) + 1j * rng.normal(size=n)).astype(np.clongdouble) / 3).reshape(shape)
    if kind in ("table", "nested"):
        out = np.zeros(n, dtype=dt)
        out[(dt.names or ())[0]] = rng.integers(-99, 99, size=n)
        return out.reshape(shape)
    if kind == "regionref":
        if f is not None:
            return _regions(f, n).reshape(shape)
        refs = np.empty(n, dtype=object)
        for i in range(n):
            refs[i] = h5py.RegionReference()
        return refs.reshape(shape)
    if kind == "cref":
        out = np.zeros(n, dtype=dt)
        out["a"] = np.arange(n)
        for i in range(n):
            out["r"][i], out["n"]["q"][i], out["g"][i] = h5py.Reference(), h5py.Reference(), h5py.RegionReference()
            out["v"][i] = [h5py.Reference(), h5py.Reference()]
        if f is not None:
            out["r"][::2], out["n"]["q"][1::2], out["g"][:] = f.ref, f.ref, _regions(f, n)
            for i in range(n):
                out["v"][i] = [f.ref, h5py.Reference() if i % 2 else f.ref]
        return out.reshape(shape)
    if kind in ("vstr", "vbytes"):
        words = ["", "µs", "üñî 𝜋", "plain"] if kind == "vstr" else ["", "abc", "a b", "long " * 20]
        return np.array([words[i % len(words)] for i in range(n)], dtype=object).reshape(shape)
    if kind == "compound":
        out = np.zeros(n, dtype=dt)
        out["t"], out["n"], out["tag"] = rng.normal(size=n), rng.integers(-99, 99, size=n), b"ok"
        return out.reshape(shape)
    if kind == "array":
        return rng.normal(size=(*shape, 3)).astype("<f4")
    if kind == "ctext":
        out = np.zeros(n, dtype=dt)
        out["id"] = np.arange(n)
        out["name"] = np.array([["", "µs", "üñî 𝜋", "plain"][i % 4] for i in range(n)], dtype=object)
        return out.reshape(shape)
    if kind == "carray":
        out = np.zeros(n, dtype=dt)
        out["id"], out["v"] = np.arange(n), rng.normal(size=(n, 3))
        out["m"] = rng.integers(-99, 99, size=(n, 2, 2))
        return out.reshape(shape)
    if kind == "acomp":
        out = np.zeros((n, 2), dtype=dt.base)
        out["a"], out["b"] = rng.integers(-99, 99, size=(n, 2)), rng.normal(size=(n, 2))
        return out.reshape((*shape, 2))
    if kind == "ctextarr":
        out = np.zeros(n, dtype=dt)
        out["id"] = np.arange(n)
        texts = ["", "µs", "üñî 𝜋", "plain"]
        out["name"] = np.array([[texts[i % 4], texts[(i + 1) % 4]] for i in range(n)], dtype=object).reshape(n, 2)
        return out.reshape(shape)
    if kind == "ntext":
        out = np.zeros(n, dtype=dt)
        out["a"], out["n"]["d"] = np.arange(n), rng.normal(size=n)
        out["n"]["s"] = np.array([["", "µs", "üñî 𝜋", "plain"][i % 4] for i in range(n)], dtype=object)
        return out.reshape(shape)
    if kind == "bseq":
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = np.array([b"ab", b"x\x00y", b""][: i % 4], dtype="S3")
        return out.reshape(shape)
    if kind == "cseq":  # sequences ending in zeros, empty ones
        out = np.zeros(n, dtype=dt)
        out["id"], out["v.length"] = np.arange(n), np.arange(n)[::-1]
        for i in range(n):
            out["v"][i] = np.array([i - 2, 0, 0], "<i4")[: i % 4]
            out["b"][i] = np.array([b"a\x00", b"", b"xy"], "S2")[: (i + 1) % 4]
        return out.reshape(shape)
    if kind == "nseq":  # a nested member's sequences: of a big-endian type, empty ones, ending in zeros
        out = np.zeros(n, dtype=dt)
        out["id"], out["n"]["k"] = np.arange(n), rng.normal(size=n)
        for i in range(n):
            out["n"]["q"][i] = np.array([i, -3, 0], ">i2")[: i % 4]
        return out.reshape(shape)
    if kind == "acompt":  # the elements a last axis
        out = np.zeros((n, 2), dtype=dt.base)
        texts = ["", "µs", "üñî 𝜋", "plain"]
        out["a"], out["v"] = rng.integers(-99, 99, size=(n, 2)), rng.normal(size=(n, 2, 2))
        out["s"] = np.array([[texts[i % 4], texts[(i + 1) % 4]] for i in range(n)], dtype=object)
        return out.reshape((*shape, 2))
    if kind == "narray":
        out = np.zeros(n, dtype=dt)
        texts = ["", "µs", "üñî 𝜋", "plain"]
        out["id"], out["n"]["v"], out["n"]["d"] = np.arange(n), rng.normal(size=(n, 2)), rng.integers(-99, 99, size=n)
        out["n"]["s"] = np.array([[texts[i % 4], texts[(i + 1) % 4]] for i in range(n)], dtype=object).reshape(n, 2)
        return out.reshape(shape)
    if kind == "sstr":  # empty ones, an empty string, a quote, text not ASCII
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = np.array(["", 'q"', "üñî 𝜋", "plain"][: i % 5], dtype=object)
        return out.reshape(shape)
    if kind == "atext":
        texts = ["", "µs", "üñî 𝜋", "plain"]
        return np.array([[texts[i % 4], texts[(i + 1) % 4]] for i in range(n)], dtype=object).reshape((*shape, 2))
    if kind == "rbe":
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = np.array([258, -2, i, 0][: i % 5], ">i4")
        return out.reshape(shape)
    if kind == "ragged":
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = rng.normal(size=i % 4)  # empty ones among them
        return out.reshape(shape)
    refs = np.empty(n, dtype=object)  # "ref": to the root, or null
    for i in range(n):
        refs[i] = f.ref if f is not None and i % 2 == 0 else h5py.Reference()
    return refs.reshape(shape)


def _fill(kind: str) -> Any:
    # (h5py cannot set an array type's fill value: "no appropriate function for conversion path")
    return {"bool": True, "enum": 7, "S6": b"fill", "compound": np.zeros((), dtype=dtype_of("compound"))}.get(
        kind, 42 if kind in NUMERIC else None)


def _filters(names: tuple[str, ...], kind: str) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for name in names:
        if name == "gzip":
            kw.update(compression="gzip", compression_opts=4)
        elif name == "lzf":
            kw.update(compression="lzf")
        elif name == "shuffle":
            kw["shuffle"] = True
        elif name == "fletcher32":
            kw["fletcher32"] = True
        elif name == "scaleoffset":
            kw["scaleoffset"] = 0 if np.dtype(dtype_of(kind)).kind in "iu" else 3
        elif name == "nbit":
            kw.update(compression=h5py.h5z.FILTER_NBIT)
        else:
            kw.update({"zstd": hdf5plugin.Zstd(clevel=2), "blosc": hdf5plugin.Blosc(cname="lz4", clevel=5),
                       "lz4": hdf5plugin.LZ4(), "bitshuffle": hdf5plugin.Bitshuffle()}[name])
    if kw.get("fletcher32") and "scaleoffset" in kw:
        kw.pop("fletcher32")  # h5py: "fletcher32 cannot be used with potentially lossy scale/offset filter"
    if "compression" in kw and sum(n in ("gzip", "lzf", "nbit", "zstd", "blosc", "lz4", "bitshuffle")
                                   for n in names) > 1:
        kw.pop("compression_opts", None)  # one compression filter per dataset in h5py's keywords
    return kw


def _dataset(f: h5py.File, d: dict[str, Any], rng: np.random.Generator) -> None:
    kind, shape, dt = d["kind"], d["shape"], dtype_of(d["kind"])
    if d["path"] in f:
        return
    if d["space"] == "null":
        f.create_dataset(d["path"], data=h5py.Empty(dt if kind not in ("ref", "array", "regionref", "cref", "acomp", "ctextarr",
                                                                       "bseq", "atext", "narray", "acompt")
                                                    else np.dtype("f4")))
        return
    if kind in STRPAD:
        _padded_strings(f, d, rng)
        return
    if d["storage"] in ("virtual", "external"):
        (_virtual if d["storage"] == "virtual" else _external)(f, d, rng)
        return
    kw: dict[str, Any] = {"shape": shape, "dtype": dt}
    if d.get("committed"):
        name = "/type_" + "".join(c if c.isalnum() else "_" for c in kind)
        if name not in f:
            f[name] = dt
        kw["dtype"] = f[name]
    if d.get("fill") == "set" and _fill(kind) is not None:
        kw["fillvalue"] = _fill(kind)
    if d["storage"] == "compact" and _size(dt, shape) < 30_000 and kind not in (
            "vstr", "vbytes", "ref", "regionref", "cref", "ctextarr", "ntext", "bseq", "cseq", "atext", "narray"):
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        kw["dcpl"] = dcpl
    elif d["storage"] == "chunked":
        kw["chunks"] = d["chunks"]
        if d["unlimited"]:
            kw["maxshape"] = _maxshape(d.get("maxshape", "first"), shape)
        kw.update(_filters(d["filters"], kind))
    ds = f.create_dataset(d["path"], **kw)
    written = d.get("written", "all")
    if written == "none" or 0 in shape:
        return
    data = values(kind, shape, rng, f)
    if kind in ("ragged", "bseq", "rbe", "sstr"):  # one sequence at a time: h5py takes equally long ones for one more axis
        count = max(1, shape[0] // 2) if written == "part" and shape else None
        for index in np.ndindex(*shape):
            if count is None or index[0] < count:
                ds[index] = data[index]
        return
    if written == "part" and shape:
        ds[: max(1, shape[0] // 2)] = data[: max(1, shape[0] // 2)]
    else:
        ds[()] = data


def _beside(f: h5py.File, d: dict[str, Any], suffix: str) -> Path:
    """A file beside ``f`` for the dataset ``d``'s values."""
    return Path(f.filename).with_name(Path(f.filename).stem + d["path"].replace("/", "-") + suffix)


def _virtual(f: h5py.File, d: dict[str, Any], rng: np.random.Generator) -> None:
    """An HDF5 virtual dataset whose first half (at least one row) is mapped from a file
    beside it, named relative; the rest unmapped, read as the fill value."""
    kind, shape, dt = d["kind"], d["shape"], dtype_of(d["kind"])
    data = values(kind, shape, rng, f)
    source = _beside(f, d, ".vds.h5")
    with h5py.File(source, "w") as s:
        s.create_dataset("data", data=data, dtype=dt)
    rows = max(1, shape[0] // 2)
    layout = h5py.VirtualLayout(shape=shape, dtype=dt)
    layout[:rows] = h5py.VirtualSource(source.name, "data", shape=shape, dtype=dt)[:rows]
    fill = _fill(kind) if d.get("fill") == "set" else None
    f.create_virtual_dataset(d["path"], layout, fillvalue=fill)


def _external(f: h5py.File, d: dict[str, Any], rng: np.random.Generator) -> None:
    """External raw storage: the values in two files beside it (one element at least in
    the first, after a few bytes of something else), named relative."""
    kind, shape, dt = d["kind"], d["shape"], dtype_of(d["kind"])
    raw = np.asarray(values(kind, shape, rng, f), dtype=dt).tobytes()
    cut = max(1, int(np.prod(shape)) // 2) * dt.itemsize
    first, second = _beside(f, d, ".0.bin"), _beside(f, d, ".1.bin")
    first.write_bytes(b"hdr" + raw[:cut])
    second.write_bytes(raw[cut:])
    segments = [(first.name, 3, cut)] + ([(second.name, 0, len(raw) - cut)] if len(raw) > cut else [])
    fill = _fill(kind) if d.get("fill") == "set" else None
    f.create_dataset(d["path"], shape=shape, dtype=dt, external=segments, fillvalue=fill)


def _region_target(f: h5py.File) -> h5py.Dataset:
    if REGION_TARGET not in f:
        f.create_dataset(REGION_TARGET, data=np.arange(20, dtype="<i4").reshape(4, 5))
    return f[REGION_TARGET]


def _regions(f: h5py.File, n: int) -> np.ndarray:
    """``n`` region references into :data:`REGION_TARGET`: a box, the whole dataset, points
    in their order, a union of boxes, and one not set, in turn."""
    x = _region_target(f)
    points = x.id.get_space()
    points.select_elements(np.array([[3, 4], [0, 1], [2, 2]]))
    boxes = x.id.get_space()
    boxes.select_hyperslab((0, 0), (1, 2))
    boxes.select_hyperslab((2, 3), (2, 2), op=h5py.h5s.SELECT_OR)
    made = [x.regionref[1:3, 0:2], x.regionref[...],
            h5py.h5r.create(f.id, REGION_TARGET.encode(), h5py.h5r.DATASET_REGION, points),
            h5py.h5r.create(f.id, REGION_TARGET.encode(), h5py.h5r.DATASET_REGION, boxes), h5py.RegionReference()]
    refs = np.empty(n, dtype=object)
    for i in range(n):
        refs[i] = made[i % len(made)]
    return refs


def _maxshape(kind: str, shape: tuple[int, ...]) -> tuple[int | None, ...]:
    if kind == "fixed" or not shape:
        return shape
    if kind == "first":
        return (None, *shape[1:])
    if kind == "last":
        return (*(2 * n for n in shape[:-1]), None)
    if kind == "all":
        return (None,) * len(shape)
    return tuple(3 * n + 1 for n in shape)  # "finite": a fixed array index sized for more


def _padded_strings(f: h5py.File, d: dict[str, Any], rng: np.random.Generator) -> None:
    """Fixed-length strings with the padding h5py does not write (its own is NUL padding)."""
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(6)
    tid.set_strpad(STRPAD[d["kind"]])
    shape = d["shape"]
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    maxshape = shape
    if d["storage"] == "chunked":
        dcpl.set_chunk(d["chunks"])
        maxshape = _maxshape(d.get("maxshape", "first"), shape) if d["unlimited"] else shape
    space = (h5py.h5s.create_simple(shape, tuple(h5py.h5s.UNLIMITED if n is None else n for n in maxshape))
             if d["space"] != "scalar" else h5py.h5s.create(h5py.h5s.SCALAR))
    parent, name = d["path"].rsplit("/", 1)
    ds = h5py.h5d.create(f.require_group(parent or "/").id, name.encode(), tid, space, dcpl=dcpl)
    if d.get("written", "all") != "none" and 0 not in shape:
        data = values(d["kind"], shape, rng)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data), mtype=tid)


def _size(dt: np.dtype, shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64)) * dt.itemsize


def _attribute(f: h5py.File, obj: Any, name: str, kind: str, rng: np.random.Generator) -> None:
    a = obj.attrs
    if kind == "int":
        a[name] = np.int64(rng.integers(-(2**40), 2**40))
    elif kind == "float_be":
        a.create(name, np.array([1.5, np.nan]), dtype=">f8")
    elif kind == "floats":
        a[name] = rng.normal(size=4).astype("f4")
    elif kind == "f16":
        a.create(name, np.float16(0.5), dtype="<f2")
    elif kind == "bytes":
        a[name] = np.bytes_(b"seconds")
    elif kind == "str":
        a[name] = "µs: ü 𝜋"
    elif kind == "str_ascii":
        a.create(name, "plain", dtype=h5py.string_dtype("ascii"))
    elif kind == "strs":
        a[name] = ["", "one", "twö"]
    elif kind == "empty":
        a[name] = h5py.Empty("f4")
    elif kind == "not_utf8":
        a[name] = np.bytes_(b"\xff\xfe\x00bad")
    elif kind == "bool":
        a[name] = np.bool_(True)
    elif kind == "compound":
        a[name] = np.array((1.0, 2, b"ab"), dtype=dtype_of("compound"))
    elif kind == "regionref":
        a.create(name, _regions(f, 2), dtype=h5py.regionref_dtype)
    elif kind == "compound_ref":
        dt = dtype_of("cref")
        value = np.zeros((), dt)
        value["r"], value["n"]["q"], value["g"] = f.ref, h5py.Reference(), _regions(f, 1)[0]
        value["v"] = [f.ref, h5py.Reference()]
        a.create(name, value, dtype=dt)
    elif kind == "longdouble":
        a.create(name, np.longdouble(1) / 3, dtype=np.longdouble)
    elif kind == "clongdouble":
        a.create(name, np.array([1 + 2j, -1j]) / np.clongdouble(3), dtype=np.clongdouble)
    elif kind == "opaque":
        a.create(name, np.void(b"\x01\x02\x03"))
    else:  # "ref"
        a.create(name, f.ref, dtype=h5py.ref_dtype)


__all__ = ["ATTRS", "FILTERS", "TYPES", "dtype_of", "files", "values", "write"]
