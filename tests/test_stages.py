"""Where a run's time goes (``layoutkit --timings``): the pipeline's steps, and the work
inside them by kind, summed over threads."""

from __future__ import annotations

import importlib
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.convert import ConvertOptions, convert
from layoutkit.reorder import ReorderOptions, reorder
from layoutkit.timings import KINDS, Stages, timed

stages_module = importlib.import_module("layoutkit.timings")


class Clock:
    """Clocks the test moves by hand, in place of ``perf_counter`` (``now``) and
    ``thread_time`` (``cpu``: moved only while the "threads" compute)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.cpu = 0.0


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(stages_module, "perf_counter", lambda: clock.now)
    monkeypatch.setattr(stages_module, "thread_time", lambda: clock.cpu)
    return clock


def test_work_is_counted_per_step_and_summed_over_threads(clock: Clock) -> None:
    stages = Stages()
    with timed("read"):  # no run is timed: nothing is counted
        clock.now += 1
    with stages.active():
        with stages.step("first"):
            with timed("read"):
                clock.now += 2
            clock.now += 1  # untimed work between timed calls
        with stages.step("second"):
            # two workers encoding at once, as two threads would: entered, then left together
            first, second = timed("encode"), timed("encode")
            first.__enter__()
            second.__enter__()
            clock.now += 5
            clock.cpu += 4  # computing (a thread's CPU clock is its own: both see it move)
            first.__exit__(None, None, None)
            second.__exit__(None, None, None)
            with timed("write"):
                clock.now += 1
    assert stages.steps == {"first": 3.0, "second": 6.0}
    assert stages.work == {"first": {"read": 2.0}, "second": {"encode": 10.0, "write": 1.0}}
    assert stages.cpu == {"first": {"read": 0.0}, "second": {"encode": 8.0, "write": 0.0}}
    assert stages.total() == 9.0
    with timed("read"):  # the run is over
        clock.now += 1
    assert stages.work["first"] == {"read": 2.0}
    table = stages.lines()
    assert table[1].split() == ["second", "6.00", "encode", "10.00", "(8.00)", "write", "1.00", "(0.00)"]
    assert table[2].split() == ["total", "9.00"]


def test_a_run_started_while_another_is_timed_does_not_take_its_work(clock: Clock) -> None:
    outer, inner = Stages(), Stages()
    with outer.active(), outer.step("tasks"):
        with inner.active(), inner.step("tasks"):
            with timed("write"):
                clock.now += 1
    assert outer.work == {"tasks": {"write": 1.0}}
    assert inner.work == {}
    assert inner.steps == {"tasks": 1.0}


def test_threads_add_their_work_to_the_step_they_run_in(clock: Clock) -> None:
    stages = Stages()
    inside, moved = threading.Barrier(3), threading.Barrier(3)

    def decode() -> None:
        with timed("decode"):
            inside.wait()  # both workers are in their timed block
            moved.wait()  # and the clock has moved by 4 meanwhile

    with stages.active(), stages.step("tasks"):
        workers = [threading.Thread(target=decode) for _ in range(2)]
        for w in workers:
            w.start()
        inside.wait()
        clock.now += 4
        moved.wait()
        for w in workers:
            w.join()
    assert stages.steps == {"tasks": 4.0}
    assert stages.work == {"tasks": {"decode": 8.0}}


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
    for kind, seconds in tasks.items():  # a thread's CPU time in a block is at most its time there
        assert 0 <= stages.cpu["tasks"][kind] <= seconds + 0.01, kind


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


def test_the_summary_gives_the_time_timings_totals(shot_file: Path, tmp_path: Path) -> None:
    """The summary's seconds are the run's steps, reading and planning the sources
    included, as --timings totals them (the summary said 1.4 s where --timings said
    1.96 s: it left the inventory out; issue 66)."""
    import re

    stages = Stages()
    summary = convert(shot_file, tmp_path / "a.zarr", stages=stages)
    assert summary.seconds == stages.total() and stages.steps["inventory"] > 0
    stages = Stages()
    reordered = reorder(shot_file, tmp_path / "a.h5", ReorderOptions(by="shot"), stages=stages)
    assert reordered.seconds == stages.total()
    result = CliRunner().invoke(app, ["--timings", "convert", str(shot_file), str(tmp_path / "b.zarr")])
    text = " ".join(result.output.split())
    total, said = re.search(r"total ([\d.]+)", text), re.search(r"the source's size, ([\d.]+) s", text)
    assert total and said and abs(float(total.group(1)) - float(said.group(1))) <= 0.06, text
