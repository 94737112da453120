"""Every command on every real file and every generated edge case, as a user runs them.

For each file: ``inspect``; ``convert`` to Zarr v3 and v2 and ``--layout signal-major``
(a netCDF-4 file's v3 and v2 stores opened by xarray identical to the file);
``reorder --by group``; then ``verify`` of every variant written with every pattern that
applies. This is the one test that converts every real file with the default options
(the conformance modules' own real-file tests cover other options: shards, stored chunks,
reorder's comparator). Each run must exit as documented (0; 2 with one sentence for a refusal; verify:
0 all equal and every pattern ran, 1 data differ, 3 a pattern could not run), print no
traceback, show no ``failed`` without its reason, and write nothing inflated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import HARD_CASES, assert_xarray_identical, build_edge_archive, realdata_files
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.storage import disk_usage

runner = CliRunner()

# a run past this has hung: the slowest file takes ~35 s alone and ~95 s in the full
# suite here, and CI's machines have run the suite up to 1.9x slower than this one
HANG = 480
SMALL_FILE = 10 * 1024**2
# a file of more data than this is not scanned whole by verify's read patterns here: its
# variants are proven equal all the same, and a scan of 2 GiB of zeros (an edge case of
# the corpus) five times over tells nothing a small file's scan does not
SCANNED_BYTES = 256 * 1024**2
# Zarr keeps a metadata document per array (~0.4 KiB), twice with consolidated metadata:
# a file of a thousand one-element datasets cannot stay within 2x in Zarr, only in HDF5
ZARR_METADATA_PER_ARRAY = 1024


def realdata_or_skip() -> list:
    files = realdata_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/realdata is absent"), id="no-realdata")]
    return [pytest.param(p, id=p.name) for p in files]


def invoke(*args: str | Path):  # noqa: ANN201 - click Result
    result = runner.invoke(app, [str(a) for a in args])
    text = result.output
    assert "Traceback" not in text, text[-3000:]
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{args[0]} raised {result.exception!r}") from result.exception
    return result


def assert_refusal(result, what: str) -> None:  # noqa: ANN001
    """A refusal is exit 2 and one line that starts with "error:"."""
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2, f"{what}: exit {result.exit_code}\n{result.output[-2000:]}"
    assert lines and lines[-1].startswith("error:") or lines[0].startswith("error:"), result.output
    assert len([line for line in lines if line.startswith("error:")]) == 1


def assert_not_inflated(src: Path, out: Path, arrays: int) -> None:
    source = src.stat().st_size
    if source >= SMALL_FILE:
        return
    allowed = max(2 * source, 64 * 1024)
    if out.is_dir():
        allowed += ZARR_METADATA_PER_ARRAY * arrays
    assert disk_usage(out) <= allowed, f"{out.name}: {disk_usage(out):,} B from a {source:,} B file"


def run_everything(src: Path, tmp_path: Path) -> dict[str, int]:
    """Every command on ``src``; returns the exit code of each."""
    codes = {}
    inspected = invoke("inspect", src)
    codes["inspect"] = inspected.exit_code
    assert inspected.exit_code == 0, inspected.output
    as_json = json.loads(invoke("inspect", src, "--json").output)
    arrays = as_json["arrays"]
    variants = []
    runs = {
        "v3.zarr": ["convert", src, tmp_path / "v3.zarr"],
        "v2.zarr": ["convert", src, tmp_path / "v2.zarr", "--zarr-format", "2"],
        "signal.zarr": ["convert", src, tmp_path / "signal.zarr", "--layout", "signal-major", "--shards", "auto"],
        "group.h5": ["reorder", src, tmp_path / "group.h5", "--by", "group"],
    }
    for name, args in runs.items():
        result = invoke(*args)
        whole = result.exit_code == 0
        if result.exit_code == 2 and "--skip-unsupported" in result.output and args[0] == "convert":
            assert_refusal(result, name)
            result = invoke(*args, "--skip-unsupported")
        codes[name] = result.exit_code
        out = tmp_path / name
        if result.exit_code == 0:
            assert out.exists()
            assert_not_inflated(src, out, arrays)
            variants.append(out)
            if whole and src.suffix == ".nc" and name in ("v3.zarr", "v2.zarr"):
                assert_xarray_identical(src, out)  # netCDF-4 as xarray opens it, whole files
        else:
            assert_refusal(result, name)
            assert not out.exists() and not list(tmp_path.glob(f".{name}.layoutkit-*"))
    if variants:
        patterns = "all" if as_json["logical_bytes"] <= SCANNED_BYTES else "open,subset,axis"
        result = invoke("verify", src, *variants, "--repeat", "1", "--sample", "2", "--patterns", patterns)
        codes["verify"] = result.exit_code
        rows_failed = sum(line.count(" failed ") for line in result.output.splitlines() if line.startswith("│"))
        reasons = [line for line in result.output.splitlines() if line.startswith("failed:")]
        assert not rows_failed or reasons, "a row says failed and nothing says why"
        assert result.exit_code == 0, result.output[-3000:]
        said = " ".join(result.output.split())  # as read, whatever the line wrapping
        held = f"all {len(variants)} variants hold" if len(variants) > 1 else "the 1 variant holds"
        assert f"{held} exactly the data of {src.name}" in said
    return codes


@pytest.mark.realdata
@pytest.mark.timeout(HANG)
@pytest.mark.parametrize("src", realdata_or_skip())
def test_every_command_on_every_real_file(src: Path, tmp_path: Path) -> None:
    codes = run_everything(src, tmp_path)
    assert codes["inspect"] == 0
    assert codes["v3.zarr"] in (0, 2) and codes["group.h5"] in (0, 2)


@pytest.mark.timeout(HANG)
@pytest.mark.parametrize("case", sorted(HARD_CASES))
def test_every_command_on_every_generated_case(case: str, hard_cases: dict[str, Path], tmp_path: Path) -> None:
    codes = run_everything(hard_cases[case], tmp_path)
    assert codes["v3.zarr"] == 0 and codes["v2.zarr"] == 0 and codes["group.h5"] == 0
    assert codes["verify"] == 0


@pytest.mark.timeout(HANG)
def test_every_command_on_the_edge_archive(tmp_path: Path) -> None:
    src = build_edge_archive(tmp_path / "edge.h5")
    out = tmp_path / "out"
    out.mkdir()
    codes = run_everything(src, out)
    assert codes == {"inspect": 0, "v3.zarr": 0, "v2.zarr": 0, "signal.zarr": 0, "group.h5": 0, "verify": 0}
