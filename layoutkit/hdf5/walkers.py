"""Processes that read parts of one HDF5 file at once.

h5py holds one lock for every call into HDF5, so a walk over many datasets (their
creation properties, types, chunk indexes, attributes) runs on one core however many
threads ask. :class:`Walkers` shares such a walk out to spawned processes, each with its
own HDF5 library and its own open file, as convert's inventory and ``inspect`` do for
files with many datasets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _started() -> None:
    """A worker's first task: it has imported what it needs, and is ready."""


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
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if self.pool is None:
            self.pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
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


__all__ = ["Walkers"]
