"""One conformance suite, run over every source and every Zarr variant `convert` writes.

Each case converts a source, then checks with :func:`layoutkit.verify.compare_zarr` that
every group, array value (NaN-aware), dtype, shape, fill value, attribute and dimension
name survived. netCDF-4 sources must also look identical to xarray.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import h5py
import pytest
import xarray as xr
from conftest import HARD_CASES, realdata_params

from layoutkit.convert import ConvertOptions, convert
from layoutkit.equality import compare_zarr
from layoutkit.errors import ChunkDecodeError, MissingFilterError, UnsupportedFeatureError
from layoutkit.options import parse_chunks, parse_compressor, parse_shards
from layoutkit.recipes import PROVENANCE_ATTR

VARIANTS = {
    "v3": ConvertOptions(),
    "v2": ConvertOptions(zarr_format=2),
    "v3-sharded-lz4": ConvertOptions(shards=parse_shards("auto"), compressor=parse_compressor("lz4")),
    "v3-source-chunks-gzip": ConvertOptions(chunks=parse_chunks("source"), compressor=parse_compressor("shuffle+gzip:2")),
    "v3-unaligned-chunks": ConvertOptions(chunks=parse_chunks("33,2"), compressor=parse_compressor("none")),
    "v3-tiny-budget-serial": ConvertOptions(chunk_bytes=4096, memory_limit=1 << 20, scheduler="serial",
                                            shards=parse_shards("64KiB")),
    # stored chunks copied as they are (their filters as Zarr codecs); xarray reads the netCDF case
    "v3-stored-chunks": ConvertOptions(compressor=parse_compressor("source")),
    "v2-stored-chunks": ConvertOptions(zarr_format=2, compressor=parse_compressor("source")),
}


def assert_faithful(src: Path, dst: Path, skipped: frozenset[str] = frozenset()) -> None:
    mismatches = compare_zarr(src, dst, skipped=skipped)
    assert not mismatches, "\n".join(map(str, mismatches[:20]))


def assert_xarray_identical(src: Path, dst: Path) -> None:
    """Every group's dataset, as xarray sees it, is identical in source and store (but for
    the one global attribute layoutkit adds to the store: the recipe it was written with)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        source = xr.open_datatree(src, engine="netcdf4")
        store = xr.open_datatree(dst, engine="zarr")
        assert sorted(n.path for n in store.subtree) == sorted(n.path for n in source.subtree)
        for node in source.subtree:
            got = store[node.path].to_dataset(inherit=False).load()
            if node.path == "/":
                assert PROVENANCE_ATTR in got.attrs
                del got.attrs[PROVENANCE_ATTR]
            xr.testing.assert_identical(node.to_dataset(inherit=False).load(), got)


class ConformanceBase:
    """Subclasses say which options to convert with; the checks are shared."""

    options: ConvertOptions

    def convert_and_check(self, src: Path, tmp_path: Path) -> Path:
        dst = tmp_path / "out.zarr"
        summary = convert(src, dst, self.options)
        assert summary.arrays > 0
        assert_faithful(src, dst)
        return dst

    @pytest.mark.parametrize("case", sorted(HARD_CASES))
    def test_hard_case(self, case: str, hard_cases: dict[str, Path], tmp_path: Path) -> None:
        dst = self.convert_and_check(hard_cases[case], tmp_path)
        if case == "netcdf4":
            assert_xarray_identical(hard_cases[case], dst)

    def test_sample_archive(self, shot_file: Path, tmp_path: Path) -> None:
        if self.options.chunks == VARIANTS["v3-unaligned-chunks"].chunks:
            # still unaligned with the sample's chunks (2048 x 32, whole signals) and smaller on both
            # axes, in 1,606 chunks rather than 14,582 (the proof read them one at a time: 50 s of 57)
            self.options = replace(self.options, chunks=parse_chunks("333,2"))
        dst = self.convert_and_check(shot_file, tmp_path)
        tree = xr.open_datatree(dst, engine="zarr")  # every group opens
        assert any("signals" in n.path for n in tree.subtree)


@pytest.mark.parametrize("variant", list(VARIANTS), ids=list(VARIANTS))
class TestConvertVariants(ConformanceBase):
    @pytest.fixture(autouse=True)
    def _options(self, variant: str) -> None:
        self.options = VARIANTS[variant]


@pytest.mark.realdata
@pytest.mark.parametrize("src", realdata_params())
@pytest.mark.parametrize("variant", ["v3", "v2"])
def test_realdata(src: Path, variant: str, tmp_path: Path) -> None:
    """Every real file converts faithfully, or is refused naming dataset and feature;
    with --skip-unsupported the rest still converts faithfully."""
    dst = tmp_path / "out.zarr"
    options = VARIANTS[variant]
    try:
        convert(src, dst, options)
    except ChunkDecodeError as exc:
        # only acceptable where HDF5 itself cannot read the dataset
        assert exc.dataset in str(exc) and not dst.exists()
        with h5py.File(src, "r") as f, pytest.raises(OSError):
            f[exc.dataset][()]
        return
    except (UnsupportedFeatureError, MissingFilterError) as exc:
        assert exc.dataset in str(exc)
        assert not dst.exists()
        summary = convert(src, dst, ConvertOptions(zarr_format=options.zarr_format, skip_unsupported=True))
        skipped = frozenset(p for p, _ in summary.skipped)
        assert exc.dataset in skipped
        assert_faithful(src, dst, skipped)
        return
    assert_faithful(src, dst)
    if src.suffix == ".nc":
        assert_xarray_identical(src, dst)
