"""Processes that read parts of one HDF5 file at once.

h5py holds one lock for every call into HDF5, so a walk over many datasets (their
creation properties, types, chunk indexes, attributes) runs on one core however many
threads ask. :class:`Walkers` shares such a walk out to spawned processes, each with its
own HDF5 library and its own open file, as convert's inventory and ``inspect`` do for
files with many datasets.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any


def _started() -> None:
    """A worker's first task: it has imported what it needs, and is ready."""


class _DeafProcess(SpawnProcess):
    """A spawned process that never sees Ctrl-C: it starts with SIGINT blocked, which the
    new interpreter inherits from the thread that starts it (across exec) and keeps.

    A terminal sends Ctrl-C to every process of the command, workers included, and each
    worker printed its own ``KeyboardInterrupt`` traceback (or, caught while starting,
    ``Fatal Python error: init_import_site``) above the command's one sentence. The
    command owns the interrupt: it stops, shuts its pool down and removes what it wrote;
    a worker finishes the task in hand and is told to stop."""

    def start(self) -> None:
        if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
            return super().start()
        before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            super().start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


class _DeafContext(SpawnContext):
    Process = _DeafProcess


class _Pool(ProcessPoolExecutor):
    """A pool whose ``submit`` is never cut in half by Ctrl-C. The first submits start the
    processes, then the thread that will stop them; an interrupt between the two left
    the started processes with no one to stop or wait for them, and the command's exit
    removed what they were still reading their start from ("FileNotFoundError" in a
    worker, printed under the command's sentence). In the main thread (where Python runs
    signal handlers) an interrupt during a submit is held, and raised once it returns."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if threading.current_thread() is not threading.main_thread():
            return super().submit(fn, *args, **kwargs)
        held: list[tuple[int, Any]] = []
        before: dict[int, Any] = {s: signal.signal(s, lambda signum, frame: held.append((signum, frame)))
                  for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            return super().submit(fn, *args, **kwargs)
        finally:
            for s, handler in before.items():
                signal.signal(s, handler)
            for signum, frame in held[:1]:  # the command's own handler, as if it came now
                handler = before[signum]
                if callable(handler):
                    handler(signum, frame)
                elif handler == signal.SIG_DFL and signum == signal.SIGINT:
                    raise KeyboardInterrupt


def spawn_pool(workers: int, initializer: Callable[..., None] | None = None,
               initargs: tuple[Any, ...] = ()) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes (:class:`_DeafProcess`, :class:`_Pool`):
    the one way layoutkit starts processes of its own (dask starts the rest)."""
    return _Pool(workers, mp_context=_DeafContext(), initializer=initializer, initargs=initargs)


class Walkers:
    """Spawned processes (not forked: the parent holds the file open in HDF5, which is
    not fork-safe). :meth:`start` may be called early, as soon as the caller knows the
    file is large enough, so that the processes' start (a second of imports each, on
    2-core machines) overlaps the rest of its own walk; :meth:`map` starts them if not.

    Parameters
    ----------
    workers
        How many processes.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool: Any = None

    def start(self) -> None:
        if self.pool is None:
            self.pool = spawn_pool(self.workers)
            for _ in range(self.workers):  # one process is spawned per task while none is idle
                self.pool.submit(_started)

    def map(self, fn: Callable[..., list[Any]], source: str, items: list[Any], *args: Any,
            done: Callable[[int], None] | None = None) -> list[Any]:
        """``fn(source, part, *args)`` over consecutive parts of ``items`` (four per
        worker, so that a slow part does not leave the others idle), in the processes;
        the lists it returns, joined in the order of ``items``. ``done(n)`` is called
        as each part of ``n`` items comes back (for a progress bar)."""
        from concurrent.futures import as_completed

        self.start()
        step = max(1, -(-len(items) // (self.workers * 4)))
        parts = [items[i : i + step] for i in range(0, len(items), step)]
        futures = {self.pool.submit(fn, source, part, *args): len(part) for part in parts}
        for future in as_completed(futures):
            future.result()  # the first failure ends the map
            if done is not None:
                done(futures[future])
        return [r for future in futures for r in future.result()]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


__all__ = ["Walkers", "spawn_pool"]
