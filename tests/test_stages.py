"""Where a run's time goes (``layoutkit --timings``): the pipeline's steps, and the work
inside them by kind, summed over threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.convert import ConvertOptions, convert
from layoutkit.reorder import ReorderOptions, reorder
from layoutkit.stages import KINDS, Stages, timed


def test_work_is_counted_per_step_and_summed_over_threads() -> None:
    stages = Stages()
    with timed("read"):  # no run is timed: nothing is counted
        time.sleep(0.01)
    with stages.active():
        with stages.step("first"):
            with timed("read"):
                time.sleep(0.02)
        with stages.step("second"):

            def encode() -> None:
                with timed("encode"):
                    time.sleep(0.05)

            threads = [threading.Thread(target=encode) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert set(stages.steps) == {"first", "second"}
    assert stages.work["first"] == {"read": stages.work["first"]["read"]}
    assert 0.02 <= stages.work["first"]["read"] <= stages.steps["first"]
    # two threads at once: their work adds up to about twice the step's wall time
    assert stages.work["second"]["encode"] >= 0.1
    assert stages.steps["second"] < 0.75 * stages.work["second"]["encode"]
    with timed("read"):  # the run is over
        time.sleep(0.01)
    assert stages.work["first"]["read"] < stages.steps["first"] + 0.005


def test_a_run_started_while_another_is_timed_does_not_take_its_work() -> None:
    outer, inner = Stages(), Stages()
    with outer.active(), outer.step("tasks"):
        with inner.active(), inner.step("tasks"):
            with timed("write"):
                time.sleep(0.01)
    assert outer.work["tasks"]["write"] >= 0.01
    assert inner.work == {}
    assert inner.steps["tasks"] >= 0.01


def _work_within_workers(stages: Stages, step: str, workers: int) -> None:
    # nothing counted twice: at most every worker busy for the whole step (and the
    # calling thread, which writes reorder's chunks in order)
    assert sum(stages.work[step].values()) <= (workers + 1) * stages.steps[step] + 0.01, stages


def test_convert_times_every_step_and_the_work_inside(shot_file: Path, tmp_path: Path) -> None:
    stages = Stages()
    convert(shot_file, tmp_path / "out.zarr", ConvertOptions(workers=2), stages=stages)
    assert list(stages.steps) == ["inventory", "plan", "skeleton", "tasks", "finish", "close", "publish"]
    tasks = stages.work["tasks"]
    for kind in ("read", "decode", "encode", "write"):  # the sample's datasets are deflated
        assert tasks.get(kind, 0) > 0, (kind, tasks)
    assert stages.work["skeleton"]["write"] > 0  # the metadata documents
    assert "encode" not in stages.work["skeleton"]
    _work_within_workers(stages, "tasks", 2)
    assert set(tasks) <= set(KINDS)


def test_reorder_times_every_step_and_the_work_inside(shot_file: Path, tmp_path: Path) -> None:
    stages = Stages()
    reorder(shot_file, tmp_path / "out.h5", ReorderOptions(by="signal", workers=2), stages=stages)
    assert list(stages.steps) == ["inventory", "scales", "plan", "skeleton", "tasks", "finish", "close", "publish"]
    tasks = stages.work["tasks"]
    for kind in ("read", "decode", "encode", "write"):
        assert tasks.get(kind, 0) > 0, (kind, tasks)
    _work_within_workers(stages, "tasks", 2)


def test_timings_flag_prints_the_table_even_when_quiet(shot_file: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["-q", "--timings", "convert", str(shot_file), str(tmp_path / "a.zarr")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("where the time went")
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert list(rows) == ["inventory", "plan", "skeleton", "tasks", "finish", "close", "publish", "total"]
    assert "encode" in rows["tasks"] and "write" in rows["tasks"]
    seconds = {name: float(row[0]) for name, row in rows.items()}
    assert abs(seconds["total"] - sum(v for k, v in seconds.items() if k != "total")) < 0.05
    quiet = runner.invoke(app, ["-q", "convert", str(shot_file), str(tmp_path / "b.zarr")])
    assert quiet.exit_code == 0 and quiet.output == ""
