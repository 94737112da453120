"""Run a command with the recorder in each of its Python processes, and gather what they read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from layoutkit.errors import InvalidOptionError, LayoutkitError, OutputExistsError
from layoutkit.storage.local import check_report_folder
from layoutkit.trace.recorder import DIR_ENV, START_ENV
from layoutkit.trace.workload import Workload, merge

# Placed first on the traced command's PYTHONPATH: every Python process it starts (and
# theirs: they inherit the environment) loads the recorder from this layoutkit's file (it
# needs the standard library alone, so the command's Python need not have layoutkit, or
# this version of it), installs it, then runs the sitecustomize this one hides, if any.
BOOTSTRAP = '''\
import os
import sys

if os.environ.get("{dir_env}"):
    import importlib.util as _util

    _spec = _util.spec_from_file_location("layoutkit_trace_recorder", {recorder!r})
    _recorder = _util.module_from_spec(_spec)
    sys.modules["layoutkit_trace_recorder"] = _recorder
    _spec.loader.exec_module(_recorder)
    _recorder.install(os.environ["{dir_env}"])

_here = os.path.dirname(os.path.abspath(__file__))
_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
import importlib.machinery as _machinery

_spec = _machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(sys.modules[__name__])
'''


class CommandNotFoundError(LayoutkitError, FileNotFoundError):
    """The command to trace does not exist."""


def trace(command: Sequence[str], out: str | os.PathLike, *, overwrite: bool = False, syscalls: bool = False) -> Workload:
    """Run ``command`` and write what its Python processes read to ``out``; with
    ``syscalls``, what any program read from HDF5 files, from its system calls
    (:mod:`layoutkit.trace.syscalls`).

    Parameters
    ----------
    command
        The program and its arguments (``["python", "analysis.py"]``).
    out
        The workload file to write (:mod:`layoutkit.trace.workload`).
    overwrite
        Replace ``out`` if it exists.
    syscalls
        Trace the command's system calls (strace) instead of its Python readers: for
        programs that read HDF5 through the C library (netCDF-C, C, Fortran, IDL).

    Returns
    -------
    Workload
        What was read; its ``exit_code`` is the command's.

    Raises
    ------
    CommandNotFoundError
        When the program cannot be found.
    StraceMissingError
        With ``syscalls``, when strace is not installed.
    OutputExistsError
        When ``out`` exists and ``overwrite`` is false.
    """
    out = Path(out)
    _check(command, out, overwrite)
    work = Path(tempfile.mkdtemp(prefix="layoutkit-trace-"))
    try:
        start = time.time()
        if syscalls:  # the system calls alone, no recorder: h5py's reads would be counted twice
            from layoutkit.trace.syscalls import file_reads, map_reads, run_traced

            code = run_traced(command, work / "strace.log", dict(os.environ))
            found, unmapped = map_reads(file_reads(work / "strace.log", start))
            workload = Workload(list(command), time.time() - start, merge(found), code, unmapped)
        else:
            code, records = _run_recorded(command, work, start)
            workload = Workload(list(command), time.time() - start, merge(records), code)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.partial")
        workload.write(partial)
        os.replace(partial, out)
        return workload
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_recorded(command: Sequence[str], work: Path, start: float) -> tuple[int, list[dict[str, Any]]]:
    """Run ``command`` with the recorder installed in its Python processes: its exit
    code and every process's records."""
    boot, records = work / "boot", work / "records"
    boot.mkdir()
    records.mkdir()
    recorder = str(Path(__file__).resolve().with_name("recorder.py"))
    (boot / "sitecustomize.py").write_text(BOOTSTRAP.format(dir_env=DIR_ENV, recorder=recorder))
    env = dict(os.environ, **{DIR_ENV: str(records), START_ENV: repr(start)})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(boot), os.environ.get("PYTHONPATH", "")) if p)
    try:
        code = subprocess.run(list(command), env=env, check=False).returncode
    except FileNotFoundError:
        raise CommandNotFoundError(f"{command[0]} was not found: give the program to trace after --.") from None
    return code, _records(records)


def _check(command: Sequence[str], out: Path, overwrite: bool) -> None:
    if not command:
        raise InvalidOptionError("Expected a command to trace after --, such as: layoutkit trace -- python analysis.py.")
    if out.exists() and not overwrite:
        raise OutputExistsError(f"{out} exists: give another --out, or --overwrite to replace it.")
    check_report_folder(out.resolve().parent, "--out's folder", "the workload")
    if shutil.which(command[0]) is None:
        raise CommandNotFoundError(f"{command[0]} was not found: give the program to trace after --.")


def _records(folder: Path) -> list[dict[str, Any]]:
    lines = []
    for part in sorted(folder.glob("*.jsonl")):
        for line in part.read_text().splitlines():
            if line.endswith("}"):  # a process killed while writing leaves its last line whole or not at all
                lines.append(json.loads(line))
    return lines


__all__ = ["CommandNotFoundError", "trace"]
