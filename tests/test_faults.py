"""A fault campaign: a full disk, runs killed at several points, corrupted sources, and two
writers racing for one destination. Whatever happens: one sentence, a non-zero exit,
nothing half-written left visible, the source untouched."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pytest
import zarr

from layoutkit.verify.equality import compare_variant

LAYOUTKIT = [sys.executable, "-m", "layoutkit", "-q"]
RUN_TIMEOUT = 120  # a run that takes longer than this has hung


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(*args: object, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([*LAYOUTKIT, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def one_sentence(result: subprocess.CompletedProcess) -> str:
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0
    assert "Traceback" not in said, said
    assert said.startswith("error:") or "Error" not in said, said
    return said


@pytest.fixture(scope="module")
def big_sample(tmp_path_factory) -> Path:
    """A sample larger than the small disk below (about 60 MB of data)."""
    from layoutkit.sample import write_sample

    return Path(write_sample(tmp_path_factory.mktemp("big") / "shots.h5", shots=8, signals=70, seed=4).path)


# -- a full disk ------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path):
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"this test mounts a 20 MiB tmpfs and could not: {done.stderr.strip()} (run the tests as root)")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("command", [["convert"], ["convert", "--compressor", "none"], ["reorder", "--compressor", "none"]])
def test_a_full_disk_is_one_sentence_and_leaves_nothing(big_sample: Path, small_disk: Path, command: list[str]) -> None:
    before = digest(big_sample)
    dst = small_disk / ("out.h5" if command[0] == "reorder" else "out.zarr")
    result = run(command[0], big_sample, dst, *command[1:])
    said = one_sentence(result)
    assert "no space" in said.lower() and str(dst) in said, said
    assert list(small_disk.iterdir()) == []
    assert digest(big_sample) == before


# -- killed runs -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["convert", "reorder"])
def test_a_killed_run_leaves_no_destination_and_the_next_run_succeeds(big_sample: Path, tmp_path: Path,
                                                                      command: str) -> None:
    """Interrupted, terminated and killed at three points of the run each (early, in the
    middle, late): no destination appears, or a whole one when the run had published it
    before the signal came; never a partial one. The source is unchanged, and the same
    command then succeeds without --overwrite (it removes what an earlier run left).
    Interrupted or terminated, a run leaves nothing at all, its staging area included. One whole run, timed, places the signals for all three (a test per signal
    timed its own: 3.5 runs' time each, 21 in all, the slowest tests of the file)."""
    before = digest(big_sample)
    dst = tmp_path / ("out.h5" if command == "reorder" else "out.zarr")
    cmd = [*LAYOUTKIT, command, str(big_sample), str(dst), "--workers", "1"]
    start = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True, timeout=RUN_TIMEOUT)
    whole = time.monotonic() - start
    shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        for fraction in (0.15, 0.5, 0.85):
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(whole * fraction)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=RUN_TIMEOUT)
            where = f"{signal.Signals(sig).name} at {fraction:.0%}"
            assert "Traceback" not in out + err, where
            if dst.exists():  # it published first (and was killed on its way out): the destination is whole
                assert compare_variant(big_sample, dst) == [], f"{where}: a partial destination"
                shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
            assert digest(big_sample) == before, where
            if sig != signal.SIGKILL:  # it cleaned up after itself: no staging area left either
                assert list(tmp_path.iterdir()) == [], where
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert rerun.returncode == 0, rerun.stderr
    assert [p.name for p in tmp_path.iterdir()] == [dst.name]


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process still running (not gone, nor a zombie left to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads a process's children from /proc")
def test_ctrl_c_from_a_terminal_is_one_sentence_while_worker_processes_run(tmp_path: Path) -> None:
    """A terminal sends Ctrl-C to every process of the command: verify's proof reads a
    large source in spawned worker processes, and each printed its own KeyboardInterrupt
    traceback (or "Fatal Python error: init_import_site" while it started) above the
    command's sentence (issue 66: "interrupted" said more than once). Interrupted as its
    workers start and once they run: one line, exit 130, no process left behind."""
    src = tmp_path / "zeros.h5"
    with h5py.File(src, "w") as f:  # 320 MB of data (the proof's workers start from 256 MiB), a small file
        ds = f.create_dataset("z", shape=(40_000_000,), dtype="f8", chunks=(1 << 19,), compression="gzip")
        for start in range(0, ds.shape[0], 1 << 23):
            ds[start : start + (1 << 23)] = 0.0
    for wait_after_start in (0.0, 0.4):
        proc = subprocess.Popen([*LAYOUTKIT, "verify", str(src), str(src), "--patterns", "open"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + RUN_TIMEOUT
        while len(_children(proc.pid)) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the resource tracker and the first worker
        assert proc.poll() is None, "verify ended before its worker processes started"
        workers = _children(proc.pid)
        time.sleep(wait_after_start)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
        assert (proc.returncode, (out + err).strip().splitlines()) == (130, ["error: interrupted."]), (out, err)
        time.sleep(0.5)
        assert [w for w in workers if _running(w)] == [], "a worker outlived the command"


def test_an_interrupt_before_a_command_handles_it_is_still_one_sentence(monkeypatch, capsys) -> None:
    """Ctrl-C while a command imports what it needs (before its own handling) or in one
    that writes nothing: typer ended the process with 130 and not a word."""
    import layoutkit.__main__ as entry

    def interrupted(**_: object) -> None:
        raise SystemExit(130)  # what typer makes of a KeyboardInterrupt it catches

    monkeypatch.setattr(entry, "app", interrupted)
    monkeypatch.setattr(entry.State, "failed", False)
    with pytest.raises(SystemExit) as done:
        entry.main()
    assert done.value.code == 130
    assert " ".join(capsys.readouterr().err.split()) == "error: interrupted."


# -- corrupted sources -------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean_source(tmp_path_factory) -> Path:
    """Three datasets: gzip, zstd and uncompressed, a few chunks each."""
    path = tmp_path_factory.mktemp("corrupt") / "clean.h5"
    rng = np.random.default_rng(9)
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "corruption sweep"
        f.create_dataset("gzip", data=rng.normal(size=(400, 50)), chunks=(100, 50), compression="gzip")
        f.create_dataset("zstd", data=rng.normal(size=(400, 50)), chunks=(100, 50), **hdf5plugin.Zstd())
        f.create_dataset("plain", data=rng.normal(size=(400, 50)), chunks=(100, 50))
        f["plain"].attrs["units"] = "V"
    return path


def _converted_or_refused(src: Path, tmp_path: Path) -> str:
    """Convert ``src``: it refuses in one sentence, or writes what h5py reads from it."""
    dst = tmp_path / "out.zarr"
    before = digest(src)
    result = run("convert", src, dst)
    assert digest(src) == before
    if result.returncode != 0:
        one_sentence(result)
        assert not dst.exists() and [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []
        return "refused"
    with h5py.File(src, "r") as f:
        store = zarr.open_group(dst, mode="r")
        for name in f:
            np.testing.assert_array_equal(store[name][...], f[name][()])
    shutil.rmtree(dst)
    return "converted"


def test_a_truncated_source_is_refused_or_converted_faithfully(clean_source: Path, tmp_path: Path) -> None:
    size = clean_source.stat().st_size
    outcomes = []
    for cut in np.linspace(64, size - 1, 22).astype(int):
        src = tmp_path / f"cut-{cut}.h5"
        src.write_bytes(clean_source.read_bytes()[:cut])
        work = tmp_path / f"work-{cut}"
        work.mkdir()
        outcomes.append(_converted_or_refused(src, work))
    assert outcomes.count("refused") >= 20  # a file cut short is not HDF5 any more


def _chunk_offsets(path: Path, name: str) -> list[tuple[int, int]]:
    with h5py.File(path, "r") as f:
        ds = f[name]
        return [(ds.id.get_chunk_info(i).byte_offset, ds.id.get_chunk_info(i).size) for i in range(ds.id.get_num_chunks())]


@pytest.mark.parametrize("where", ["gzip", "zstd", "plain", "metadata"])
def test_a_flipped_byte_is_refused_or_converted_faithfully(clean_source: Path, tmp_path: Path, where: str) -> None:
    data = bytearray(clean_source.read_bytes())
    if where == "metadata":
        spots = [96, 300, 800, 1500]  # the superblock's neighbourhood: object headers, B-trees, heaps
    else:
        spots = [offset + size // 2 for offset, size in _chunk_offsets(clean_source, where)[:2]]
    for i, spot in enumerate(spots):
        bad = bytearray(data)
        bad[spot] ^= 0xFF
        src = tmp_path / f"flip-{i}.h5"
        src.write_bytes(bytes(bad))
        work = tmp_path / f"work-{i}"
        work.mkdir()
        outcome = _converted_or_refused(src, work)
        if where == "gzip":  # zlib's checksum finds it (a zstd frame has none: it may decode to other values,
            assert outcome == "refused"  # which are then what h5py reads too)


# -- two writers -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["convert", "reorder"])
def test_two_writers_one_wins_the_other_refuses(big_sample: Path, tmp_path: Path, command: str) -> None:
    dst = tmp_path / ("out.h5" if command == "reorder" else "out.zarr")
    results: list[subprocess.CompletedProcess] = []

    def write() -> None:
        results.append(run(command, big_sample, dst, "--workers", "1"))

    threads = [threading.Thread(target=write) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(r.returncode for r in results)
    assert codes[0] == 0 and codes[1] != 0, [r.stderr for r in results]
    loser = next(r for r in results if r.returncode != 0)
    said = one_sentence(loser)
    assert "exists" in said, said
    assert compare_variant(big_sample, dst) == []  # the winner's, whole: never a mix
    assert [p.name for p in tmp_path.iterdir()] == [dst.name]


def test_an_interrupt_swallowed_by_a_callback_is_kept_and_raised_at_the_next_step(capsys):
    """Python may run the signal handler inside a weakref or __del__ callback, where an
    exception is printed as "ignored" and dropped: the CLI keeps it instead."""
    import sys
    import types

    from layoutkit.cli import core as cli

    cli.Interrupted.flag = False
    cli._unraisable(types.SimpleNamespace(exc_type=KeyboardInterrupt, exc_value=KeyboardInterrupt(),
                                          exc_traceback=None, err_msg=None, object=None))
    assert cli.Interrupted.flag and capsys.readouterr().err == ""
    with pytest.raises(KeyboardInterrupt):
        cli.check_interrupted()
    cli.Interrupted.flag = False
    cli.check_interrupted()  # nothing pending: nothing raised
    assert sys.unraisablehook is not cli._unraisable  # installed only while a command runs


# -- an interrupt while writes are still in flight ----------------------------------------
#
# A signal handler runs in the main thread: what other threads were writing into the staged
# store (the skeleton's documents in the background, zarr's own event loop) goes on after
# the interrupt. The run must wait for them before it removes the staged store, or they put
# back folders it has just removed (a fresh clone's suite found one after a SIGTERM).


def _after_background_writes() -> None:
    """Wait until every writing thread this process started has ended, so what the test
    then sees in the folder is what stays there."""
    for thread in threading.enumerate():
        if thread.name.startswith("layoutkit-skeleton"):
            thread.join(timeout=30)
    time.sleep(0.5)  # zarr's loop: a write it still held would land within this


@pytest.fixture(scope="module")
def small_sample(tmp_path_factory) -> Path:
    from layoutkit.sample import write_sample

    return Path(write_sample(tmp_path_factory.mktemp("small") / "shots.h5", shots=3, signals=20, seed=5).path)


def test_an_interrupt_while_the_skeleton_is_written_leaves_nothing(small_sample: Path, tmp_path: Path,
                                                                   monkeypatch) -> None:
    """The interrupt comes after the layout has begun writing its skeleton in the background
    and before its first task (as the store's log entry is written)."""
    import layoutkit
    from layoutkit.storage.kv import FolderKV
    from layoutkit.storage.log import entry_key
    from layoutkit.writers.zarr_ import ZarrWriter

    slow_node = ZarrWriter._write_node

    def write_node(self, node, docs):  # noqa: ANN001, ANN202
        time.sleep(0.005)
        return slow_node(self, node, docs)

    put = FolderKV.put

    def interrupted_put(self, key, data):  # noqa: ANN001, ANN202
        if key == entry_key(0):
            raise KeyboardInterrupt
        return put(self, key, data)

    monkeypatch.setattr(ZarrWriter, "_write_node", write_node)
    monkeypatch.setattr(FolderKV, "put", interrupted_put)
    with pytest.raises(KeyboardInterrupt):
        layoutkit.convert(small_sample, tmp_path / "out.zarr", workers=1)
    _after_background_writes()
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_while_zarr_writes_leaves_nothing(small_sample: Path, tmp_path: Path, monkeypatch) -> None:
    """The interrupt comes while zarr's event loop holds a write of the run (its thread
    writes on after the main thread is interrupted)."""
    import asyncio

    import zarr.core.sync
    import zarr.storage

    import layoutkit
    from layoutkit.writers import zarr_ as writer

    set_ = zarr.storage.LocalStore.set

    async def slow_set(self, key, value):  # noqa: ANN001, ANN202
        await asyncio.sleep(0.2)
        return await set_(self, key, value)

    def interrupted_sync(coro, *args, **kwargs):  # noqa: ANN001, ANN202
        if coro.__qualname__.endswith("write_all"):
            asyncio.run_coroutine_threadsafe(coro, zarr.core.sync._get_loop())
            raise KeyboardInterrupt  # as a signal does while the main thread waits for the loop
        return zarr.core.sync.sync(coro, *args, **kwargs)

    monkeypatch.setattr(zarr.storage.LocalStore, "set", slow_set)
    monkeypatch.setattr(writer._ChunkEncoder, "from_metadata", classmethod(lambda cls, *a: None))
    monkeypatch.setattr(writer, "sync", interrupted_sync)
    with pytest.raises(KeyboardInterrupt):
        layoutkit.convert(small_sample, tmp_path / "out.zarr", workers=1)
    _after_background_writes()
    assert list(tmp_path.iterdir()) == []
