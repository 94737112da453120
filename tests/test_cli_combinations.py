"""The CLI over combinations of its options, old spellings and bad values included: every
run ends in exit 0, or in exit 2 with one sentence (issue #51). Drawn with a fixed seed,
so a failure is found again by its test id."""

from __future__ import annotations

import random

import pytest
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.sample import write_sample

runner = CliRunner()

CONVERT = {
    "--layout": ["shot-major", "signal-major", "shot-packed", "virtual", "diagonal"],
    "--order": ["shot", "signal", "sideways"],
    "--zarr-format": ["2", "3", "4"],
    "--chunks": ["auto", "source", "1000", "0", "big"],
    "--chunk-size": ["1MiB", "4 parsecs"],
    "--compressor": ["zstd:3", "lz4", "source", "shuffle+gzip:4", "lz5"],
    "--shards": ["none", "auto", "8MiB", "many"],
    "--workers": ["1", "2", "0"],
    "--scheduler": ["threads", "serial", "nowhere"],
    "--memory-limit": ["256MiB", "lots"],
    "--template": ["/shots/{shot}/signals/{signal}", "/x/{shot}"],
    "--batch-files": ["0", "2", "-1"],
    "--concat-dim": ["time"],
}
CONVERT_FLAGS = ["--overwrite", "--skip-unsupported", "--dry-run", "--icechunk", "--append", "--no-consolidate"]
REORDER = {
    "--by": ["shot", "signal", "group", "diagonal"],
    "--page-size": ["auto", "8MiB", "1000"],
    "--compressor": ["gzip:4", "none", "lz4", "source", "lz5"],
    "--compress-threshold": ["8KiB", "huge"],
    "--chunks": ["source", "auto", "100", "x"],
    "--workers": ["1", "0"],
    "--memory-limit": ["256MiB", "lots"],
}
REORDER_FLAGS = ["--overwrite", "--skip-unsupported", "--dry-run", "--no-dedupe"]


def draws(seed: int, options: dict[str, list[str]], flags: list[str], n: int) -> list[list[str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        args: list[str] = []
        for option in rng.sample(sorted(options), rng.randint(0, 4)):
            args += [option, rng.choice(options[option])]
        args += rng.sample(flags, rng.randint(0, 2))
        out.append(args)
    return out


@pytest.fixture(scope="module")
def source(tmp_path_factory):  # noqa: ANN201
    return write_sample(tmp_path_factory.mktemp("combinations") / "shots.h5", shots=2, signals=2, seed=1).path


def assert_clean(result, args: list[str]) -> None:  # noqa: ANN001
    said = result.output
    assert "Traceback" not in said and result.exception is None or isinstance(result.exception, SystemExit), \
        (args, said, result.exception)
    assert result.exit_code in (0, 2), (args, result.exit_code, said)
    if result.exit_code == 2:
        errors = [line for line in said.splitlines() if line.startswith(("error:", "Error:"))]
        assert len(errors) == 1, (args, said)
        assert len(said.strip().splitlines()) <= 6, (args, said)  # one sentence, wrapped (click's usage lines too)


@pytest.mark.parametrize("args", draws(51, CONVERT, CONVERT_FLAGS, 48), ids=lambda a: " ".join(a) or "plain")
def test_convert(source, tmp_path, args):
    dst = tmp_path / "out.zarr"
    if "--append" in args:  # something to append to
        runner.invoke(app, ["-q", "convert", str(source), str(dst)])
    assert_clean(runner.invoke(app, ["convert", str(source), str(dst), *args]), args)


@pytest.mark.parametrize("args", draws(52, REORDER, REORDER_FLAGS, 24), ids=lambda a: " ".join(a) or "plain")
def test_reorder(source, tmp_path, args):
    assert_clean(runner.invoke(app, ["reorder", str(source), str(tmp_path / "out.h5"), *args]), args)
