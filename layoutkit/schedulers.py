"""Run the tasks of a plan: serially, on threads, or on a dask.distributed cluster.

All three engines share one contract: call ``fn(job, task)`` for every task, keep at
most ``window`` tasks in flight (which is what bounds memory), report each finished
task's bytes to ``progress`` and re-raise the first error. ``fn`` must be a module-level
function so that dask can ship it to worker processes, each of which opens the source
and the destination itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from layoutkit.errors import InvalidOptionError  # noqa: F401 - raised by the engines' callers' checks
from layoutkit.options import parse_scheduler  # noqa: F401 - the engines' names, parsed with the options

TaskFn = Callable[[Any, Any], int]


def run_serial(fn: TaskFn, job: Any, tasks: Sequence[Any], progress: Callable[[int], None]) -> None:
    for task in tasks:
        progress(fn(job, task))


def run_threads(
    fn: TaskFn, job: Any, tasks: Sequence[Any], workers: int, progress: Callable[[int], None]
) -> None:
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="layoutkit") as pool:
        pending: set[Future[int]] = set()
        try:
            for task in tasks:
                if len(pending) >= workers:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in done:
                        progress(fut.result())
                pending.add(pool.submit(fn, job, task))
            for fut in _as_done(pending):
                progress(fut.result())
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise


def _as_done(pending: Iterable[Future[int]]) -> Iterable[Future[int]]:
    pending = set(pending)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        yield from done


@contextlib.contextmanager
def cluster_client(workers: int, address: str | None = None) -> Iterator[Any]:
    """A dask.distributed client: of a LocalCluster of ``workers`` single-threaded
    processes, or of the scheduler at ``address``; closed (with the cluster) after."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - distributed is a dependency
        raise InvalidOptionError(
            "The processes and distributed schedulers need dask.distributed: "
            "pip install 'dask[distributed]'."
        ) from None

    cluster = None
    if address is None:
        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
        client = Client(cluster)
    else:
        client = Client(address)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_distributed(
    fn: TaskFn,
    job: Any,
    tasks: Sequence[Any],
    workers: int,
    progress: Callable[[int], None],
    address: str | None = None,
    cleanup: Callable[[], None] | None = None,
) -> None:
    """Run on a dask.distributed cluster: a LocalCluster of ``workers`` processes, or
    the scheduler at ``address``. At most two tasks per worker are in flight."""
    from distributed import as_completed

    with cluster_client(workers, address) as client:
        nworkers = max(1, len(client.scheduler_info().get("workers", {})) or workers)
        window = 2 * nworkers
        job_future = client.scatter(job, broadcast=True)
        queue = list(tasks)
        running = as_completed()
        for task in queue[:window]:
            running.add(client.submit(fn, job_future, task, pure=False))
        next_index = window
        for fut in running:
            progress(fut.result())
            if next_index < len(queue):
                running.add(client.submit(fn, job_future, queue[next_index], pure=False))
                next_index += 1
        from layoutkit.storage.retry import RETRIES, retry_counts

        for counts in client.run(retry_counts).values():  # the workers' retries, counted here
            RETRIES.merge(counts)
        if cleanup is not None:
            client.run(cleanup)


def file_mapper(scheduler: str, workers: int) -> Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]] | None:
    """For a dask cluster (``scheduler``: ``processes``, a LocalCluster of ``workers``; or
    an address), a function mapping ``fn`` over items on its workers, results in the
    items' order, the first error raised here (the files of a set walked where the work
    runs: :func:`layoutkit.hdf5.combined.walk_sources`); None for threads and serial."""
    if scheduler in ("threads", "serial"):
        return None

    def map_on_cluster(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        with cluster_client(workers, None if scheduler == "processes" else scheduler) as client:
            return client.gather(client.map(fn, list(items), pure=False))

    return map_on_cluster


def run_tasks(
    fn: TaskFn,
    job: Any,
    tasks: Sequence[Any],
    *,
    scheduler: str = "threads",
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
    cleanup: Callable[[], None] | None = None,
) -> None:
    """Run ``fn(job, task)`` for every task on the chosen engine.

    Parameters
    ----------
    scheduler
        ``serial``, ``threads``, ``processes`` (a local dask.distributed cluster of
        ``workers`` processes) or a scheduler address.
    cleanup
        Called in every worker process after the last task (closes cached files).
    """
    report = progress or (lambda n: None)
    if scheduler == "serial" or (scheduler == "threads" and workers == 1):
        run_serial(fn, job, tasks, report)
    elif scheduler == "threads":
        run_threads(fn, job, tasks, workers, report)
    elif scheduler == "processes":
        run_distributed(fn, job, tasks, workers, report, cleanup=cleanup)
    else:
        run_distributed(fn, job, tasks, workers, report, address=scheduler, cleanup=cleanup)
    if cleanup is not None:
        cleanup()


def map_ordered(
    fn: Callable[[Any], Any], items: Iterable[Any], workers: int, window: int | None = None
) -> Iterable[Any]:
    """Yield ``fn(item)`` for every item, in the items' order, computed on ``workers``
    threads with at most ``window`` results pending (which bounds memory).

    For pipelines whose last stage must run in order on one thread (HDF5 writes: h5py
    holds one lock and the byte order in the file is the order of the writes) while the
    expensive stage (decoding, compressing) runs in parallel.
    """
    window = window or 2 * workers
    if workers <= 1:
        yield from map(fn, items)
        return
    from collections import deque

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="layoutkit-ordered") as pool:
        pending: deque[Future[Any]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= window:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for fut in pending:
                fut.cancel()
