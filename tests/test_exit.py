"""Whatever a program leaves open, its interpreter exits cleanly: no crash, no hang, no
warning. Each case runs in a process of its own, as a user's script or command does.

An HDF5 file opened on a Python file object (a file in a bucket) and never closed used
to kill the process at exit (SIGSEGV, exit code 139): HDF5 closed it after Python had
finalized, calling back into Python (``layoutkit.hdf5.files.close_at_exit``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from layoutkit.testing import S3Endpoint

TIMEOUT = 120  # a hang at exit fails here, not in the suite's own timeout


@pytest.fixture(scope="module")
def s3():  # noqa: ANN201 - an S3Endpoint with a bucket of the sample's variants
    with S3Endpoint(buckets=("exit",)) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def variants(shot_file: Path, tmp_path_factory, s3) -> dict[str, str]:  # noqa: ANN001
    """The sample and a variant of every layout, locally, in the bucket and in Icechunk."""
    import obstore
    from obstore.store import S3Store

    from layoutkit import pipeline
    from layoutkit.layouts import LAYOUTS
    from layoutkit.storage import destination

    root = tmp_path_factory.mktemp("exit")
    out = {"source.h5": str(shot_file)}
    for name, layout in LAYOUTS.items():
        suffix = ".zarr" if layout.format == "zarr" else ".h5"
        out[f"local {name}"] = str(root / f"{name}{suffix}")
        pipeline.run(layout, shot_file, root / f"{name}{suffix}", layout.default_options())
    store = S3Store("exit", endpoint=s3.url, access_key_id="test", secret_access_key="test", region="us-east-1",
                    client_options={"allow_http": True})
    obstore.put(store, "source.h5", Path(shot_file).read_bytes())
    out["bucket source.h5"] = "s3://exit/source.h5"
    for name in ("signal-major", "hdf5-paged"):
        layout = LAYOUTS[name]
        url = f"s3://exit/{name}{'.zarr' if layout.format == 'zarr' else '.h5'}"
        pipeline.run(layout, shot_file, destination(url, s3.storage_options), layout.default_options())
        out[f"bucket {name}"] = url
    layout = LAYOUTS["shot-packed"]
    pipeline.run(layout, shot_file, destination(f"icechunk:{root / 'repo'}"), layout.default_options())
    out["icechunk shot-packed"] = f"icechunk:{root / 'repo'}"
    return out


SLOW_CALLBACK = re.compile(r"^Executing <.*> took \d+\.\d+ seconds\n", re.MULTILINE)
"""What ``-X dev`` (asyncio's debug mode) says of any step of an event loop that took over
0.1 s: a timing on a loaded machine (zarr's loop, in CI under the whole suite), not a
fault; it is left out of what the script wrote on stderr."""


def run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True, text=True,
                          timeout=TIMEOUT, env={**os.environ, **(env or {})})
    done.stderr = SLOW_CALLBACK.sub("", done.stderr)
    return done


CASES = ["source.h5", "local shot-major", "local signal-major", "local shot-packed", "local hdf5-paged",
         "bucket source.h5", "bucket signal-major", "bucket hdf5-paged", "icechunk shot-packed"]


@pytest.mark.parametrize("case", CASES)
def test_layoutkit_open_left_open_exits_cleanly(case: str, variants: dict[str, str], s3) -> None:  # noqa: ANN001
    """A script that opens an archive, reads from it and ends without close()."""
    options = s3.storage_options if case.startswith("bucket") else {}
    code = (
        "import layoutkit\n"
        f"a = layoutkit.open({variants[case]!r}, storage_options={options!r})\n"
        "shot, signal = a.shots[0], a.signals[0]\n"
        "print(len(a.shots), a.read(shot, signal).shape)\n"
    )
    done = run(code)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() and done.stderr == "", done.stderr[-2000:]


def test_every_command_exits_cleanly(variants: dict[str, str], s3, tmp_path: Path) -> None:  # noqa: ANN001
    """Each command, run as a user runs it (-X dev shows every warning): exit 0, nothing
    on stderr."""
    storage = [f"--storage-option={k}={v}" for k, v in s3.storage_options.items()]
    commands = [
        ["sample", str(tmp_path / "s.h5"), "--shots", "2", "--signals", "4"],
        ["convert", variants["bucket source.h5"], str(tmp_path / "c.zarr"), *storage],
        ["reorder", variants["source.h5"], str(tmp_path / "r.h5")],
        ["verify", variants["source.h5"], variants["local signal-major"], variants["bucket hdf5-paged"], "--repeat", "1",
         "--patterns", "open,shot", "--sample", "1", *storage],
        ["inspect", variants["bucket source.h5"], *storage],
        ["recipes", "from", variants["local shot-packed"]],
        ["advise", str(tmp_path / "s.h5"), "--budget", "1min", "--candidates", "signal-major", "--sample", "1",
         "--out", str(tmp_path / "advice"), "--latency", "0"],
    ]
    for args in commands:
        done = subprocess.run([sys.executable, "-X", "dev", "-m", "layoutkit", "-q", *args], capture_output=True,
                              text=True, timeout=TIMEOUT)
        assert done.returncode == 0, (args[0], done.returncode, done.stderr[-2000:])
        assert done.stderr == "", (args[0], done.stderr[-2000:])
