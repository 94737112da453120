"""Where a run's time goes: the wall time of each step of the pipeline, and the thread
time of the work inside it.

The pipeline (:mod:`layoutkit.pipeline`) times its steps (inventory, scales, plan,
skeleton, tasks, finish, publish) on a :class:`Stages`. Inside them, the code that does
the work wraps it in :func:`timed`, by kind:

=======  ==============================================================================
read     stored bytes from the source (``pread``, ranged GETs)
index    a dataset's chunk index, through h5py or layoutkit's B-tree reader
h5py     datasets read or written through h5py's data path (HDF5 decodes or encodes
         them itself: strings, references, filters layoutkit does not decode)
decode   decompressing and unfiltering chunks
encode   compressing chunks (and packing shards)
write    the destination: files and folders, objects in a bucket, direct chunk writes
zarr     arrays written through zarr-python, which encodes and stores them itself
         (strings, and what layoutkit does not encode)
=======  ==============================================================================

Work of several threads adds up, so a step's kinds can sum to more than its wall time
(``tasks`` with 2 workers: up to twice). Each kind also has the CPU seconds its threads
spent in it: with more threads than cores (16 for a source in a bucket, whose requests
wait on the network) a thread's time in ``encode`` includes waiting for a core, its CPU
time does not. Only work done in this process is counted: with ``--scheduler
processes`` or a cluster, the tasks' work is the workers'.

``layoutkit --timings convert ...`` prints the table; the benchmarks show it for every
run they time.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from time import perf_counter, thread_time
from typing import Any

KINDS = ("read", "index", "check", "h5py", "decode", "encode", "write", "zarr")

_active: Stages | None = None
"""The run whose work :func:`timed` counts (one at a time per process)."""
_active_lock = threading.Lock()
_NOTHING = contextlib.nullcontext()


@dataclass
class Stages:
    """Seconds per pipeline step (wall), and per kind of work inside each step: the
    threads' time in it (``work``) and their CPU time (``cpu``)."""

    steps: dict[str, float] = field(default_factory=dict)
    work: dict[str, dict[str, float]] = field(default_factory=dict)
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    _step: str = field(default="other", init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time one step of the run; the work :func:`timed` counts meanwhile is its."""
        previous, self._step = self._step, name
        start = perf_counter()
        try:
            yield
        finally:
            self.steps[name] = self.steps.get(name, 0.0) + perf_counter() - start
            self._step = previous

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Count the work of this process for this run (unless another run already is)."""
        global _active
        with _active_lock:
            mine = _active is None
            if mine:
                _active = self
        try:
            yield
        finally:
            if mine:
                with _active_lock:
                    _active = None

    def add(self, kind: str, seconds: float, cpu: float = 0.0) -> None:
        with self._lock:
            kinds = self.work.setdefault(self._step, {})
            kinds[kind] = kinds.get(kind, 0.0) + seconds
            cpus = self.cpu.setdefault(self._step, {})
            cpus[kind] = cpus.get(kind, 0.0) + cpu

    def total(self) -> float:
        return sum(self.steps.values())

    def as_dict(self) -> dict[str, Any]:
        return {"steps": dict(self.steps), "work": {k: dict(v) for k, v in self.work.items()},
                "cpu": {k: dict(v) for k, v in self.cpu.items()}}

    def lines(self) -> list[str]:
        """The table ``--timings`` prints: a line per step, its wall seconds, then the
        thread seconds of each kind of work inside it, with their CPU seconds in brackets."""
        width = max([len(s) for s in self.steps] + [5])
        out = []
        for name, seconds in [*self.steps.items(), ("total", self.total())]:
            kinds, cpus = self.work.get(name, {}), self.cpu.get(name, {})
            inside = "  ".join(f"{k} {kinds[k]:.2f} ({cpus.get(k, 0.0):.2f})" for k in KINDS if kinds.get(k, 0.0) > 0)
            out.append(f"  {name:<{width}} {seconds:8.2f}   {inside}".rstrip())
        return out


class _Timer:
    __slots__ = ("cpu", "kind", "stages", "start")

    def __init__(self, kind: str, stages: Stages) -> None:
        self.kind, self.stages = kind, stages

    def __enter__(self) -> None:
        self.start, self.cpu = perf_counter(), thread_time()

    def __exit__(self, *exc: object) -> None:
        self.stages.add(self.kind, perf_counter() - self.start, thread_time() - self.cpu)


def timed(kind: str) -> contextlib.AbstractContextManager[None]:
    """``with timed("encode"): ...`` adds the block's time to the running run's
    :class:`Stages` under ``kind`` (one of :data:`KINDS`); nothing when no run is timed."""
    stages = _active
    return _NOTHING if stages is None else _Timer(kind, stages)


__all__ = ["KINDS", "Stages", "timed"]
