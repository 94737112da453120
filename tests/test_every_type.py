"""Every HDF5 type and object of issue #48, through convert (Zarr v3 and v2) and reorder:
equal by verify (which reads the source through HDF5 itself), or refused with exit 2 and
one sentence naming the object and the feature, leaving nothing behind.

Each file holds one feature (built here with h5py's high- and low-level API, and the
HDF5 library through ctypes for what h5py does not wrap)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from typer.testing import CliRunner

from layoutkit.cli import app


def compound_big_endian(f: h5py.File) -> None:
    dt = np.dtype([("a", ">i4"), ("b", ">f8")])
    f.create_dataset("t", data=np.array([(1, 2.5), (3, 4.5)], dt), chunks=(1,))


def compound_padded(f: h5py.File) -> None:  # PyTables' and pandas' tables
    dt = np.dtype({"names": ["a", "b"], "formats": ["<i2", "<f8"], "offsets": [0, 8], "itemsize": 24})
    f.create_dataset("t", data=np.array([(1, 2.5), (3, 4.5)], dt))


def compound_nested_enum(f: h5py.File) -> None:
    inner = np.dtype([("c", h5py.enum_dtype({"RED": 0, "GREEN": 1}, basetype="i1")), ("d", "<f4")])
    data = np.zeros(3, np.dtype([("a", "<i4"), ("n", inner)]))
    data["a"] = [1, 2, 3]
    f.create_dataset("t", data=data)


def compound_array_member(f: h5py.File) -> None:
    data = np.zeros(3, np.dtype([("a", "<i4"), ("v", "<f4", (3,))]))
    data["v"] = np.arange(9).reshape(3, 3)
    f.create_dataset("t", data=data)


def compound_nested_array_member(f: h5py.File) -> None:  # an array member inside a member: a field an element too
    inner = np.dtype([("v", "<f4", (2,)), ("d", "<f4")])
    data = np.zeros(3, np.dtype([("a", "<i4"), ("n", inner)]))
    data["a"], data["n"]["v"], data["n"]["d"] = [7, 8, 9], np.arange(6).reshape(3, 2), [0.5, 1.5, 2.5]
    f.create_dataset("t", data=data, chunks=(2,))


def compound_array_members_deep(f: h5py.File) -> None:
    """Array members two levels deep (of numbers, big-endian, of two axes; of text) and
    beside them at each level, one row unset."""
    deeper = np.dtype([("m", ">i2", (2, 2)), ("s", h5py.string_dtype(), (2,))])
    dt = np.dtype([("id", "<i2"), ("n", [("x", "<f8"), ("deep", deeper), ("w", "<u1", (3,))]), ("top", "<f4", (2,))])
    ds = f.create_dataset("t", shape=(3,), dtype=dt, chunks=(2,))
    ds[0] = (1, (0.5, ([[1, 2], [3, 4]], ["ab", "Zoë"]), [1, 2, 3]), [1.5, 2.5])
    ds[1] = (2, (1.5, ([[5, -6], [7, 8]], ["", "µs"]), [4, 5, 6]), [3.5, 4.5])


def compound_vlen_string_member(f: h5py.File) -> None:
    f.create_dataset("t", data=np.array([(1, "x"), (2, "yy")], np.dtype([("a", "<i4"), ("s", h5py.string_dtype())])))


def compound_text_array_member(f: h5py.File) -> None:
    """A member that is an array of variable-length strings (jhdf's
    ``array_vlen_chunked_compound``): a field an element, each at the longest value's
    length; one unset, one not ASCII."""
    dt = np.dtype([("id", "<i2"), ("name", h5py.string_dtype(), (2,))])
    ds = f.create_dataset("t", shape=(3,), dtype=dt, chunks=(2,))
    ds[0] = (1, ["James", "Ellie"])
    ds[1] = (2, ["Zoë", "µs and more"])


def compound_vlen_sequence_member(f: h5py.File) -> None:
    """Members that are variable-length sequences (jhdf's ``vlen_chunked_compound``): of
    uint8, of float64 and of fixed-length bytes; sequences ending in zero bytes
    (a fixed-length bytes field drops them), an empty one, and a row never written (the
    fill value: each sequence unset)."""
    dt = np.dtype([("a", "<i4"), ("u", h5py.vlen_dtype("u1")), ("x", h5py.vlen_dtype("<f8")),
                   ("s", h5py.vlen_dtype(np.dtype("S2")))])
    ds = f.create_dataset("t", shape=(4,), dtype=dt, chunks=(2,))
    ds[0] = (1, np.array([1, 0, 0], "u1"), np.array([0.0, 2.5, 0.0], "<f8"), np.array([b"ab", b"c\x00"], "S2"))
    ds[1] = (2, np.array([], "u1"), np.array([-1.5], "<f8"), np.array([], "S2"))
    ds[2] = (3, np.array([255], "u1"), np.array([], "<f8"), np.array([b""], "S2"))


def compound_sequence_beside_its_length_name(f: h5py.File) -> None:  # the field of its lengths is taken
    dt = np.dtype([("s", h5py.vlen_dtype("i4")), ("s.length", "<i4"), ("s.length.1", "<f4"),
                   ("s.length.length", h5py.vlen_dtype("u1"))])
    f.create_dataset("t", data=np.array([(np.arange(2, dtype="i4"), 5, 0.5, np.array([1, 0], "u1")),
                                         (np.array([], "i4"), 6, 1.5, np.array([], "u1"))], dt))


def compound_nested_sequence_member(f: h5py.File) -> None:
    """A sequence member inside a nested member, two deep (issue 65): its bytes and its
    lengths in the nested member; beside a member named as its lengths' field, an empty
    sequence, one ending in zeros, a row never written."""
    deeper = np.dtype([("q", h5py.vlen_dtype("<i2")), ("k", "<i2")])
    inner = np.dtype([("v", h5py.vlen_dtype("<f8")), ("v.length", "<i4"), ("m", deeper)])
    ds = f.create_dataset("t", shape=(3,), dtype=np.dtype([("a", "<i4"), ("n", inner)]), chunks=(2,))
    ds[0] = (1, (np.array([0.5, 0.0]), 7, (np.array([3, 0, 0], "<i2"), 4)))
    ds[1] = (2, (np.array([], "<f8"), 8, (np.array([-1], "<i2"), 5)))


def compound_vlen_string_nested(f: h5py.File) -> None:  # a text member inside a member, two deep, one unset
    deeper = np.dtype([("u", h5py.string_dtype()), ("k", "<i2")])
    inner = np.dtype([("s", h5py.string_dtype()), ("d", "<f4"), ("m", deeper)])
    ds = f.create_dataset("t", shape=(3,), dtype=np.dtype([("a", "<i4"), ("n", inner)]), chunks=(2,))
    ds[0] = (1, ("x", 0.5, ("ü deep", 3)))
    ds[1] = (2, ("Zoë's", 1.5, ("", 4)))


def compound_reference_member(f: h5py.File) -> None:
    """Object references in a compound member (issue 65): to a dataset, to a group with a
    name not ASCII, unset; chunked, a row never written."""
    f.create_dataset("target", data=np.arange(3))
    f.create_group("grüppe/inner")
    data = np.zeros(3, np.dtype([("a", "<i4"), ("r", h5py.ref_dtype)]))
    data["a"] = [1, 2, 3]
    data["r"][0], data["r"][1], data["r"][2] = f["target"].ref, f["grüppe/inner"].ref, h5py.Reference()
    f.create_dataset("t", shape=(4,), dtype=data.dtype, chunks=(2,))[:3] = data


def compound_nested_reference_member(f: h5py.File) -> None:  # references inside nested members, two deep
    f.create_dataset("x", data=np.arange(10))
    data = np.zeros(2, np.dtype([("a", "<i4"), ("n", [("r", h5py.ref_dtype), ("m", [("q", h5py.ref_dtype)])])]))
    data["n"]["r"][0], data["n"]["r"][1] = f["x"].ref, h5py.Reference()
    data["n"]["m"]["q"][0], data["n"]["m"]["q"][1] = f.ref, f["x"].ref
    f.create_dataset("t", data=data, chunks=(1,))


def compound_region_member(f: h5py.File) -> None:
    """Region references as a compound's member and in a nested one: boxes, points, the
    whole dataset, one unset."""
    x = f.create_dataset("x", data=np.arange(20).reshape(4, 5))
    dt = np.dtype([("a", "<i4"), ("r", h5py.regionref_dtype), ("n", [("q", h5py.regionref_dtype)])])
    data = np.zeros(3, dt)
    data["a"] = [1, 2, 3]
    data["r"][0], data["r"][1], data["r"][2] = x.regionref[1:3, 2:4], x.regionref[...], h5py.RegionReference()
    points = x.id.get_space()
    points.select_elements(np.array([[0, 1], [3, 4]], dtype=np.uint64))
    data["n"]["q"][0] = h5py.h5r.create(f.id, b"x", h5py.h5r.DATASET_REGION, points)
    data["n"]["q"][1], data["n"]["q"][2] = x.regionref[0:1, :], h5py.RegionReference()
    f.create_dataset("t", data=data)


def compound_reference_array_member(f: h5py.File) -> None:
    """Array members of object and of region references, one element unset, and one in a
    nested member."""
    x = f.create_dataset("x", data=np.arange(10))
    dt = np.dtype([("a", "<i4"), ("r", h5py.ref_dtype, (2,)), ("g", h5py.regionref_dtype, (2,)),
                   ("n", [("q", h5py.ref_dtype, (3,))])])
    data = np.zeros(2, dt)
    for i in range(2):
        data["r"][i] = [x.ref, h5py.Reference() if i else f.ref]
        data["g"][i] = [x.regionref[i:i + 3], h5py.RegionReference()]
        data["n"]["q"][i] = [f.ref, x.ref, f.ref]
    f.create_dataset("t", data=data)


def array_of_ints(f: h5py.File) -> None:
    f.create_dataset("t", shape=(4,), dtype=np.dtype(("<i2", (3,))))[...] = np.arange(12).reshape(4, 3)


def array_of_arrays(f: h5py.File) -> None:
    f.create_dataset("t", shape=(2,), dtype=np.dtype(("<f4", (2, 3))))[...] = np.arange(12).reshape(2, 2, 3)


def array_of_ints_chunked_shuffled(f: h5py.File) -> None:  # shuffle works on the 6-byte element, not on int16
    f.create_dataset("t", shape=(5,), dtype=np.dtype(("<i2", (3,))), chunks=(2,), shuffle=True,
                     compression="gzip")[:4] = np.arange(12).reshape(4, 3)  # the last chunk half written


def array_scalar(f: h5py.File) -> None:
    f.create_dataset("t", shape=(), dtype=np.dtype(("<f8", (2, 2))))[()] = [[1.5, 2.5], [3.5, 4.5]]


def virtual_dataset(f: h5py.File) -> None:  # the NeXus master file: frames in files of their own
    here = Path(f.filename).parent
    layout = h5py.VirtualLayout(shape=(6, 4), dtype="<i4")
    for i in range(2):
        with h5py.File(here / f"frames_{i}.h5", "w") as frames:
            frames["data"] = np.full((3, 4), i + 1, "<i4")
        layout[i * 3:(i + 1) * 3] = h5py.VirtualSource(f"frames_{i}.h5", "data", shape=(3, 4))
    f.create_virtual_dataset("t", layout, fillvalue=-1)
    f["other"] = np.arange(3)


def virtual_dataset_unmapped(f: h5py.File) -> None:  # HDF5 would read the missing file's rows as -1
    layout = h5py.VirtualLayout(shape=(6, 4), dtype="<i4")
    layout[:3] = h5py.VirtualSource("gone.h5", "data", shape=(3, 4))
    f.create_virtual_dataset("t", layout, fillvalue=-1)
    f["other"] = np.arange(3)


def array_of_compounds(f: h5py.File) -> None:  # the elements as a last axis, of the compound (issue 65)
    element = np.dtype([("a", "<i4"), ("b", ">f4")])
    values = np.zeros((3, 2), element)
    values["a"], values["b"] = np.arange(6).reshape(3, 2), np.linspace(-1, 1, 6).reshape(3, 2)
    f.create_dataset("t", shape=(3,), dtype=np.dtype((element, (2,))))[...] = values


def array_of_compounds_of_text(f: h5py.File) -> None:
    """An HDF5 array type of compounds holding text, an array member and text in a nested
    member (issue 65): the elements a last axis, each compound as the type rules store
    one; a row never written, one text not ASCII."""
    element = np.dtype([("a", "<i4"), ("s", h5py.string_dtype()), ("v", "<f4", (2,)),
                        ("n", np.dtype([("u", h5py.string_dtype()), ("k", "<i2")]))])
    ds = f.create_dataset("t", shape=(3,), dtype=np.dtype((element, (2,))), chunks=(2,))
    ds[0] = np.array([(1, "x", [0.5, 1.5], ("ü", 3)), (2, "", [2.5, 3.5], ("", 4))], element)
    ds[1] = np.array([(5, "Zoë's", [4.5, 5.5], ("deep", 6)), (6, "y", [6.5, 7.5], ("z", 7))], element)


def array_of_strings(f: h5py.File) -> None:  # fixed-length bytes x 2: the elements a last axis (issue 65)
    f.create_dataset("t", shape=(2,), dtype=np.dtype(("S3", (2,))))[...] = np.array([[b"ab", b"c\x00d"], [b"", b"xyz"]], "S3")


def array_of_text(f: h5py.File) -> None:
    """An HDF5 array type of variable-length strings (``string x 2``; h5py reads the
    elements as bytes): one not ASCII, one unset, a scalar one too."""
    ds = f.create_dataset("t", shape=(3,), dtype=np.dtype((h5py.string_dtype(), (2,))), chunks=(2,))
    ds[0], ds[1] = ["ab", "Zoë"], ["", "µs and more"]
    f.create_dataset("one", shape=(), dtype=np.dtype((h5py.string_dtype(), (2,))))[()] = ["x", "yz"]


def long_double(f: h5py.File) -> None:
    """Long doubles: thirds (more digits than a float64 holds), NaN, an infinity, a
    subnormal beyond float64's range; chunked with a fill value, a chunk never written;
    attributes of them, one value and several, of a dataset and of the root."""
    values = np.arange(6, dtype=np.longdouble) / 3
    values[1], values[2], values[3] = np.longdouble("nan"), -np.longdouble("inf"), np.finfo(np.longdouble).tiny / 7
    ds = f.create_dataset("t", data=values)
    f.create_dataset("c", shape=(5,), dtype=np.longdouble, chunks=(2,), fillvalue=np.longdouble(1) / 3)[:2] = [1.5, 2.5]
    ds.attrs.create("third", np.longdouble(1) / 3, dtype=np.longdouble)
    ds.attrs.create("some", values[:4], dtype=np.longdouble)
    f.attrs.create("seventh", np.longdouble(1) / 7, dtype=np.longdouble)


def complex_long_double(f: h5py.File) -> None:
    """Complex long doubles: thirds in both parts, NaN and an infinity in one; as a
    dataset with a fill value, and as attributes."""
    values = (np.arange(4, dtype=np.clongdouble) + 1j) / 3
    values[2] = np.clongdouble(complex(np.nan, -np.inf))
    ds = f.create_dataset("t", data=values, chunks=(2,), fillvalue=np.clongdouble(1j) / 7)
    ds.attrs.create("z", np.clongdouble(1 + 1j) / 3, dtype=np.clongdouble)
    ds.attrs.create("zs", values[:2], dtype=np.clongdouble)
    f.create_dataset("unset", shape=(3,), dtype=np.clongdouble, chunks=(2,), fillvalue=np.clongdouble(2 + 1j) / 3)[:1] = 1


def region_references(f: h5py.File) -> None:
    target = f.create_dataset("target", data=np.arange(10))
    refs = f.create_dataset("t", shape=(2,), dtype=h5py.regionref_dtype)
    refs[0], refs[1] = target.regionref[2:5], target.regionref[7:9]


def object_references(f: h5py.File) -> None:  # to a dataset, to a group, unset; chunked, a row never written
    target = f.create_dataset("target", data=np.arange(4))
    f.create_group("g")
    refs = f.create_dataset("t", shape=(4,), dtype=h5py.ref_dtype, chunks=(2,))
    refs[0], refs[1], refs[2] = target.ref, f["g"].ref, h5py.Reference()


def enums(f: h5py.File) -> None:  # its base integer, the mapping in hdf5_enum
    dt = h5py.enum_dtype({"OFF": 0, "ON": 1, "FAULT": 7}, basetype="u1")
    f.create_dataset("t", data=np.array([0, 1, 7, 1], "u1"), dtype=dt, chunks=(2,))


def region_reference_attribute(f: h5py.File) -> None:
    target = f.create_dataset("target", data=np.arange(10))
    target.attrs.create("r", target.regionref[1:3], dtype=h5py.regionref_dtype)


def compound_reference_attribute(f: h5py.File) -> None:
    """References inside attributes: a compound's member (one unset), a region reference
    member, one in a nested member, array members and array types of them."""
    target = f.create_dataset("target", data=np.arange(10))
    dt = np.dtype([("a", "<i4"), ("r", h5py.ref_dtype)])
    value = np.zeros(2, dt)
    value["a"], value["r"][0], value["r"][1] = [1, 2], target.ref, h5py.Reference()
    target.attrs.create("c", value, dtype=dt)
    region = np.zeros((), np.dtype([("a", "<i4"), ("r", h5py.regionref_dtype)]))
    region["r"] = target.regionref[2:5]
    target.attrs.create("region", region, dtype=region.dtype)
    nested = np.zeros((), np.dtype([("n", [("r", h5py.ref_dtype), ("d", "<f4")]), ("v", h5py.ref_dtype, (2,))]))
    nested["n"]["r"], nested["v"][0], nested["v"][1] = f.ref, target.ref, f.ref
    f.attrs.create("nested", nested, dtype=nested.dtype)
    refs = np.empty((2, 2), object)
    refs[...] = target.ref
    f.attrs.create("array", refs, dtype=np.dtype((h5py.ref_dtype, (2,))))
    seqs = np.empty(2, object)
    seqs[0], seqs[1] = np.array([target.ref, f.ref], dtype=h5py.ref_dtype), np.array([], dtype=h5py.ref_dtype)
    f.attrs.create("sequences", seqs, dtype=h5py.vlen_dtype(h5py.ref_dtype))


def _fixed_string(f: h5py.File, pad: int, values: list[bytes]) -> None:
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(6)
    tid.set_strpad(pad)
    ds = h5py.h5d.create(f.id, b"t", tid, h5py.h5s.create_simple((len(values),)))
    ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array(values, "S6"), mtype=tid)


def strings_space_padded(f: h5py.File) -> None:  # Fortran's strings: HDF5 reads them without the spaces
    _fixed_string(f, h5py.h5t.STR_SPACEPAD, [b"ab    ", b"abcdef"])


def strings_nul_terminated(f: h5py.File) -> None:  # C's: HDF5 reads up to the first NUL
    _fixed_string(f, h5py.h5t.STR_NULLTERM, [b"ab\x00xyz", b"abcde\x00"])


def null_scalar_and_empty(f: h5py.File) -> None:
    for kind, dtype in [("i", "i4"), ("f", "f8"), ("s", h5py.string_dtype()), ("b", "S3"),
                        ("c", np.dtype([("a", "i4")]))]:
        f.create_dataset(f"null_{kind}", data=h5py.Empty(dtype))
        f.create_dataset(f"scalar_{kind}", shape=(), dtype=dtype)
        f.create_dataset(f"empty_{kind}", shape=(0,), dtype=dtype)
        f.create_dataset(f"empty2_{kind}", shape=(3, 0), dtype=dtype, chunks=(2, 1), maxshape=(None, None))


def backslash_name(f: h5py.File) -> None:
    f.create_dataset("a\\b", data=np.arange(3))


def unfiltered_edge_chunks(f: h5py.File) -> None:
    """HDF5's "do not filter partial edge chunks" (H5Pset_chunk_opts, which h5py does not wrap)."""
    from layoutkit.hdf5.libhdf5 import DONT_FILTER_PARTIAL_CHUNKS, _libhdf5

    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((4,))
    dcpl.set_deflate(4)
    assert _libhdf5().H5Pset_chunk_opts(ctypes.c_int64(dcpl.id), ctypes.c_uint(DONT_FILTER_PARTIAL_CHUNKS)) >= 0
    h5py.h5d.create(f.id, b"t", h5py.h5t.STD_I32LE, h5py.h5s.create_simple((10,)), dcpl=dcpl)
    f["t"][...] = np.arange(10)


def shuffled_compound(f: h5py.File) -> None:
    dt = np.dtype([("a", "<i4"), ("b", "<f8")])
    f.create_dataset("t", data=np.array([(i, i / 2) for i in range(20)], dt), chunks=(5,), shuffle=True,
                     compression="gzip")


def vlen_sequences(f: h5py.File) -> None:
    values = np.empty(3, dtype=object)
    values[:] = [np.arange(2, dtype="i4"), np.arange(0, dtype="i4"), np.arange(3, dtype="i4")]
    f.create_dataset("vl", data=values, dtype=h5py.vlen_dtype("i4"))
    f.create_dataset("empty", shape=(2,), dtype=h5py.vlen_dtype("f8"))  # every sequence empty


def vlen_sequences_big_endian(f: h5py.File) -> None:
    """Sequences of a big-endian type, a dataset of them and a compound's member: h5py
    reads them as arrays labelled native that hold the big-endian bytes."""
    ds = f.create_dataset("t", shape=(3,), dtype=h5py.vlen_dtype(">f8"))
    ds[0], ds[2] = np.array([2.5, -1.0], ">f8"), np.array([0.0], ">f8")
    c = f.create_dataset("c", shape=(2,), dtype=np.dtype([("a", "<i4"), ("s", h5py.vlen_dtype(">i2"))]))
    c[0] = (1, np.array([258, -2, 0], ">i2"))
    seqs = np.empty(2, dtype=object)
    seqs[:] = [np.array([2.5, -1.0], ">f8"), np.array([3.0], ">f8")]
    ds.attrs.create("v", seqs, dtype=h5py.vlen_dtype(">f8"))


def vlen_sequences_of_strings(f: h5py.File) -> None:
    """Sequences of variable-length strings (h5py reads each as an array of bytes): text
    not ASCII, a quote, an empty string, an empty sequence, one unset; a scalar one."""
    ds = f.create_dataset("t", shape=(4,), dtype=h5py.vlen_dtype(h5py.string_dtype()), chunks=(2,))
    ds[0], ds[2] = np.array(["ab", "Zoë", 'q"uote'], dtype=object), np.array([""], dtype=object)
    f.create_dataset("one", shape=(), dtype=h5py.vlen_dtype(h5py.string_dtype()))[()] = np.array(["x", "yz"], dtype=object)


def vlen_sequence_scalar(f: h5py.File) -> None:  # its one chunk encoded by layoutkit (zarr-python fails on it)
    f.create_dataset("t", shape=(), dtype=h5py.vlen_dtype("<f8"))[()] = np.array([1.5, 2.5])
    f.create_dataset("e", shape=(), dtype=h5py.vlen_dtype("<i2"))[()] = np.array([], "<i2")  # the empty one
    f.create_dataset("unset", shape=(), dtype=h5py.vlen_dtype("u1"))


def vlen_sequences_of_text(f: h5py.File) -> None:  # of fixed-length bytes: each value its bytes (issue 65)
    ds = f.create_dataset("t", shape=(3,), dtype=h5py.vlen_dtype(np.dtype("S3")))
    ds[0], ds[1] = np.array([b"ab", b"xyz", b""], "S3"), np.array([b"a\x00b"], "S3")


def attributes_of_every_kind(f: h5py.File) -> None:
    ds = f.create_dataset("t", data=np.arange(3))
    a = ds.attrs
    a["i8"], a["u64"], a["f16"], a["c8"] = np.int8(-3), np.uint64(2**63), np.float16(1.5), np.complex64(1 + 2j)
    a["b"], a["arr2d"], a["empty"], a["fixed"] = np.bool_(True), np.arange(6).reshape(2, 3), h5py.Empty("f4"), b"abc"
    a["enum"] = np.array(1, dtype=h5py.enum_dtype({"A": 0, "B": 1}, basetype="u1"))
    a["compound"] = np.array((1, 2.0), dtype=[("a", "<i4"), ("b", "<f8")])
    a["strings"] = ["a", "bb"]
    a.create("opaque", np.void(b"\x01\x02\x03"))
    seqs = np.empty(2, dtype=object)
    seqs[:] = [np.arange(2, dtype="i4"), np.arange(3, dtype="i4")]
    a.create("vlen", seqs, dtype=h5py.vlen_dtype("i4"))


def committed_datatype(f: h5py.File) -> None:
    f["mytype"] = np.dtype("<f8")
    ds = f.create_dataset("t", data=np.arange(3.0), dtype=f["mytype"])
    ds.attrs.create("a", 1.5, dtype=f["mytype"])


def committed_datatype_with_attributes(f: h5py.File) -> None:
    f["mytype"] = np.dtype("<i2")
    f["mytype"].attrs["units"] = "counts"
    f.create_dataset("t", data=np.arange(3), dtype=f["mytype"])


def compound_fill_value(f: h5py.File) -> None:
    """A compound with a fill value and a ``_FillValue`` attribute (Zarr v2 put it in
    ``fill_value`` as a number: a traceback)."""
    dt = np.dtype([("a", "<i4"), ("b", "<f8")])
    ds = f.create_dataset("t", shape=(4,), dtype=dt, fillvalue=np.array((1, 2.5), dt))
    ds[:2] = np.array([(5, 6.0), (7, 8.0)], dt)
    ds.attrs.create("_FillValue", np.array((1, 2.5), dt))


def external_link(f: h5py.File) -> None:
    f["link"] = h5py.ExternalLink("missing.h5", "/x")
    f.create_dataset("t", data=np.arange(3))


def external_storage(f: h5py.File) -> None:
    """External raw storage: the values in two other files beside it, the first from an
    offset; a compound, big-endian, as HDF5 writes it (relative names, as h5py's docs)."""
    folder = Path(f.filename).parent
    dt = np.dtype([("a", ">i4"), ("b", ">f8")])
    values = np.array([(i, i / 4) for i in range(10)], dt)
    (folder / "t-0.bin").write_bytes(b"head" + values[:4].tobytes())
    (folder / "t-1.bin").write_bytes(values[4:].tobytes())
    f.create_dataset("t", shape=(10,), dtype=dt, external=[("t-0.bin", 4, 4 * dt.itemsize), ("t-1.bin", 0, 6 * dt.itemsize)])


def external_storage_missing(f: h5py.File) -> None:
    f.create_dataset("t", shape=(4,), dtype="<i4", external=[("gone.bin", 0, 16)])


def user_defined_link(f: h5py.File) -> None:
    """A link of a class registered by a plugin (H5Lregister, H5Lcreate_ud: not in h5py)."""
    from layoutkit.hdf5.libhdf5 import _libhdf5

    lib = _libhdf5()
    if not _UD_CLASS:
        _UD_CLASS.append(_LinkClass(1, 150, b"a plugin's link", None, None, None, _TRAVERSE(lambda *a: -1), None, None))
        assert lib.H5Lregister(ctypes.byref(_UD_CLASS[0])) >= 0
    f.create_dataset("t", data=np.arange(3))
    assert lib.H5Lcreate_ud(ctypes.c_int64(f.id.id), b"custom", ctypes.c_int(150), b"payload", ctypes.c_size_t(7),
                            ctypes.c_int64(0), ctypes.c_int64(0)) >= 0


_TRAVERSE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_int64, ctypes.c_int64)


class _LinkClass(ctypes.Structure):  # H5L_class_t, version 1
    _fields_ = [("version", ctypes.c_int), ("id", ctypes.c_int), ("comment", ctypes.c_char_p),
                ("create_func", ctypes.c_void_p), ("move_func", ctypes.c_void_p), ("copy_func", ctypes.c_void_p),
                ("trav_func", _TRAVERSE), ("del_func", ctypes.c_void_p), ("query_func", ctypes.c_void_p)]


_UD_CLASS: list[_LinkClass] = []  # registered once per process, kept alive


def damaged_object(f: h5py.File) -> None:
    f.create_dataset("good", data=np.arange(5))
    f.create_dataset("bad", data=np.arange(5))


def _damage(path: Path) -> None:
    """Break the object header of /bad (its version byte): HDF5 cannot open it."""
    with h5py.File(path, "r") as f:
        addr = h5py.h5o.get_info(f["bad"].id).addr
    with open(path, "r+b") as fh:
        fh.seek(addr)
        fh.write(b"\x07")


EQUAL = "equal"
# builder: what convert (both Zarr formats) and reorder must do: EQUAL, or the words the refusal must hold
CASES: dict[Callable[[h5py.File], None], tuple[str, str]] = {
    compound_big_endian: (EQUAL, EQUAL),
    compound_padded: (EQUAL, EQUAL),
    compound_nested_enum: (EQUAL, EQUAL),  # zarr-python writes nested structured types (issue 65)
    compound_array_member: (EQUAL, EQUAL),  # a field an element, v[0], v[1], ... (issue 65)
    compound_nested_array_member: (EQUAL, EQUAL),  # a field an element in the nested member, n/v (issue 65)
    compound_array_members_deep: (EQUAL, EQUAL),
    compound_vlen_string_member: (EQUAL, EQUAL),  # fixed-length UTF-8 at the longest value (issue 65)
    compound_text_array_member: (EQUAL, EQUAL),  # a field an element, each text (issue 65)
    compound_vlen_string_nested: (EQUAL, EQUAL),
    compound_nested_sequence_member: (EQUAL, EQUAL),  # its bytes and lengths in the nested member, n/v (issue 65)  # a nested text member at its longest too (issue 65)
    compound_vlen_sequence_member: (EQUAL, EQUAL),  # its bytes and its length, two fields (issue 65)
    compound_sequence_beside_its_length_name: (EQUAL, EQUAL),  # its lengths' field named apart, recorded (issue 65)
    compound_reference_member: (EQUAL, EQUAL),  # the paths they point at (issue 65)
    compound_nested_reference_member: (EQUAL, EQUAL),  # by their paths, n/r (issue 65)
    compound_region_member: (EQUAL, EQUAL),  # the regions' text, as a dataset of them (issue 65)
    compound_reference_array_member: (EQUAL, EQUAL),  # a field an element, each a path or a region's text
    array_of_ints: (EQUAL, EQUAL),  # the elements as a last axis (issue 65)
    virtual_dataset: (EQUAL, EQUAL),  # read through HDF5 from the files it maps (issue 65)
    virtual_dataset_unmapped: ("Dataset '/t' uses a virtual dataset (its mapped file gone.h5 is missing)",) * 2,
    array_of_arrays: (EQUAL, EQUAL),
    array_of_ints_chunked_shuffled: (EQUAL, EQUAL),
    array_scalar: (EQUAL, EQUAL),
    array_of_compounds: (EQUAL, EQUAL),
    array_of_strings: (EQUAL, EQUAL),
    array_of_compounds_of_text: (EQUAL, EQUAL),  # the elements a last axis, each compound as the rules store one
    array_of_text: (EQUAL, EQUAL),  # text, the elements a last axis (issue 65)
    long_double: (EQUAL, EQUAL),  # each value its text, which reads back as it (issue 65); attributes too
    complex_long_double: (EQUAL, EQUAL),  # each value the text of its two parts (issue 65)
    object_references: (EQUAL, EQUAL),  # the paths they point at
    enums: (EQUAL, EQUAL),
    region_references: (EQUAL, EQUAL),  # as their dataset's path and selection, JSON text (issue 65)
    region_reference_attribute: (EQUAL, EQUAL),
    compound_reference_attribute: (EQUAL, EQUAL),  # the paths in Zarr's JSON, made again by reorder (issue 65)
    strings_space_padded: (EQUAL, EQUAL),
    strings_nul_terminated: (EQUAL, EQUAL),
    null_scalar_and_empty: (EQUAL, EQUAL),
    backslash_name: (EQUAL, EQUAL),  # at its stored path, recorded in layoutkit.json (issue 65)
    unfiltered_edge_chunks: (EQUAL, EQUAL),
    shuffled_compound: (EQUAL, EQUAL),
    vlen_sequences: (EQUAL, EQUAL),  # each sequence its values' bytes (issue 65)
    vlen_sequences_of_text: (EQUAL, EQUAL),
    vlen_sequences_big_endian: (EQUAL, EQUAL),
    vlen_sequences_of_strings: (EQUAL, EQUAL),  # each the JSON text of its strings (issue 65)
    vlen_sequence_scalar: (EQUAL, EQUAL),  # as a sequence of one dimension: its values' bytes (issue 65)
    attributes_of_every_kind: (EQUAL, EQUAL),
    committed_datatype: (EQUAL, EQUAL),
    compound_fill_value: (EQUAL, EQUAL),
    committed_datatype_with_attributes: (EQUAL, EQUAL),  # recorded in layoutkit.json (issue 65)
    external_link: (EQUAL, EQUAL),
    external_storage: (EQUAL, EQUAL),  # read through HDF5 from its files, beside the source (issue 65)
    external_storage_missing: ("Dataset '/t' uses external raw storage (its file gone.bin is missing)",) * 2,
    damaged_object: ("Object '/bad' uses a damaged object header",) * 2,
    user_defined_link: ("Link '/custom' uses a user-defined link class (150",) * 2,
}
COMMANDS = {
    "convert-v3": ("convert", "--zarr-format", "3"),
    "convert-v2": ("convert", "--zarr-format", "2"),
    "convert-copy": ("convert", "--compressor", "source", "--chunks", "source"),
    "reorder": ("reorder", "--by", "group"),
}


def build(tmp_path: Path, builder: Callable[[h5py.File], None]) -> Path:
    path = tmp_path / f"{builder.__name__}.h5"
    with h5py.File(path, "w") as f:
        builder(f)
    if builder is damaged_object:
        _damage(path)
    return path


def _expected(builder: Callable[[h5py.File], None], command: str) -> str:
    return CASES[builder][1 if command == "reorder" else 0]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("builder", [pytest.param(b, id=b.__name__) for b in CASES])
def test_equal_or_refused_by_name(tmp_path: Path, builder: Callable[[h5py.File], None], command: str) -> None:
    src = build(tmp_path, builder)
    before = src.read_bytes()
    out = tmp_path / ("out.h5" if command == "reorder" else "out.zarr")
    result = CliRunner().invoke(app, [COMMANDS[command][0], str(src), str(out), *COMMANDS[command][1:]])
    expected = _expected(builder, command)
    said = " ".join(result.output.split())
    if expected == EQUAL:
        assert result.exit_code == 0, result.output
        check = CliRunner().invoke(app, ["verify", str(src), str(out), "--patterns", "open", "--repeat", "1"])
        assert check.exit_code == 0, check.output
    else:
        assert result.exit_code == 2, result.output
        assert expected in said and "Traceback" not in said
        assert said.count("error:") == 1
        assert not out.exists()
    assert src.read_bytes() == before  # never a touched source


TYPE_RULE_ATTRS = ("hdf5_enum", "hdf5_null_dataspace", "hdf5_reference", "hdf5_region_reference", "hdf5_text_members",
                   "hdf5_reference_members", "hdf5_region_members", "hdf5_sequence_members", "hdf5_sequence_lengths",
                   "hdf5_sequence", "hdf5_text_sequence", "hdf5_long_double", "hdf5_array_members", "hdf5_array_type")


@pytest.mark.parametrize("builder", [pytest.param(b, id=b.__name__) for b, (z, _) in CASES.items() if z == EQUAL])
def test_a_dry_run_says_each_array_s_stored_type_and_the_type_rules_it_is_written_with(
        tmp_path: Path, builder: Callable[[h5py.File], None], monkeypatch: pytest.MonkeyPatch) -> None:
    """What a dry run plans is what the store holds: each array's Zarr data type (a
    compound's stored type, its text members at their longest, its array members a field
    an element), and every attribute by which the type rules say how a type is stored
    (``hdf5_sequence=<f8``...), no more, no fewer; the CLI's table names them."""
    import layoutkit

    src = build(tmp_path, builder)
    out = tmp_path / "out.zarr"
    planned = layoutkit.convert(src, out, dry_run=True)
    assert not out.exists()
    layoutkit.convert(src, out)
    store = zarr.open_group(out, mode="r")
    for a in planned.plan.arrays:
        stored = store[a.path.lstrip("/")]
        if a.numpy_dtype is not None:
            assert a.numpy_dtype.newbyteorder("<") == stored.dtype.newbyteorder("<"), (a.path, a.dtype, stored.dtype)
        written = {k: v for k, v in stored.attrs.items() if k in TYPE_RULE_ATTRS}
        assert {k: v for k, v in a.type_attrs.items()} == written, a.path
    from layoutkit.cli.core import out as printed

    monkeypatch.setattr(printed, "width", 250)  # a row a line, as a wide terminal shows it
    dry = CliRunner().invoke(app, ["convert", str(src), str(tmp_path / "again.zarr"), "--dry-run", "--detail"])
    assert dry.exit_code == 0, dry.output
    for a in planned.plan.arrays:
        assert all(name in dry.output for name in a.type_attrs), (a.path, dry.output)
    assert ("type rules" in dry.output) == any(a.type_attrs for a in planned.plan.arrays)
    # inspect counts the same arrays, by their rule, and says where to see them
    from layoutkit.inspect import inspect_path

    ruled = [a for a in planned.plan.arrays if set(a.type_attrs) - {"hdf5_null_dataspace"}]  # (a dataspace: no type)
    report = inspect_path(src)
    assert sum(report.type_rules.values()) == len(ruled), (report.type_rules, [a.path for a in ruled])
    said = " ".join(CliRunner().invoke(app, ["inspect", str(src)]).output.split())
    assert ("--dry-run --detail` shows each array's stored type" in said) == bool(ruled), said
    # and of the stores, from the attributes that name each rule (v2: its consolidated metadata)
    layoutkit.convert(src, tmp_path / "v2.zarr", zarr_format=2)
    for store in (out, tmp_path / "v2.zarr"):
        assert inspect_path(store).type_rules == report.type_rules, store.name
        said = " ".join(CliRunner().invoke(app, ["inspect", str(store)]).output.split())
        assert ("stored by the type rules" in said and "engine=\"layoutkit\"" in said) == bool(ruled), said


SKIPPABLE = [pytest.param(b, c, id=f"{b.__name__}-{c}") for b in CASES for c in ("convert", "reorder")
             if CASES[b][c == "reorder"] != EQUAL]


@pytest.mark.parametrize(("builder", "command"), SKIPPABLE)
def test_skip_unsupported_leaves_it_out_and_lists_it(tmp_path: Path, builder: Callable[[h5py.File], None],
                                                     command: str) -> None:
    src = build(tmp_path, builder)
    out = tmp_path / ("out.zarr" if command == "convert" else "out.h5")
    by = ["--by", "group"] if command == "reorder" else []
    result = CliRunner().invoke(app, [command, str(src), str(out), *by, "--skip-unsupported"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    name = CASES[builder][command == "reorder"].split(" uses ")[0].split()[-1]  # the object, or the attribute's
    assert name.strip("'") in said and ("skipped" in said or "left out" in said)
    check = CliRunner().invoke(app, ["verify", str(src), str(out), "--patterns", "list", "--repeat", "1"])
    assert "the 1 variant holds exactly the data" in " ".join(check.output.split()), check.output
    # the damaged source itself cannot be listed whole by the read pattern (exit 3: a pattern failed)
    assert check.exit_code == (3 if builder is damaged_object else 0), check.output


def test_reorder_keeps_committed_datatypes_and_verify_checks_them(tmp_path: Path) -> None:
    src = build(tmp_path, committed_datatype_with_attributes)
    out = tmp_path / "out.h5"
    assert CliRunner().invoke(app, ["reorder", str(src), str(out), "--by", "group"]).exit_code == 0
    with h5py.File(out, "r") as f:
        assert isinstance(f["mytype"], h5py.Datatype) and f["mytype"].attrs["units"] == "counts"
        tid = f["t"].id.get_type()
        assert tid.committed() and h5py.h5o.get_info(tid).addr == h5py.h5o.get_info(f["mytype"].id).addr
    # a copy whose dataset has the type itself, not the committed one: its named type is gone
    plain = tmp_path / "plain.h5"
    with h5py.File(src, "r") as f, h5py.File(plain, "w") as g:
        g.create_dataset("t", data=f["t"][...])
    check = CliRunner().invoke(app, ["verify", str(src), str(plain), "--patterns", "open", "--repeat", "1"])
    said = " ".join(check.output.split())
    assert check.exit_code == 1, check.output
    assert "/mytype: missing: committed datatype not in the variant" in said
    assert "/t: dtype: not of the committed datatype /mytype" in said


def test_convert_says_a_committed_datatype_is_left_out_and_records_it(tmp_path: Path) -> None:
    """netCDF-4 keeps enum types as committed datatypes: Zarr has no named types, so
    the type object is left out (its arrays keep the type), and the run says so; the type
    and its attributes are recorded in layoutkit.json (in an Icechunk repository, in the
    provenance attribute), where verify holds them against the source's."""
    import json

    src = build(tmp_path, committed_datatype_with_attributes)
    for name, args in (("out.zarr", []), ("out.icechunk", ["--layout", "virtual"])):
        result = CliRunner().invoke(app, ["convert", str(src), str(tmp_path / name), *args])
        assert result.exit_code == 0, result.output
        said = " ".join(result.output.split())
        assert "note: left out /mytype: a committed datatype" in said and "with its attributes" in said, said
    both = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "out.zarr"), str(tmp_path / "out.icechunk"),
                                    "--patterns", "open", "--repeat", "1"])
    assert both.exit_code == 0, both.output  # each holds the record verify asks for
    recorded = json.loads((tmp_path / "out.zarr" / "layoutkit.json").read_text())["datatypes"]["/mytype"]
    with h5py.File(src) as f:
        assert recorded["type"] == str(f["mytype"].dtype) and set(recorded["attributes"]) == set(f["mytype"].attrs)
    doc = tmp_path / "out.zarr" / "layoutkit.json"
    changed = json.loads(doc.read_text())
    key = next(iter(changed["datatypes"]["/mytype"]["attributes"]))
    changed["datatypes"]["/mytype"]["attributes"][key] = "not the source's"
    doc.write_text(json.dumps(changed))
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "out.zarr"), "--patterns", "open",
                                     "--repeat", "1"])
    assert check.exit_code == 1 and f"/mytype: attribute: {key!r}" in " ".join(check.output.split()), check.output


def test_strings_hold_what_hdf5_reads(tmp_path: Path) -> None:
    for builder in (strings_space_padded, strings_nul_terminated):
        src = build(tmp_path, builder)
        with h5py.File(src, "r") as f:
            want = f["t"][...]
        assert list(want) in ([b"ab", b"abcdef"], [b"ab", b"abcde"])
        out = tmp_path / f"{builder.__name__}.zarr"
        assert CliRunner().invoke(app, ["convert", str(src), str(out)]).exit_code == 0
        assert list(zarr.open_array(out / "t", mode="r")[...]) == list(want)
        h5 = tmp_path / f"{builder.__name__}-r.h5"
        assert CliRunner().invoke(app, ["reorder", str(src), str(h5), "--by", "group"]).exit_code == 0
        with h5py.File(h5, "r") as f, h5py.File(src, "r") as g:
            assert list(f["t"][...]) == list(want)
            assert f["t"].id.get_type().get_strpad() == g["t"].id.get_type().get_strpad()


def test_verify_finds_a_padded_string_stored_with_its_padding(tmp_path: Path) -> None:
    """What convert wrote before: the stored bytes, spaces and all. HDF5 reads "ab"."""
    src = build(tmp_path, strings_space_padded)
    out = tmp_path / "o.zarr"
    assert CliRunner().invoke(app, ["convert", str(src), str(out)]).exit_code == 0
    zarr.open_array(out / "t", mode="r+")[...] = np.array([b"ab    ", b"abcdef"], "S6")
    check = CliRunner().invoke(app, ["verify", str(src), str(out), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1, check.output
    assert "/t: values: first difference at index (0,)" in check.output


EVERY_VARIANT = {"v3.zarr": ["convert"], "v2.zarr": ["convert", "--zarr-format", "2"],
                 "virtual.icechunk": ["convert", "--layout", "virtual"], "paged.h5": ["reorder", "--by", "group"]}
"""A variant of each kind: Zarr v3 and v2, the virtual layout and the paged HDF5 file."""


def write_and_prove(src: Path, tmp_path: Path, runs: dict[str, list[str]]) -> None:
    """Each variant written under ``tmp_path`` by its command (``{name: [command, *args]}``),
    each exiting 0, and verify proving all of them equal to ``src``."""
    for name, (command, *args) in runs.items():
        result = CliRunner().invoke(app, [command, str(src), str(tmp_path / name), *args])
        assert result.exit_code == 0, (name, result.output)
    check = CliRunner().invoke(app, ["verify", str(src), *(str(tmp_path / n) for n in runs), "--patterns", "open",
                                     "--repeat", "1"])
    assert check.exit_code == 0 and f"all {len(runs)} variants hold" in " ".join(check.output.split()), check.output


def test_a_sequence_member_is_stored_as_its_bytes_and_length_and_verify_holds_both(tmp_path: Path) -> None:
    """The type rules' encoding of a sequence member, read with zarr-python alone (an
    independent reader needs nothing else): ``S<n>`` of the values' bytes beside a
    ``<name>.length`` field. A length changed in the store (the values' bytes kept: a
    sequence ending in zeros one value shorter) and a value changed are each caught."""
    src = tmp_path / "seq.h5"
    with h5py.File(src, "w") as f:
        compound_vlen_sequence_member(f)
    write_and_prove(src, tmp_path, {"v3.zarr": ["convert"], "v2.zarr": ["convert", "--zarr-format", "2"]})
    z = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r+")
    assert z.attrs["hdf5_sequence_members"] == {"u": "|u1", "x": "<f8", "s": "|S2"}
    stored = z[...]
    assert stored.dtype.names == ("a", "u", "u.length", "x", "x.length", "s", "s.length")
    assert stored["u.length"].tolist() == [3, 0, 1, 0] and stored["u"][0] == b"\x01"  # NumPy drops the zeros
    assert np.frombuffer(stored["x"][0], "<f8").tolist()[:2] == [0.0, 2.5]
    for field, value in (("u.length", 2), ("x", np.array([0.0, 3.5], "<f8").tobytes())):
        changed = stored.copy()
        changed[field][0] = value
        z[...] = changed
        check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open",
                                         "--repeat", "1"])
        assert check.exit_code == 1 and "/t: values: first difference at index (0,)" in " ".join(check.output.split())
    z[...] = stored
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 0, check.output


def test_a_sequence_members_lengths_field_is_named_apart_from_the_members(tmp_path: Path) -> None:
    """A compound with members named ``s.length`` and ``s.length.1`` beside the sequence
    member ``s``: its lengths are in ``s.length.2``, which ``hdf5_sequence_lengths``
    records; a length changed there is found, a member's value kept in its own field."""
    src = build(tmp_path, compound_sequence_beside_its_length_name)
    write_and_prove(src, tmp_path, {"v3.zarr": ["convert"], "v2.zarr": ["convert", "--zarr-format", "2"]})
    z = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r+")
    assert z.attrs["hdf5_sequence_lengths"] == {"s": "s.length.2"}
    stored = z[...]
    assert stored["s.length.2"].tolist() == [2, 0] and stored["s.length"].tolist() == [5, 6]
    changed = stored.copy()
    changed["s.length.2"][0] = 1
    z[...] = changed
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1 and "/t: values: first difference at index (0,)" in " ".join(check.output.split())


def test_a_sequence_member_inside_a_nested_member_is_stored_there_and_read_back_from_every_variant(
        tmp_path: Path) -> None:
    """A sequence member two members deep (``n/m/q``), one beside a member named as its
    lengths' field (``n/v``): each stored in its own compound as its bytes and lengths,
    ``hdf5_sequence_members`` and ``hdf5_sequence_lengths`` naming them by path (what
    zarr-python alone shows); every variant proven equal and read back by
    ``layoutkit.open`` as h5py reads the source; a nested length changed is found."""
    import layoutkit

    src = build(tmp_path, compound_nested_sequence_member)
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    z = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r+")
    assert z.attrs["hdf5_sequence_members"] == {"n/v": "<f8", "n/m/q": "<i2"}
    assert z.attrs["hdf5_sequence_lengths"] == {"n/v": "v.length.1"}
    stored = z[...]
    assert stored.dtype["n"].names == ("v", "v.length.1", "v.length", "m")
    assert stored.dtype["n"]["m"].names == ("q", "q.length", "k")
    assert stored["n"]["m"]["q.length"].tolist() == [3, 1, 0] and stored["n"]["v.length"].tolist() == [7, 8, 0]
    with h5py.File(src) as f:
        want = f["t"][...]
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            got = archive.get("/t")
        for row in range(3):
            for path in ("n/v", "n/m/q"):
                *parents, leaf = path.split("/")
                held, expected = got[row], want[row]
                for part in parents:
                    held, expected = held[part], expected[part]
                np.testing.assert_array_equal(held[leaf], expected[leaf] if expected[leaf] is not None else [],
                                              err_msg=f"{where.name} {path} {row}")
            assert got[row]["n"]["m"]["k"] == want[row]["n"]["m"]["k"] and got[row]["a"] == want[row]["a"]
    changed = stored.copy()
    changed["n"]["m"]["q.length"][0] = 2
    z[...] = changed
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1 and "/t: values: first difference at index (0,)" in " ".join(check.output.split())


def test_an_array_type_of_compounds_holding_text_is_stored_as_the_rules_store_the_compound(tmp_path: Path) -> None:
    """An HDF5 array type of compounds with a text member, an array member and text in a
    nested member: the elements a last axis (``t_element``), each compound as the type
    rules store one (text at its longest UTF-8, the array a field an element), what
    zarr-python alone shows; every variant proven equal and read back by
    ``layoutkit.open`` and the engine as h5py reads the source; an element changed is found."""
    import xarray as xr

    import layoutkit

    src = build(tmp_path, array_of_compounds_of_text)
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    z = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r+")
    assert z.shape == (3, 2) and z.metadata.dimension_names == ("phony_dim_0", "t_element")
    assert z.dtype.names == ("a", "s", "v[0]", "v[1]", "n") and z.dtype["s"] == np.dtype("S6")
    assert z.attrs["hdf5_text_members"] == ["s", "n/u"] and z.attrs["hdf5_array_members"] == {"v": [2]}
    stored = z[...]
    assert stored[1, 0]["s"].decode() == "Zoë's" and stored[0, 1]["v[1]"] == 3.5
    with h5py.File(src) as f:
        want = f["t"][...]
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            got = archive.get("/t")
        assert got.shape == want.shape, where
        for field in ("a", "s", "v"):
            np.testing.assert_array_equal(got[field].astype(want[field].dtype if field != "s" else "S6"),
                                          want[field].astype("S6") if field == "s" else want[field], err_msg=str(where))
        assert [bytes(v) for v in got["n"]["u"].reshape(-1)] == [bytes(v) for v in want["n"]["u"].reshape(-1)], where
    engine = xr.open_dataset(tmp_path / "v3.zarr", engine="layoutkit")["t"]
    assert engine.dims == ("dim_0", "t_element") and engine.values[1, 0]["n"]["u"] == b"deep"
    changed = stored.copy()
    changed[1, 1]["n"]["k"] = 99
    z[...] = changed
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1 and "/t: values: first difference at index (1, 1)" in " ".join(check.output.split()), \
        check.output


def test_references_inside_attributes_are_what_they_point_at_in_every_variant(tmp_path: Path) -> None:
    """References inside an attribute's compound or array type: in Zarr's JSON the paths
    (a region's selection as text), an array type's a list per axis; in reorder's file
    made again to its own objects. ``layoutkit.open`` gives the paths from each, and a
    reference pointing elsewhere is found in either."""
    import layoutkit

    src = build(tmp_path, compound_reference_attribute)
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    root = zarr.open_group(tmp_path / "v3.zarr", mode="r+")
    assert root["target"].attrs["c"] == [{"a": 1, "r": "/target"}, {"a": 2, "r": None}]
    assert root.attrs["nested"] == {"n": {"r": "/", "d": 0.0}, "v": ["/target", "/"]}
    assert root.attrs["array"] == [["/target", "/target"], ["/target", "/target"]]
    assert root.attrs["sequences"] == [["/target", "/"], []]
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            assert archive.variable("/target").attrs["c"][0]["r"] == "/target", where
            assert archive.group_attrs("/")["nested"]["v"] == ["/target", "/"], where
    with h5py.File(tmp_path / "paged.h5", "r+") as f:  # the paged file's own objects
        c = f["target"].attrs["c"]
        assert f[c["r"][0]].name == "/target" and f[c["r"][0]] == f["target"]
        c["r"][0] = f.ref  # now pointing at the root
        f["target"].attrs.create("c", c, dtype=c.dtype)
    root["target"].attrs["c"] = [{"a": 1, "r": "/"}, {"a": 2, "r": None}]
    for name in ("paged.h5", "v3.zarr"):
        check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / name), "--patterns", "open", "--repeat", "1"])
        assert check.exit_code == 1 and "/target: attribute: 'c' is" in " ".join(check.output.split()), check.output


def test_a_scalar_sequence_is_its_values_bytes_in_every_variant(tmp_path: Path) -> None:
    """A sequence as a scalar dataset, which zarr-python cannot encode (numcodecs'
    ``VLenBytes`` fails on a 0-d array): layoutkit stores its one chunk itself, the bytes
    zarr-python reads back as the values' bytes in both formats and in the virtual layout
    (and reorder's HDF5 file); ``layoutkit.open`` and the engine give the values; a value changed in a store is found."""
    import numcodecs
    import xarray as xr

    import layoutkit

    src = build(tmp_path, vlen_sequence_scalar)
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    for name in ("v3.zarr", "v2.zarr"):
        stored = zarr.open_array(tmp_path / name, path="t", mode="r")
        assert stored.shape == () and stored.attrs["hdf5_sequence"] == "<f8"
        raw = np.asarray(stored[()]).item()  # zarr-python gives a 0-d array of the object
        assert np.frombuffer(raw, "<f8").tolist() == [1.5, 2.5]  # the type rules, read by numpy alone
        assert np.asarray(zarr.open_array(tmp_path / name, path="e", mode="r")[()]).item() == b""
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            t, e, unset = (archive.get(p)[()] for p in ("/t", "/e", "/unset"))  # a 0-d array of the sequence
        assert t.tolist() == [1.5, 2.5] and e.dtype == np.dtype("<i2") and e.size == 0 and unset.size == 0, where
    with xr.open_dataset(tmp_path / "v3.zarr", engine="layoutkit") as ds:
        assert ds["t"].shape == () and ds["t"].values[()].tolist() == [1.5, 2.5]
    changed = numcodecs.VLenBytes().encode(np.array([np.array([1.5, 3.5]).tobytes()], dtype=object))
    (tmp_path / "v2.zarr" / "t" / "0").write_bytes(numcodecs.Zstd(level=3).encode(changed))
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v2.zarr"), "--patterns", "open",
                                     "--repeat", "1"])
    assert check.exit_code == 1 and "/t: values" in " ".join(check.output.split()), check.output


def test_an_array_type_of_text_reads_back_as_text_from_every_variant(tmp_path: Path) -> None:
    """An array type of variable-length strings is stored as text, its elements the last
    axis (``t_element``): zarr-python reads the text itself, and layoutkit.open and the
    xarray engine give the same text from the source and every variant (h5py gives the
    source's as bytes)."""
    import xarray as xr

    import layoutkit

    src = tmp_path / "text.h5"
    with h5py.File(src, "w") as f:
        array_of_text(f)
    runs = EVERY_VARIANT
    write_and_prove(src, tmp_path, runs)
    want = [["ab", "Zoë"], ["", "µs and more"], ["", ""]]
    stored = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r")
    assert stored.shape == (3, 2) and stored.attrs["hdf5_array_type"] == 1 and stored[...].tolist() == want
    assert stored.metadata.dimension_names == ("phony_dim_0", "t_element")
    for where in (src, *(tmp_path / n for n in runs)):
        with layoutkit.open(where) as archive:
            assert archive.get("/t").tolist() == want and archive.get("/one").tolist() == ["x", "yz"], where
            assert archive.get("/t", (slice(1, 2), slice(1, 2))).tolist() == [["µs and more"]], where
        ds = xr.open_dataset(where, engine="layoutkit")
        assert ds["t"].values.tolist() == want and ds["t"].dims[-1] == "t_element", where


def test_sequences_of_strings_are_json_text_and_read_back_as_text_from_every_variant(tmp_path: Path) -> None:
    """Each sequence of variable-length strings is stored as the JSON text of its strings
    (the empty sequence as the empty text): zarr-python and json alone read them; and
    layoutkit.open and the engine give each as an array of text from the source (h5py
    gives bytes) and every variant, a scalar one too."""
    import json

    import xarray as xr

    import layoutkit

    src = tmp_path / "strings.h5"
    with h5py.File(src, "w") as f:
        vlen_sequences_of_strings(f)
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    want = [["ab", "Zoë", 'q"uote'], [], [""], []]
    stored = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r")
    assert stored.attrs["hdf5_text_sequence"] == "json"
    assert [json.loads(t) if t else [] for t in stored[...].tolist()] == want
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            assert [list(s) for s in archive.get("/t")] == want, where
            assert list(archive.get("/one")[()]) == ["x", "yz"], where
        ds = xr.open_dataset(where, engine="layoutkit")
        assert [list(s) for s in ds["t"].values] == want and list(ds["one"].values[()]) == ["x", "yz"], where


def test_reference_members_are_the_paths_they_point_at_in_every_variant(tmp_path: Path) -> None:
    """Object references in a compound member are stored as the UTF-8 of the paths they
    point at (an unset one, and a row never written, the empty path): zarr-python reads
    the bytes, layoutkit.open and the engine give the paths from the source and every
    variant, the paged file's references point at its own objects of those paths, and a
    path changed in the store is found."""
    import xarray as xr

    import layoutkit

    src = tmp_path / "refs.h5"
    with h5py.File(src, "w") as f:
        compound_reference_member(f)
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    want = [(1, "/target"), (2, "/grüppe/inner"), (3, ""), (0, "")]
    stored = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r+")
    assert stored.attrs["hdf5_reference_members"] == ["r"]
    assert [(int(a), bytes(r).decode()) for a, r in stored[...].tolist()] == want
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            assert archive.get("/t").tolist() == want, where
        assert xr.open_dataset(where, engine="layoutkit")["t"].values.tolist() == want, where
    with h5py.File(tmp_path / "paged.h5") as g:
        assert [g[r].name if r else "" for r in g["t"]["r"]] == [p for _, p in want]
    changed = stored[...]
    changed["r"][0] = "/grüppe/inner".encode()[: changed.dtype["r"].itemsize]
    stored[...] = changed
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1 and "/t: values: first difference at index (0,)" in " ".join(check.output.split())


def test_nested_reference_members_are_paths_at_their_depth_in_every_variant(tmp_path: Path) -> None:
    """References inside nested members (``n/r``, ``n/m/q``) are stored as the paths
    they point at in their place, listed by path; read back as the paths from every
    variant, the paged file's pointing at its own objects, a changed one found."""
    import layoutkit

    src = build(tmp_path, compound_nested_reference_member)
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    stored = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r+")
    assert stored.attrs["hdf5_reference_members"] == ["n/r", "n/m/q"]
    values = stored[...]
    assert [bytes(v).decode() for v in values["n"]["m"]["q"]] == ["/", "/x"]  # zarr-python and numpy alone
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            got = archive.get("/t")
        assert got["n"]["r"].tolist() == ["/x", ""] and got["n"]["m"]["q"].tolist() == ["/", "/x"], where
    with h5py.File(tmp_path / "paged.h5") as g:
        assert g[g["t"][0]["n"]["r"]] == g["x"] and g[g["t"][1]["n"]["m"]["q"]] == g["x"]
    values["n"]["m"]["q"][1] = b"/"
    stored[...] = values
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1 and "/t: values: first difference at index (1,)" in " ".join(check.output.split())


def test_region_members_are_their_text_in_every_variant(tmp_path: Path) -> None:
    """Region references in a compound's members are stored as the UTF-8 of their text
    (the dataset's path and the selection, JSON), listed in ``hdf5_region_members``;
    read back as that text from every variant, the paged file's selecting the same
    elements of its own dataset; a changed selection is found."""
    import json

    import layoutkit

    src = build(tmp_path, compound_region_member)
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    stored = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r+")
    assert stored.attrs["hdf5_region_members"] == ["r", "n/q"]
    values = stored[...]
    first = json.loads(bytes(values["r"][0]).decode())  # zarr-python and json alone
    assert first == {"path": "/x", "blocks": [[[1, 2], [2, 3]]]} and bytes(values["r"][2]) == b""
    assert json.loads(bytes(values["n"]["q"][0]).decode()) == {"path": "/x", "points": [[0, 1], [3, 4]]}
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            got = archive.get("/t")
        assert json.loads(got["r"][0]) == first and got["r"][2] == "" and got["n"]["q"][2] == "", where
    with h5py.File(tmp_path / "paged.h5") as g:
        t = g["t"][()]
        assert g[t["r"][0]] == g["x"] and g["x"][t["r"][0]].tolist() == [[7, 8], [12, 13]]
        assert g["x"][t["n"]["q"][0]].tolist() == [1, 19]
    values["r"][0] = json.dumps({"path": "/x", "blocks": [[[1, 2], [2, 4]]]}).encode()[: values.dtype["r"].itemsize]
    stored[...] = values
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1 and "/t: values: first difference at index (0,)" in " ".join(check.output.split())


def test_array_members_of_references_are_a_path_an_element_in_every_variant(tmp_path: Path) -> None:
    """An array member of references is a field an element (``r[0]``, ``r[1]``), each the
    UTF-8 of its path (of a region: its text); read back as arrays of paths from every
    variant, the paged file's pointing at its own objects; a changed element is found."""
    import layoutkit

    src = build(tmp_path, compound_reference_array_member)
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    stored = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r+")
    attrs = stored.attrs
    assert attrs["hdf5_reference_members"] == ["r", "n/q"] and attrs["hdf5_region_members"] == ["g"]
    assert attrs["hdf5_array_members"] == {"r": [2], "g": [2], "n/q": [3]}
    values = stored[...]
    assert [bytes(values[f"r[{i}]"][0]).decode() for i in range(2)] == ["/x", "/"]  # zarr-python alone
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            got = archive.get("/t")
        assert got["r"].tolist() == [["/x", "/"], ["/x", ""]] and got["n"]["q"][1].tolist() == ["/", "/x", "/"], where
        assert got["g"][1][0].startswith('{"path":"/x"') and got["g"][0][1] == "", where
    with h5py.File(tmp_path / "paged.h5") as g:
        row = g["t"][1]
        assert g[row["r"][0]] == g["x"] and g["x"][row["g"][0]].tolist() == [1, 2, 3]
    values["r[1]"][1] = b"/x"
    stored[...] = values
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1 and "/t: values: first difference at index (1,)" in " ".join(check.output.split())


def test_long_doubles_are_text_that_reads_back_exactly_in_every_variant(tmp_path: Path) -> None:
    """Long doubles (64-bit mantissas: a third has digits a float64 drops) are stored as
    the text that reads back as each value: NumPy alone reads them back exactly from the
    store, layoutkit.open and the engine give the source's values (and type) from every
    variant, the fill value too; a value changed in the last digit is found. Attributes
    of them so too: their text in the store, ``hdf5_long_double_attributes`` naming them,
    the source's long doubles from every variant, a changed one found."""
    import xarray as xr

    import layoutkit

    src = tmp_path / "ld.h5"
    with h5py.File(src, "w") as f:
        long_double(f)
        want, want_c = f["t"][()], f["c"][()]
        want_attrs, want_root = dict(f["t"].attrs), f.attrs["seventh"]
    assert want[4] != np.longdouble(float(want[4]))  # more than a float64 holds
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    stored = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r+")
    assert stored.attrs["hdf5_long_double"] == want.dtype.str
    text = stored[...].tolist()
    assert np.array_equal(np.array(text, dtype=object).astype(want.dtype), want, equal_nan=True)
    assert np.longdouble(zarr.open_array(tmp_path / "v3.zarr", path="c").fill_value) == want_c[-1]
    assert stored.attrs["hdf5_long_double_attributes"] == {"third": want.dtype.str, "some": want.dtype.str}
    assert np.longdouble(stored.attrs["third"]) == want_attrs["third"]  # NumPy alone reads the text back
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            got = archive.get("/t")
            assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), where
            assert np.array_equal(archive.get("/c"), want_c), where
            attrs, root = archive.variable("/t").attrs, archive.group_attrs("/")
        assert attrs["third"].dtype == want.dtype and attrs["third"] == want_attrs["third"], where
        assert np.array_equal(attrs["some"], want_attrs["some"], equal_nan=True), where
        assert root["seventh"] == want_root and "hdf5_long_double_attributes" not in attrs, where
        assert np.array_equal(xr.open_dataset(where, engine="layoutkit")["t"].values, want, equal_nan=True), where
    text[4] = text[4][:-5] + ("5" if text[4][-5] != "5" else "6") + text[4][-4:]  # the last digit of 4/3
    stored[...] = np.array(text, dtype=object)
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1 and "/t: values: first difference at index (4,)" in " ".join(check.output.split())
    third = stored.attrs["third"]
    stored.attrs["third"] = third[:-5] + ("5" if third[-5] != "5" else "6") + third[-4:]
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1 and "/t: attribute: 'third' is" in " ".join(check.output.split()), check.output


def test_complex_long_doubles_are_the_text_of_their_parts_in_every_variant(tmp_path: Path) -> None:
    """Complex long doubles are stored as text, each value its real and imaginary parts'
    text with a space between (``hdf5_long_double: "<c32"``), attributes so too; NumPy
    alone reads them back exactly, layoutkit.open gives the source's values, fill value
    and attributes from every variant; a changed digit of an imaginary part is found."""
    import layoutkit

    src = build(tmp_path, complex_long_double)
    with h5py.File(src) as f:
        want, want_unset, want_z = f["t"][()], f["unset"][()], f["t"].attrs["z"]
    write_and_prove(src, tmp_path, EVERY_VARIANT)
    stored = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r+")
    assert stored.attrs["hdf5_long_double"] == "<c32" and stored.attrs["hdf5_long_double_attributes"]["z"] == "<c32"
    text = stored[...].tolist()
    real, imag = (np.array([t.split(" ")[k] for t in text], dtype=object).astype(np.longdouble) for k in (0, 1))
    assert np.array_equal(real, want.real, equal_nan=True) and np.array_equal(imag, want.imag, equal_nan=True)
    for where in (src, *(tmp_path / n for n in EVERY_VARIANT)):
        with layoutkit.open(where) as archive:
            got, unset, z = archive.get("/t"), archive.get("/unset"), archive.variable("/t").attrs["z"]
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), where
        assert np.array_equal(unset, want_unset) and z == want_z, where
    text[1] = text[1][:-1] + ("5" if text[1][-1] != "5" else "6")  # the last digit of the imaginary part's exponent
    stored[...] = np.array(text, dtype=object)
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open", "--repeat", "1"])
    assert check.exit_code == 1 and "/t: values: first difference at index (1,)" in " ".join(check.output.split())


def test_verify_follows_each_reference_of_a_paged_file(tmp_path: Path) -> None:
    """The HDF5 proof read a dataset of object references in a paged file and compared
    none of them: a reference pointing at another dataset than the source's was equal.
    It compares the paths they point at now."""
    src, out = tmp_path / "refs.h5", tmp_path / "paged.h5"
    with h5py.File(src, "w") as f:
        refs = f.create_dataset("r", shape=(3,), dtype=h5py.ref_dtype)
        refs[0], refs[1] = f.create_dataset("a", data=np.arange(3)).ref, f.create_dataset("b", data=np.arange(4)).ref
    assert CliRunner().invoke(app, ["reorder", str(src), str(out), "--by", "group"]).exit_code == 0
    verify = ["verify", str(src), str(out), "--patterns", "open", "--repeat", "1"]
    assert CliRunner().invoke(app, verify).exit_code == 0
    with h5py.File(out, "r+") as g:
        g["r"][0] = g["b"].ref
    check = CliRunner().invoke(app, verify)
    assert check.exit_code == 1 and "/r: values: first difference at index (0,)" in " ".join(check.output.split())


def test_big_endian_sequences_keep_their_values_in_every_variant(tmp_path: Path) -> None:
    """h5py labels the arrays of a big-endian sequence type native-endian, holding the
    big-endian bytes: read so, [2.5, -1.0] looked like [5.4e-321, ...]. ``reorder`` wrote
    those wrong values into its file (h5py converting them to big-endian again) and verify,
    reading both through h5py alike, called them equal. layoutkit reads them with the
    type's byte order: the values written, from the source and every variant, and the
    paged file holds the source's bytes; an attribute of such sequences too."""
    import layoutkit

    src = tmp_path / "be.h5"
    with h5py.File(src, "w") as f:
        vlen_sequences_big_endian(f)
    write_and_prove(src, tmp_path, {"v3.zarr": ["convert"], "paged.h5": ["reorder", "--by", "group"]})
    stored = zarr.open_array(tmp_path / "v3.zarr", path="t", mode="r")
    assert stored.attrs["hdf5_sequence"] == ">f8"
    assert np.frombuffer(stored[...][0], ">f8").tolist() == [2.5, -1.0]  # the type rules, read by numpy alone
    assert stored.attrs["v"] == [[2.5, -1.0], [3.0]]  # an attribute of them: JSON numbers
    with h5py.File(src) as f, h5py.File(tmp_path / "paged.h5") as g:  # h5py's bytes, however labelled
        assert [v.tobytes() for v in f["t"][()]] == [v.tobytes() for v in g["t"][()]]
        assert [v.tobytes() for v in f["c"]["s"]] == [v.tobytes() for v in g["c"]["s"]]
        assert [v.tobytes() for v in f["t"].attrs["v"]] == [v.tobytes() for v in g["t"].attrs["v"]]
    for where in (src, tmp_path / "v3.zarr", tmp_path / "paged.h5"):
        with layoutkit.open(where) as archive:
            t, c = archive.get("/t"), archive.get("/c")
        assert t[0].dtype == np.dtype(">f8") and t[0].tolist() == [2.5, -1.0] and t[1].size == 0, where
        assert c["s"][0].tolist() == [258, -2, 0] and c["s"][1].size == 0, where


def test_an_array_type_reads_back_as_h5py_reads_it_from_every_layout(tmp_path: Path) -> None:
    """An HDF5 array type's elements become the array's last axes (issue 65), named
    ``<name>_element`` (``_element_<i>`` for several): in every Zarr layout and format and in
    the paged HDF5 file, ``verify`` proves them equal, and ``layoutkit.open`` and the
    xarray engine give each variant's arrays the values h5py reads from the source, with
    the same dimensions as the source's own view. So do a nested compound, a
    big-endian one (the engine made the latter raw bytes, and could not cast to them), a
    virtual dataset (its mapped files' values, written as chunks by every layout) and a
    compound with array members (stored a field an element, read back joined), and
    variable-length sequences (each stored as its values' bytes, read back as arrays; the
    engine keeps them out of xarray's decoding, which took a sequence for a scalar), and a
    compound of sequence members (each stored as its bytes and its length, read back as
    arrays of the member's type: sequences ending in zeros, an empty one, an unset row)."""

    def assert_same(got: np.ndarray, want: np.ndarray) -> None:
        if want.dtype.names and any(want.dtype[n] == object for n in want.dtype.names):  # sequence members
            assert got.dtype.names == want.dtype.names
            for n in want.dtype.names:
                assert_same(got[n], want[n])
        elif want.dtype == object:  # sequences: each an array of the same values and type
            assert got.shape == want.shape and all(
                np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got.reshape(-1), want.reshape(-1)))
        else:
            np.testing.assert_array_equal(got, want)
    import xarray as xr

    import layoutkit
    from layoutkit.hdf5.values import same_dtype  # the type rules keep the values, in either byte order

    src = tmp_path / "types.h5"
    with h5py.File(src, "w") as f:
        for builder, name in ((array_of_ints_chunked_shuffled, "ints"), (array_of_arrays, "grid"),
                              (array_scalar, "scalar"), (compound_nested_enum, "nested"),
                              (compound_big_endian, "be"), (virtual_dataset, "vds"), (array_of_compounds, "aoc"),
                              (array_of_strings, "strs"), (compound_vlen_sequence_member, "seqrec"),
                              (compound_nested_array_member, "narr")):
            builder(f)
            f.move("t", name)
        records = np.zeros(5, np.dtype([("a", "<i4"), ("v", "<f4", (3,)), ("m", "<i2", (2, 2))]))
        records["a"], records["v"], records["m"] = range(5), np.arange(15).reshape(5, 3), np.arange(20).reshape(5, 2, 2)
        f.create_dataset("records", data=records, chunks=(2,))  # array members: a field an element in Zarr
        ragged = np.empty((2, 3), dtype=object)
        for i, n in enumerate([2, 0, 3, 1, 4, 0]):
            ragged.reshape(-1)[i] = np.arange(n, dtype="<f8") * (i + 0.5)
        f.create_dataset("ragged", data=ragged, dtype=h5py.vlen_dtype("<f8"), chunks=(1, 2))  # its values' bytes
    runs = {
        "v3.zarr": ["convert"], "v2.zarr": ["convert", "--zarr-format", "2"],
        "sharded.zarr": ["convert", "--shards", "auto", "--chunks", "2"],
        "virtual.icechunk": ["convert", "--layout", "virtual"], "paged.h5": ["reorder", "--by", "group"],
    }
    write_and_prove(src, tmp_path, runs)
    dims = {"/ints": ("dim_0", "ints_element"), "/grid": ("dim_0", "grid_element_0", "grid_element_1"),
            "/scalar": ("scalar_element_0", "scalar_element_1"), "/nested": ("dim_0",), "/be": ("dim_0",),
            "/vds": ("dim_0", "dim_1"), "/records": ("dim_0",), "/ragged": ("dim_0", "dim_1"),
            "/aoc": ("dim_0", "aoc_element"), "/strs": ("dim_0", "strs_element"), "/seqrec": ("dim_0",),
            "/narr": ("dim_0",)}
    with h5py.File(src) as f:
        want = {path: f[path][()] for path in dims}
    engine_dims = {}
    for store in [src, *(tmp_path / n for n in runs)]:
        with layoutkit.open(store) as archive:
            for path, names in dims.items():
                got = archive.variable(path)
                assert got.dims == names and same_dtype(got.dtype, want[path].dtype), (store.name, path, got.dtype)
                assert_same(got.values, want[path])
        ds = xr.open_dataset(store, engine="layoutkit")  # the unnamed axes named by length, as h5netcdf does
        for path, names in dims.items():
            got_dims = ds[path[1:]].dims
            element = sum(1 for n in names if "_element" in n)
            assert got_dims == engine_dims.setdefault(path, got_dims), (store.name, got_dims)
            assert not element or got_dims[-element:] == names[-element:], (store.name, got_dims)
            assert_same(ds[path[1:]].values, want[path])
        np.testing.assert_array_equal(ds["ints"][1:3, 1:].values, want["/ints"][1:3, 1:])  # into the elements


def region_selections(f: h5py.File) -> None:
    """Region references of every kind of selection HDF5 keeps: one box, the whole
    dataset, points in their order, a union of boxes, none set; in a dataset and in
    attributes (a scalar one of the root, an array one of a dataset)."""
    x = f.create_dataset("g/x", data=np.arange(30).reshape(5, 6))
    refs = f.create_dataset("r", (5,), dtype=h5py.regionref_dtype)
    refs[0], refs[1] = x.regionref[1:3, 2:5], x.regionref[...]
    points = x.id.get_space()
    points.select_elements(np.array([[0, 1], [4, 5], [2, 2]]))
    refs[2] = h5py.h5r.create(f.id, b"g/x", h5py.h5r.DATASET_REGION, points)
    boxes = x.id.get_space()
    boxes.select_hyperslab((0, 0), (1, 2))
    boxes.select_hyperslab((3, 3), (2, 2), op=h5py.h5s.SELECT_OR)
    refs[3] = h5py.h5r.create(f.id, b"g/x", h5py.h5r.DATASET_REGION, boxes)
    f.attrs.create("ra", x.regionref[0:1, 0:2], dtype=h5py.regionref_dtype)
    x.attrs.create("rb", [x.regionref[0:1, 0:2], x.regionref[2:3, 1:2]], dtype=h5py.regionref_dtype)


def test_region_references_keep_their_selections_in_every_layout(tmp_path: Path) -> None:
    """Region references, refused by every layout, are stored in Zarr as their dataset's
    path and selection (JSON text, the type rules) and made again in a paged HDF5 file
    (issue 65): verify proves each equal; layoutkit.open gives the same text from the
    source and every variant; in the paged file each reference selects what the source's
    does, read by HDF5; and a wrong selection, in a Zarr store or the paged file, is found."""
    import json

    import zarr

    import layoutkit

    src = tmp_path / "regions.h5"
    with h5py.File(src, "w") as f:
        region_selections(f)
    runs = EVERY_VARIANT
    write_and_prove(src, tmp_path, runs)
    texts = [json.loads(t) if t else None for t in layoutkit.open(src).get("/r")]
    assert texts == [{"path": "/g/x", "blocks": [[[1, 2], [2, 4]]]}, {"path": "/g/x", "all": True},
                     {"path": "/g/x", "points": [[0, 1], [4, 5], [2, 2]]},
                     {"path": "/g/x", "blocks": [[[0, 0], [0, 1]], [[3, 3], [4, 4]]]}, None]
    for name in runs:
        with layoutkit.open(tmp_path / name) as archive:
            assert [json.loads(t) if t else None for t in archive.get("/r")] == texts, name
    with h5py.File(src) as f, h5py.File(tmp_path / "paged.h5") as g:
        for mine, theirs in zip(f["r"][()], g["r"][()]):
            assert bool(mine) == bool(theirs)
            if mine:
                np.testing.assert_array_equal(g[theirs][theirs], f[mine][mine])
        for obj, name in (("/", "ra"), ("/g/x", "rb")):
            for mine, theirs in zip(np.atleast_1d(f[obj].attrs[name]), np.atleast_1d(g[obj].attrs[name])):
                np.testing.assert_array_equal(g[theirs][theirs], f[mine][mine])
    # a wrong selection: one box moved in the v3 store, one reference made again wider in the paged file
    stored = zarr.open_array(tmp_path / "v3.zarr", path="r", mode="r+")
    stored[0] = json.dumps({"path": "/g/x", "blocks": [[[1, 2], [2, 5]]]})
    with h5py.File(tmp_path / "paged.h5", "r+") as g:
        g["r"][1] = g["g/x"].regionref[0:4, :]
    for name in ("v3.zarr", "paged.h5"):
        check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / name), "--patterns", "open",
                                         "--repeat", "1"])
        assert check.exit_code == 1 and "/r" in check.output, (name, check.output)


def rank_genes_groups(f: h5py.File) -> None:
    """What scanpy's ``rank_genes_groups`` leaves in an AnnData file: per group, the ranked
    gene names (a compound of variable-length strings, one member per group) and their
    scores (a compound of floats)."""
    groups = ["B cells", "CD4 T", "NK"]
    rng = np.random.default_rng(0)
    genes = np.array([f"GENE{i}-ε" if i % 7 == 0 else f"G{i}" for i in range(40)], dtype=object)
    names = np.zeros(12, np.dtype([(g, h5py.string_dtype()) for g in groups]))
    scores = np.zeros(12, np.dtype([(g, "<f4") for g in groups]))
    for g in groups:
        names[g] = rng.choice(genes, 12)
        scores[g] = rng.normal(size=12)
    top = f.create_group("uns/rank_genes_groups")
    top.create_dataset("names", data=names)
    top.create_dataset("scores", data=scores)
    top.attrs["encoding-type"] = "dict"


def test_external_raw_storage_is_read_from_beside_the_file_by_every_path(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Datasets whose raw data are in other files (external raw storage), refused by every
    layout, are read through HDF5 from beside the source wherever the command runs
    (HDF5 itself looks in the working directory): every Zarr layout and the paged file
    proven equal, ``layoutkit.open`` and the xarray engine giving the values in the data
    files (read here with numpy alone) from the source and each variant, a time base of
    such storage attached as the signal's coordinate, and advise's sample holding the
    values in its own file. A source read as an object in a bucket names it instead."""
    import xarray as xr

    import layoutkit
    from layoutkit.advise.subset import Part, write_part
    from layoutkit.hdf5.inventory import read_inventory
    from layoutkit.storage.sources import LocalObject

    folder = tmp_path / "archive"
    folder.mkdir()
    signal = (np.arange(3 * 40) * 0.5).reshape(40, 3).astype(">f4")  # big-endian, as the files hold it
    time = np.linspace(0, 1, 40)
    (folder / "s-a.bin").write_bytes(signal[:25].tobytes())
    (folder / "s-b.bin").write_bytes(b"\0" * 100 + signal[25:].tobytes())
    (folder / "time.bin").write_bytes(time.tobytes())
    src = folder / "shots.h5"
    with h5py.File(src, "w") as f:
        g = f.create_group("shots/7/signals")
        t = g.create_dataset("time", shape=(40,), dtype="<f8", external=[("time.bin", 0, h5py.h5f.UNLIMITED)])
        t.make_scale("time")
        ds = g.create_dataset("coil", shape=(40, 3), dtype=">f4",
                              external=[("s-a.bin", 0, 25 * 12), (str(folder / "s-b.bin"), 100, 15 * 12)])
        ds.dims[0].attach_scale(t)
        ds.attrs["units"] = "T"
        g.create_dataset("plain", data=np.arange(6))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    runs = {
        "v3.zarr": ["convert"], "v2.zarr": ["convert", "--zarr-format", "2"],
        "sharded.zarr": ["convert", "--shards", "auto", "--chunks", "8"],
        "virtual.icechunk": ["convert", "--layout", "virtual"], "paged.h5": ["reorder", "--by", "signal"],
    }
    write_and_prove(src, tmp_path, runs)
    for store in [src, *(tmp_path / n for n in runs)]:
        with layoutkit.open(store) as archive:
            np.testing.assert_array_equal(archive.get("/shots/7/signals/coil"), signal)
            got = archive.variable("/shots/7/signals/coil")
            np.testing.assert_array_equal(got["time"].values, time)
        engine = xr.open_dataset(store, engine="layoutkit", group="7/coil")
        np.testing.assert_array_equal(engine["coil"].values, signal)
        np.testing.assert_array_equal(engine["time"].values, time)
    sample = write_part(src, read_inventory(src), Part(prefixes=("/shots/7",), arrays=(), scale=1.0), tmp_path / "sample.h5")
    with h5py.File(sample) as f:
        assert f["shots/7/signals/coil"].id.get_create_plist().get_external_count() == 0
        np.testing.assert_array_equal(f["shots/7/signals/coil"][()], signal)
    in_bucket = {a.path: a for a in read_inventory(LocalObject(str(src))).arrays}
    assert in_bucket["/shots/7/signals/coil"].unmapped == "its files are not read from a bucket"


def backslash_archive(path: Path) -> dict[str, np.ndarray]:
    """A shot archive whose names hold backslashes (a signal, its time base, a group),
    beside a name holding a literal ``%``; h5py's values by path."""
    with h5py.File(path, "w") as f:
        for shot in ("1", "2"):
            g = f.create_group(f"shots/{shot}/signals")
            t = g.create_dataset("t\\ime", data=np.linspace(0, 1, 6) + int(shot))
            t.make_scale("t\\ime")
            x = g.create_dataset("coil\\B", data=np.arange(6.0) * int(shot), chunks=(3,))
            x.dims[0].attach_scale(t)
            x.attrs["units"] = "T"
            g.create_dataset("100%", data=np.arange(3))
        f.create_group("calib\\2026").create_dataset("gain", data=np.ones((2, 2)))
        f["calib\\2026"].attrs["by"] = "hand"
        return {p: f[p][()] for p in ("/shots/1/signals/coil\\B", "/shots/2/signals/t\\ime", "/calib\\2026/gain")}


def test_a_shot_named_with_a_backslash_is_listed_and_read_by_its_name_in_every_zarr_layout(tmp_path: Path) -> None:
    """A shot whose name holds a backslash: every layout lists it by the source's name
    (``shots``, a signal's shots, a packed signal's ``shot``) and reads it by that name
    (``shot``, ``read``, ``signals_of``), as ``layoutkit.open`` does the source."""
    import layoutkit

    src = tmp_path / "shots.h5"
    with h5py.File(src, "w") as f:
        for shot in ("s\\1", "2"):
            g = f.create_group(f"shots/{shot}/signals")
            t = g.create_dataset("time", data=np.arange(4.0))
            t.make_scale("time")
            g.create_dataset("ip", data=np.arange(4.0) * len(shot)).dims[0].attach_scale(t)
    runs = {"v3.zarr": ["convert"], "signal.zarr": ["convert", "--layout", "signal-major"],
            "packed.zarr": ["convert", "--layout", "shot-packed"], "virtual.icechunk": ["convert", "--layout", "virtual"]}
    write_and_prove(src, tmp_path, runs)
    for store in [src, *(tmp_path / n for n in runs)]:
        with layoutkit.open(store) as archive:
            assert archive.shots == ["2", "s\\1"] and sorted(archive.signal("ip")) == ["2", "s\\1"], store.name
            assert archive.shot("s\\1").name == "s\\1" and sorted(archive.shot("s\\1").children) == ["ip", "time"]
            np.testing.assert_array_equal(archive.read("s\\1", "ip").values, np.arange(4.0) * 3)
            assert [s for s, _ in archive.signals_of("s\\1")] == ["ip", "time"], store.name
            assert list(archive.signal_packed("ip")["shot"].values) == ["2", "s\\1"], store.name


def test_a_name_with_a_backslash_is_stored_at_its_stored_path_and_read_by_its_own(tmp_path: Path) -> None:
    """A backslash in a name, which zarr-python takes for a ``/``, refused by every Zarr
    layout: every Zarr layout stores the node with its ``%`` and ``\\`` percent-encoded and
    records its source path in ``layoutkit.json`` (issue 65); verify proves each equal
    (and finds a record that does not match); zarr-python opens the stored path;
    ``layoutkit.open`` reads every variant by the source's names; two names that would be
    stored alike are refused naming both."""
    import json

    import xarray as xr

    import layoutkit

    src = tmp_path / "names.h5"
    want = backslash_archive(src)
    runs = {
        "v3.zarr": ["convert"], "v2.zarr": ["convert", "--zarr-format", "2"],
        "sharded.zarr": ["convert", "--shards", "auto", "--chunks", "3"],
        "signal.zarr": ["convert", "--layout", "signal-major"], "packed.zarr": ["convert", "--layout", "shot-packed"],
        "virtual.icechunk": ["convert", "--layout", "virtual"], "paged.h5": ["reorder", "--by", "signal"],
    }
    write_and_prove(src, tmp_path, runs)
    record = json.loads((tmp_path / "v3.zarr" / "layoutkit.json").read_text())["renamed"]
    assert record["/shots/1/signals/coil%5CB"] == "/shots/1/signals/coil\\B" and record["/calib%5C2026"] == "/calib\\2026"
    assert "/shots/1/signals/100%" not in record  # no backslash: stored as it is
    z = zarr.open_group(tmp_path / "v3.zarr", mode="r")
    np.testing.assert_array_equal(z["shots/1/signals/coil%5CB"][:], want["/shots/1/signals/coil\\B"])
    assert z["shots/1/signals/coil%5CB"].metadata.dimension_names == ("t%5Cime",)
    for store in [src, *(tmp_path / n for n in runs)]:
        with layoutkit.open(store) as archive:
            for path, values in want.items():
                np.testing.assert_array_equal(archive.get(path), values, err_msg=f"{store.name}{path}")
            signal = archive.read(2, "coil\\B")
            np.testing.assert_array_equal(signal.values, np.arange(6.0) * 2)
            np.testing.assert_array_equal(signal[signal.dims[0]].values, np.linspace(0, 1, 6) + 2)
            assert sorted(archive.signal("coil\\B")) == ["1", "2"]
            # listed by the source's names, as the HDF5 reader lists them (not coil%5CB)
            assert archive.signals == ["100%", "coil\\B", "t\\ime"] and signal.dims == ("t\\ime",), store.name
            assert "/calib\\2026/gain" in archive.arrays() and "calib\\2026" in archive.children("/"), store.name
            assert any(p == "/calib\\2026/gain" for p, _ in archive.blocks()), store.name
            assert sorted(archive.shot(2).children) == ["100%", "coil\\B", "t\\ime"], store.name
            assert ("coil\\B", "/shots/1/signals/coil\\B") in archive.signals_of(1), store.name
            assert list(archive.signal_packed("coil\\B").data_vars) == ["coil\\B", "t\\ime"], store.name
        tree = xr.open_datatree(store, engine="layoutkit")  # the engine: the source's names too
        node = tree["2"]["coil\\B"]
        np.testing.assert_array_equal(node.dataset[node.name].values, np.arange(6.0) * 2)
    more = tmp_path / "more.h5"
    backslash_archive(more)
    with h5py.File(more, "a") as f:
        f.move("shots/2", "shots/3")
    for name, layout in (("sharded.zarr", "shot-major"), ("packed.zarr", "shot-packed")):  # its record grows
        appended = CliRunner().invoke(app, ["convert", str(more), str(tmp_path / name), "--append", "--layout", layout])
        assert appended.exit_code == 0, appended.output
        with layoutkit.open(tmp_path / name) as archive:
            np.testing.assert_array_equal(archive.get("/shots/3/signals/coil\\B"), np.arange(6.0) * 2)
    assert "/shots/3/signals/t%5Cime" in json.loads((tmp_path / "sharded.zarr" / "layoutkit.json").read_text())["renamed"]
    with h5py.File(more, "a") as f:  # shot 1, held by the store, told apart by its values, not by its names
        f["shots/1/signals/coil\\B"][0] = 99
        f.move("shots/3", "shots/4")
    appended = CliRunner().invoke(app, ["convert", str(more), str(tmp_path / "sharded.zarr"), "--append"])
    assert appended.exit_code == 2 and "Shot 1" in appended.output, appended.output
    record["/shots/2/signals/coil%5CB"] = "/shots/2/signals/other"
    sidecar = tmp_path / "v3.zarr" / "layoutkit.json"
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "renamed": record}))
    check = CliRunner().invoke(app, ["verify", str(src), str(tmp_path / "v3.zarr"), "--patterns", "open"])
    assert check.exit_code == 1 and "coil\\B: name" in " ".join(check.output.split()), check.output
    with h5py.File(src, "a") as f:
        f["shots/1/signals/coil%5CB"] = np.arange(2)  # stored alike with coil\B
    refused = CliRunner().invoke(app, ["convert", str(src), str(tmp_path / "again.zarr")])
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "coil%5CB" in said and "coil\\\\B" in said, said
    assert not (tmp_path / "again.zarr").exists()


def test_an_h5ad_written_by_anndata_converts_and_reads_as_read_h5ad_reads_it(tmp_path: Path) -> None:
    """An AnnData file as anndata itself writes it, with rank_genes_groups' results in
    ``uns`` (record arrays: compounds of variable-length strings and of floats): convert
    and the virtual layout proven equal, and what ``layoutkit.open`` reads from each store
    is what anndata's own ``read_h5ad`` reads from the source (issue 65)."""
    import anndata as ad
    import pandas as pd

    import layoutkit

    rng = np.random.default_rng(3)
    groups = ["B cells", "CD4 T", "NK"]
    adata = ad.AnnData(X=rng.normal(size=(30, 12)).astype("f4"),
                       obs=pd.DataFrame({"cell_type": pd.Categorical(rng.choice(groups, 30))},
                                        index=[f"cell{i}" for i in range(30)]),
                       var=pd.DataFrame(index=[f"GENE{i}-ε" if i % 5 == 0 else f"G{i}" for i in range(12)]))
    ranked = {g: rng.permutation(adata.var_names.to_numpy())[:6].astype(object) for g in groups}
    adata.uns["rank_genes_groups"] = {
        "names": np.rec.fromarrays(list(ranked.values()), names=groups),
        "scores": np.rec.fromarrays([rng.normal(size=6).astype("f4") for _ in groups], names=groups),
        "params": {"groupby": "cell_type", "method": "t-test"},
    }
    src = tmp_path / "pbmc.h5ad"
    adata.write_h5ad(src)
    with h5py.File(src) as f:  # what anndata wrote: the case every Zarr layout refused
        assert h5py.check_string_dtype(f["uns/rank_genes_groups/names"].dtype[groups[0]]) is not None
    stores = {"v3.zarr": [], "virtual.icechunk": ["--layout", "virtual"]}
    for name, args in stores.items():
        result = CliRunner().invoke(app, ["convert", str(src), str(tmp_path / name), *args])
        assert result.exit_code == 0, result.output
    check = CliRunner().invoke(app, ["verify", str(src), *(str(tmp_path / n) for n in stores), "--patterns", "open",
                                     "--repeat", "1"])
    assert check.exit_code == 0, check.output
    back = ad.read_h5ad(src)
    want = back.uns["rank_genes_groups"]
    for name in stores:
        with layoutkit.open(tmp_path / name) as archive:
            names = archive.get("/uns/rank_genes_groups/names")
            scores = archive.get("/uns/rank_genes_groups/scores")
            np.testing.assert_array_equal(archive.get("/X"), back.X)
        for g in groups:
            assert [v.decode("utf-8") for v in names[g]] == list(want["names"][g]), (name, g)
            np.testing.assert_array_equal(scores[g], want["scores"][g])


def test_a_compound_of_text_converts_as_anndata_rank_genes_groups_leaves_it(tmp_path: Path) -> None:
    """An AnnData file after ``rank_genes_groups`` holds a compound of variable-length
    strings, which every Zarr layout refused (the whole file). Its text members are stored
    as fixed-length UTF-8 bytes, each as long as its longest value (issue 65): every format and
    the virtual layout are proven equal, and ``layoutkit.open`` gives the values h5py reads
    (the text's bytes) from each."""
    import layoutkit

    src = tmp_path / "pbmc.h5ad"
    with h5py.File(src, "w") as f:
        rank_genes_groups(f)
    runs = {"v3.zarr": ["convert"], "v2.zarr": ["convert", "--zarr-format", "2"],
            "virtual.icechunk": ["convert", "--layout", "virtual"]}
    write_and_prove(src, tmp_path, runs)
    with h5py.File(src) as f:
        want = f["uns/rank_genes_groups/names"][()]
    stored = zarr.open_group(tmp_path / "v3.zarr", mode="r")["uns/rank_genes_groups/names"]
    assert stored.dtype == np.dtype([(g, f"S{max(len(v) for v in want[g])}") for g in want.dtype.names])
    assert stored.attrs["hdf5_text_members"] == list(want.dtype.names)
    for name in runs:
        with layoutkit.open(tmp_path / name) as archive:
            got = archive.get("/uns/rank_genes_groups/names")
        assert got.tolist() == want.tolist(), name  # the same bytes, in the same records
