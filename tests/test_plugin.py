"""A layout of another package, installed as users install one (``pip install``), is a
layout of ``layoutkit convert`` like layoutkit's own: written, verified and advised from
the command line, its shipped recipe listed and tried, and the conformance suite run
over it, with no line of layoutkit changed for it (issue 63). The example is
``examples/npy_layout``; it is installed into a folder of its own (``pip install
--target``: its wheel built, its entry point and recipe installed), never into the
environment the other tests run in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from layoutkit.sample import write_sample

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a program run where the example package is installed."""
    site = tmp_path_factory.mktemp("site")
    package = tmp_path_factory.mktemp("src") / "npy_layout"  # built from a copy: the build leaves nothing in the tree
    shutil.copytree(ROOT / "examples" / "npy_layout", package, ignore=shutil.ignore_patterns("__pycache__"))
    # offline: the build backend is the test environment's own (setuptools, in the test extra)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--no-build-isolation", "--target", str(site), str(package)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (site / "npy_layout" / "recipes" / "npy.toml").is_file()  # the recipe ships with the package
    return {**os.environ, "PYTHONPATH": str(site)}


def layoutkit(env: dict[str, str], *args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "layoutkit", *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_an_installed_layout_is_written_verified_and_advised_from_the_command_line(installed, tmp_path):
    src = write_sample(tmp_path / "shots.h5", shots=3, signals=3, seed=2).path
    listed = layoutkit(installed, "convert", "--help")
    assert listed.returncode == 0 and "npy" in listed.stdout
    wrote = layoutkit(installed, "convert", src, tmp_path / "out", "--layout", "npy")
    assert wrote.returncode == 0, wrote.stderr
    assert "as .npy files in" in " ".join(wrote.stdout.split()) and len(list((tmp_path / "out").glob("*.npy"))) > 5
    refused = layoutkit(installed, "convert", src, tmp_path / "other", "--layout", "npy", "--chunk-size", "8MiB")
    assert refused.returncode == 2 and "--chunk-size is not an option of the npy target" in " ".join(refused.stderr.split())
    assert "Traceback" not in refused.stderr and not (tmp_path / "other").exists()
    proved = layoutkit(installed, "verify", src, tmp_path / "out", "--patterns", "shot", "--sample", "1",
                       "--repeat", "1")
    assert proved.returncode == 0 and "the 1 variant holds exactly the data" in " ".join(proved.stdout.split())
    recipes = layoutkit(installed, "recipes")
    assert recipes.returncode == 0 and "npy" in recipes.stdout.split()  # its recipe beside layoutkit's own
    by_recipe = layoutkit(installed, "convert", src, tmp_path / "again", "--recipe", "npy")
    assert by_recipe.returncode == 0, by_recipe.stderr
    advised = layoutkit(installed, "advise", src, "--candidates", "npy,shot-major", "--patterns", "shot=1",
                        "--repeat", "1", "--budget", "2min", "--out", tmp_path / "advice", "--tmpdir", tmp_path)
    assert advised.returncode == 0, advised.stderr[-3000:]
    tried = {t["name"]: t["status"] for t in json.loads((tmp_path / "advice" / "results.json").read_text())["candidates"]}
    assert tried == {"npy": "measured", "shot-major": "measured"}


def test_the_conformance_suite_runs_over_an_installed_layout(installed, tmp_path):
    (tmp_path / "test_npy.py").write_text(
        "from layoutkit.testing import LayoutTests\n\n\n"
        "class TestNpy(LayoutTests):\n"
        "    layout = 'npy'  # by its registered name: found through the entry point\n"
        "    reads_like_source = False\n")
    # its own --basetemp: else that pytest, on its way out, deletes every older numbered
    # folder under /tmp/pytest-of-<user> (gigabytes of earlier runs' stores, file by file;
    # on CI that took past the timeout) beside the run it is part of
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--basetemp", str(tmp_path / "inner"), "test_npy.py"],
                         env=installed, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert " passed" in ran.stdout and "failed" not in ran.stdout
