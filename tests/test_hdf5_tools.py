"""Files the HDF5 library's own tools write, through convert and reorder (issue #48).

h5py and layoutkit's tests share blind spots; the C library's tools write what h5py does
not: ``h5repack`` rewrites a generated shot file with every storage layout and filter it
offers, in the earliest and the latest file format (version-4 layouts: fixed and
extensible arrays, v2 B-trees); ``h5jam`` puts a user block in front; ``h5import`` makes
datasets from text. Each output is converted (Zarr v3) and reordered, and proved equal
by verify, which reads the source through HDF5 itself; or refused naming the dataset.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from layoutkit.cli import app

requires_h5tools = pytest.mark.skipif(shutil.which("h5repack") is None, reason="needs Debian's hdf5-tools")
pytestmark = requires_h5tools

# h5repack's -l and -f, one rewrite each; "-L": the latest file format
REPACKS = {
    "chunked": ["-l", "CHUNK=3x5"],
    "contiguous": ["-l", "CONTI"],
    "compact": ["-l", "COMPA"],
    "gzip": ["-f", "GZIP=6"],
    "shuffle-gzip": ["-f", "SHUF", "-f", "GZIP=1"],
    "fletcher32": ["-f", "FLET"],
    "nbit": ["-f", "NBIT"],
    "scaleoffset": ["-f", "SOFF=0,IN"],
    "latest-chunked": ["-L", "-l", "CHUNK=3x5"],
    "latest-gzip": ["-L", "-f", "GZIP=4"],
    "latest-paged": ["-L", "-S", "PAGE", "-G", "4096"],
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small shot archive written by h5py: integers and floats, 2-D signals with an
    unlimited axis (extensible arrays once h5repack -L rewrites them), a shared time base."""
    path = tmp_path_factory.mktemp("tools") / "shots.h5"
    rng = np.random.default_rng(4)
    with h5py.File(path, "w") as f:
        for shot in ("101", "102"):
            g = f.create_group(f"shots/{shot}/signals")
            t = g.create_dataset("time", data=np.linspace(0, 1, 40))
            t.make_scale("time")
            ip = g.create_dataset("ip", data=rng.integers(-1000, 1000, size=40, dtype="i4"), chunks=(8,),
                                  maxshape=(None,))
            ip.dims[0].attach_scale(t)
            ne = g.create_dataset("ne", data=rng.normal(size=(40, 6)).astype("f4"), chunks=(10, 3),
                                  maxshape=(40, None))
            ne.dims[0].attach_scale(t)
            ne.attrs["units"] = "m^-3"
    return path


def _equal_or_refused(src: Path, tmp_path: Path) -> None:
    for command, out in (("convert", tmp_path / "o.zarr"), ("reorder", tmp_path / "o.h5")):
        args = [command, str(src), str(out)] + (["--by", "signal"] if command == "reorder" else [])
        result = CliRunner().invoke(app, args)
        if result.exit_code == 2:
            said = " ".join(result.output.split())
            assert said.startswith("error:") and "'/" in said and not out.exists(), result.output
            continue
        assert result.exit_code == 0, result.output
        check = CliRunner().invoke(app, ["verify", str(src), str(out), "--patterns", "open", "--repeat", "1"])
        assert check.exit_code == 0, check.output
        _same_as_hdf5_reads(src, out)


def _same_as_hdf5_reads(src: Path, out: Path) -> None:
    """Every dataset of the output, read by zarr-python or h5py, against h5py's read of
    the source: a check that shares no code with layoutkit."""
    import zarr

    with h5py.File(src, "r") as f:
        paths: list[str] = []
        f.visititems(lambda name, obj: paths.append(name) if isinstance(obj, h5py.Dataset) else None)
        if out.suffix == ".zarr":
            root = zarr.open_group(out, mode="r", use_consolidated=False)
            for p in paths:
                np.testing.assert_array_equal(root[p][...], f[p][...], err_msg=p)
        else:
            with h5py.File(out, "r") as g:
                for p in paths:
                    np.testing.assert_array_equal(g[p][...], f[p][...], err_msg=p)


@pytest.mark.parametrize("name", list(REPACKS))
def test_h5repack_outputs_convert_and_reorder_equal(generated: Path, tmp_path: Path, name: str) -> None:
    src = tmp_path / f"{name}.h5"
    subprocess.run(["h5repack", *REPACKS[name], str(generated), str(src)], check=True, capture_output=True)
    with h5py.File(src, "r") as f:  # what the rewrite made, as HDF5 reads it
        assert f["shots/101/signals/ip"].shape == (40,)
    _equal_or_refused(src, tmp_path)
    result = CliRunner().invoke(app, ["convert", str(src), str(tmp_path / "v2.zarr"), "--zarr-format", "2"])
    assert result.exit_code == 0, result.output


def test_a_user_block_written_by_h5jam(generated: Path, tmp_path: Path) -> None:
    block = tmp_path / "block.txt"
    block.write_text("shot=101 written by the acquisition system\n" * 3)
    src = tmp_path / "jammed.h5"
    subprocess.run(["h5jam", "-i", str(generated), "-u", str(block), "-o", str(src)], check=True, capture_output=True)
    assert src.read_bytes().startswith(b"shot=101")
    _equal_or_refused(src, tmp_path)
    with h5py.File(tmp_path / "o.h5", "r") as f:  # reorder keeps the user block
        assert f.userblock_size >= len(block.read_bytes())
    assert (tmp_path / "o.h5").read_bytes().startswith(b"shot=101")


def test_datasets_made_by_h5import(tmp_path: Path) -> None:
    data = tmp_path / "values.txt"
    data.write_text("\n".join(" ".join(str(r * 7 + c) for c in range(7)) for r in range(5)) + "\n")
    config = tmp_path / "import.cfg"
    config.write_text(
        "PATH /shots/1/signals/ip\nINPUT-CLASS TEXTIN\nINPUT-SIZE 32\nRANK 2\nDIMENSION-SIZES 5 7\n"
        "OUTPUT-CLASS IN\nOUTPUT-SIZE 16\nOUTPUT-ARCHITECTURE STD\nOUTPUT-BYTE-ORDER BE\n"
        "CHUNKED-DIMENSION-SIZES 2 3\nCOMPRESSION-TYPE GZIP\nCOMPRESSION-PARAM 5\n"
        "MAXIMUM-DIMENSIONS 10 -1\n"
    )
    src = tmp_path / "imported.h5"
    subprocess.run(["h5import", str(data), "-c", str(config), "-o", str(src)], check=True, capture_output=True)
    with h5py.File(src, "r") as f:
        ds = f["shots/1/signals/ip"]
        assert ds.dtype == np.dtype(">i2") and ds.maxshape == (10, None)
        np.testing.assert_array_equal(ds[...], np.arange(35).reshape(5, 7))
    _equal_or_refused(src, tmp_path)


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The types issue 65 made convertible, written by h5py: an array type, a compound
    with an array member, one with a text member, ragged sequences, region references, a
    sequence member inside a nested member. (Not an array type of compounds holding text:
    Debian's h5repack 1.10 writes one that the HDF5 2.0 h5py carries cannot read, "bad
    heap pointer", where h5dump 1.10 reads it; convert refuses it, naming HDF5.)"""
    path = tmp_path_factory.mktemp("typed") / "typed.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("array_type", shape=(8,), dtype=np.dtype(("<i2", (3,))))[...] = np.arange(24).reshape(8, 3)
        records = np.zeros(6, np.dtype([("a", "<i4"), ("v", "<f4", (3,))]))
        records["a"], records["v"] = range(6), np.arange(18).reshape(6, 3)
        f.create_dataset("array_member", data=records)
        f.create_dataset("text_member", data=np.array([(1, "x"), (2, "yé")], [("a", "<i4"), ("s", h5py.string_dtype())]))
        ragged = np.empty(4, dtype=object)
        for i in range(4):
            ragged[i] = np.arange(i, dtype="<f8") / 3
        f.create_dataset("ragged", data=ragged, dtype=h5py.vlen_dtype("<f8"))
        nested = np.zeros(3, np.dtype([("a", "<i4"), ("n", [("v", h5py.vlen_dtype("<i2")), ("k", "<f4")])]))
        for i in range(3):
            nested["n"]["v"][i] = np.arange(i, dtype="<i2")
        f.create_dataset("nested_sequence", data=nested)
        x = f["array_type"]
        refs = f.create_dataset("regions", (2,), dtype=h5py.regionref_dtype)
        refs[0], refs[1] = x.regionref[1:3], x.regionref[5:8]
    return path


@pytest.mark.parametrize("name", ["latest-chunked", "latest-gzip", "contiguous"])
def test_issue_65_types_rewritten_by_h5repack_convert_and_reorder_equal(typed: Path, tmp_path: Path, name: str) -> None:
    """The same types as the HDF5 library writes them (h5repack's rewrite in the latest file
    format, chunked and gzip'd, or contiguous): every Zarr format and reorder proven equal."""
    src = tmp_path / f"{name}.h5"
    layout = ["-L", "-l", "CHUNK=2"] if name == "latest-chunked" else REPACKS[name]
    subprocess.run(["h5repack", *layout, str(typed), str(src)], check=True, capture_output=True)
    outs = {"v3.zarr": ["convert"], "v2.zarr": ["convert", "--zarr-format", "2"], "o.h5": ["reorder", "--by", "group"]}
    for out, (command, *args) in outs.items():
        result = CliRunner().invoke(app, [command, str(src), str(tmp_path / out), *args])
        assert result.exit_code == 0, (out, result.output)
    check = CliRunner().invoke(app, ["verify", str(src), *(str(tmp_path / o) for o in outs), "--patterns", "open",
                                     "--repeat", "1"])
    assert check.exit_code == 0 and "all 3 variants hold" in " ".join(check.output.split()), check.output


def test_an_array_type_of_compounds_holding_text_that_hdf5_cannot_read_is_refused_naming_hdf5(tmp_path: Path) -> None:
    """Debian's h5repack (HDF5 1.10) rewrites an array type of compounds holding text so
    that the HDF5 h5py carries (2.0) cannot read its values ("bad heap pointer"; h5dump
    1.10 reads them): convert refuses the dataset in one sentence naming HDF5 and its
    members, writes nothing, leaves the source as it was; --skip-unsupported converts the rest."""
    src = tmp_path / "src.h5"
    element = np.dtype([("a", "<i4"), ("s", h5py.string_dtype()), ("v", "<f4", (2,))])
    with h5py.File(src, "w") as f:
        elements = np.zeros((4, 2), element)
        elements["a"], elements["s"] = np.arange(8).reshape(4, 2), [["x", "é"], ["", "yz"]] * 2
        f.create_dataset("t", shape=(4,), dtype=np.dtype((element, (2,))))[...] = elements
        f.create_dataset("plain", data=np.arange(3))
    repacked = tmp_path / "repacked.h5"
    subprocess.run(["h5repack", str(src), str(repacked)], check=True, capture_output=True)
    with h5py.File(repacked) as f:
        try:
            f["t"][...]
        except OSError:
            pass
        else:
            pytest.fail("this HDF5 reads h5repack's array type of compounds now: the refusal below is no longer needed")
    before = repacked.read_bytes()
    result = CliRunner().invoke(app, ["convert", str(repacked), str(tmp_path / "out.zarr")])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "Dataset '/t' uses a compound type with variable-length members (s) whose values " \
        f"HDF5 {h5py.version.hdf5_version} cannot read" in said, result.output
    assert "Traceback" not in result.output and not (tmp_path / "out.zarr").exists() and repacked.read_bytes() == before
    rest = CliRunner().invoke(app, ["convert", str(repacked), str(tmp_path / "rest.zarr"), "--skip-unsupported"])
    assert rest.exit_code == 0 and (tmp_path / "rest.zarr" / "plain").exists(), rest.output
