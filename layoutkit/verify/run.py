"""Run the read patterns on every variant under every condition, and time them.

A *condition* is one point of the sweep: engine, workers, HDF5 page buffer, cache
state, simulated latency and bandwidth. For each variant x pattern x condition the plan
of reads is dealt evenly to the workers; each worker opens the variant itself (through
:func:`layoutkit.open`, so every read is counted), performs its share and reports
requests, bytes and page-buffer statistics; thread workers reading an HDF5 variant share
one open file instead (:func:`read_shared`). The wall time from handing out the shares
to the last result is one repetition; ``repeat`` repetitions give the median and the
spread.

Engines: ``serial`` (one worker, in this process), ``threads`` (a thread per worker),
``processes`` (a ``dask.distributed.LocalCluster`` of single-threaded worker
processes) and ``distributed`` (the cluster at ``--scheduler``, or such a LocalCluster
when none is given). Clusters are started once per worker count, before timing.
"""

from __future__ import annotations

import gc
import itertools
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from layoutkit.archive import open_archive
from layoutkit.errors import InvalidOptionError
from layoutkit.hdf5.files import first_line
from layoutkit.memory import peak_rss, release_freed_memory, reset_peak_rss
from layoutkit.readers.combined import expand_sources, is_source_set
from layoutkit.storage import ObjectSource, as_source, is_url
from layoutkit.storage.counting import LatencyModel
from layoutkit.verify.patterns import ReadPlan, run_reads, split

ENGINES = ("serial", "threads", "processes", "distributed")
MAX_REPEAT_FACTOR = 5  # measure(min_seconds=...): at most this many times the repetitions asked for
ROW_SECONDS = 3.0
"""A row stops repeating once its runs add up to this many seconds (at least one run):
a read of seconds varies by a few percent from run to run, and repeating it is what made
verify's sweep of a 64 MB sample at 10 ms take a quarter of an hour."""
CACHES = ("cold", "warm")


# -- conditions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """One point of the sweep. ``page_buffer`` is None where it does not apply."""

    engine: str
    workers: int
    page_buffer: int | None
    cache: str
    latency: float
    bandwidth: float

    @property
    def model(self) -> LatencyModel | None:
        return LatencyModel(self.latency, self.bandwidth) if self.latency or self.bandwidth else None


def conditions_for(
    archive_kind: str,
    engines: Sequence[str],
    workers: Sequence[int],
    page_buffers: Sequence[int],
    caches: Sequence[str],
    latencies: Sequence[float],
    bandwidths: Sequence[float],
) -> list[Condition]:
    """The sweep for one variant. ``archive_kind`` is "hdf5-paged", "hdf5" or "zarr":
    page buffers apply to paged HDF5 only, and ``serial`` runs one worker."""
    buffers: Sequence[int | None] = (
        page_buffers if archive_kind == "hdf5-paged" else (0,) if archive_kind == "hdf5" else (None,)
    )
    out = []
    for engine, w, pb, cache, lat, bw in itertools.product(engines, workers, buffers, caches, latencies, bandwidths):
        c = Condition(engine, 1 if engine == "serial" else w, pb, cache, lat, bw)
        if c not in out:
            out.append(c)
    return out


# -- engines ------------------------------------------------------------------------------


READ_ERRORS = (OSError, ValueError, RuntimeError, KeyError)  # a damaged variant's: reported in its row, not raised


def _read_counted(
    path: str, template: str, latency: float, bandwidth: float, page_buffer: int,
    storage: tuple[tuple[str, str], ...], read: Callable[[Any], int],
) -> dict[str, Any]:
    """Open the variant, ``read(archive)`` (the logical bytes), report the counts."""
    model = LatencyModel(latency, bandwidth) if latency or bandwidth else None
    with open_archive(path, template=template, model=model, page_buffer=page_buffer,
                      storage_options=dict(storage)) as archive:
        error = None
        try:
            logical = read(archive)
        except READ_ERRORS as exc:
            # a damaged variant: the row says what failed instead of a time
            logical, error = 0, f"{type(exc).__name__}: {first_line(exc)}"
        return {
            "requests": archive.counter.requests,
            "bytes": archive.counter.bytes,
            "logical": logical,
            "page_buffer": archive.page_buffer_stats(),
            "error": error,
        }


def read_share(
    path: str, template: str, pattern: str, items: list[Any], latency: float, bandwidth: float, page_buffer: int,
    storage: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """One worker's part of a run: open the variant, read, report the counts."""
    return _read_counted(path, template, latency, bandwidth, page_buffer, storage,
                         lambda archive: run_reads(archive, pattern, items))


def read_shared(engine: Engine, shares: list[tuple[Any, ...]]) -> dict[str, Any]:
    """A run whose thread workers share one open file (``shares`` as :func:`read_share`
    takes them, one per worker): how xarray and dask read HDF5 with threads (one file per
    process, under a lock), and what h5py allows, which runs one call at a time in a
    process whatever file it is on. The page buffer is then the process's (8 workers with
    a 256 MiB page buffer each held 2.8 GiB in one process)."""
    path, template, pattern, _, latency, bandwidth, page_buffer, storage = shares[0]

    def read_all(archive: Any) -> int:
        # every worker is done with the file before it is closed, a failed one included
        done = engine.map(partial(_reads_or_error, archive, pattern), [(s[3],) for s in shares])
        failed = next((d for d in done if isinstance(d, Exception)), None)
        if failed is not None:
            raise failed
        return sum(done)

    return _read_counted(path, template, latency, bandwidth, page_buffer, storage, read_all)


def _reads_or_error(archive: Any, pattern: str, items: list[Any]) -> int | Exception:
    try:
        return run_reads(archive, pattern, items)
    except READ_ERRORS as exc:
        return exc


def _run(engine: Engine, shares: list[tuple[Any, ...]], shared: bool) -> list[dict[str, Any]]:
    return [read_shared(engine, shares)] if shared else engine.map(read_share, shares)


class Engine:
    """Runs shares in parallel; ``map`` returns their results in order."""

    def __init__(self, kind: str, workers: int, scheduler: str | None = None) -> None:
        self.kind, self.workers = kind, workers
        self._pool: ThreadPoolExecutor | None = None
        self._client: Any = None
        self._cluster: Any = None
        if kind == "threads":
            self._pool = ThreadPoolExecutor(max_workers=workers)
        elif kind in ("processes", "distributed"):
            from dask.distributed import Client, LocalCluster

            if kind == "distributed" and scheduler:
                self._client = Client(scheduler, timeout="10s")
            else:
                self._cluster = LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
                )
                self._client = Client(self._cluster)

    def map(self, fn: Callable[..., Any], shares: list[tuple[Any, ...]]) -> list[Any]:
        if self._pool is not None:
            return [f.result() for f in [self._pool.submit(fn, *s) for s in shares]]
        if self._client is not None:
            futures = [self._client.submit(fn, *s, pure=False) for s in shares]
            return self._client.gather(futures)
        return [fn(*s) for s in shares]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()


# -- the OS page cache --------------------------------------------------------------------


def files_of(path: Path | str | tuple[str, ...]) -> Iterator[Path]:
    """Every local file of a variant (one HDF5 file, or all files of a store); none for a
    variant in a bucket, whose cache is not this machine's."""
    if is_url(str(path)):
        return
    if isinstance(path, tuple) or is_source_set(path):  # a local glob or list of sources, measured as one archive
        yield from (Path(p) for p in expand_sources(path if isinstance(path, tuple) else str(path)))
        return
    path = Path(path)
    if path.is_dir():
        for root, _, names in os.walk(path):
            for name in names:
                yield Path(root) / name
    else:
        yield path


def evict(path: Path | str | tuple[str, ...]) -> None:
    """Drop the variant's files from the OS page cache (cold reads)."""
    for f in files_of(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm(path: Path | str | tuple[str, ...]) -> None:
    """Read the variant's files once so they sit in the OS page cache (warm reads)."""
    for f in files_of(path):
        with open(f, "rb", buffering=0) as fh:
            while fh.read(8 << 20):
                pass


# -- the sweep ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """A variant to measure (the source is measured as one too)."""

    name: str
    path: Path | str | tuple[str, ...]  # a local path, a URL (s3://...), or a set of sources
    format: str
    layout: str
    kind: str  # "hdf5", "hdf5-paged" or "zarr": decides which conditions apply
    equal: bool | None  # None for the source itself
    storage: tuple[tuple[str, str], ...] = ()  # --storage-option, for a variant in a bucket


def describe(path: Path | str | tuple[str, ...], name: str, equal: bool | None, template: str,
             storage: tuple[tuple[str, str], ...] = ()) -> Variant:
    with open_archive(path, template=template, storage_options=dict(storage)) as a:
        kind = "zarr" if a.format == "zarr" else ("hdf5-paged" if a.layout.startswith("hdf5-paged") else "hdf5")
        return Variant(name, path, a.format, a.layout, kind, equal, storage)


@dataclass
class Result:
    """One row of the report: a variant, a pattern and a condition."""

    variant: str
    format: str
    layout: str
    pattern: str
    engine: str
    workers: int
    page_buffer: int | None
    cache: str
    latency: float
    bandwidth: float
    seconds: float
    seconds_min: float
    seconds_max: float
    repeats: int
    requests: int
    bytes_read: int
    logical_bytes: int
    mb_per_s: float
    meta_hit_rate: float | None
    raw_hit_rate: float | None
    equal: bool | None
    error: str | None = None
    times: list[float] = field(default_factory=list)
    peak_rss: int | None = None  # bytes, this process's peak over the row's runs (threads, serial; Linux)
    cpu: float | None = None  # this process's CPU seconds per timed run, the mean (all of it for threads, serial)
    remote: bool = False  # read from a bucket: its requests are real, whatever latency is simulated

    def row(self) -> dict[str, Any]:
        return asdict(self)


def _hit_rates(stats: list[dict[str, Any] | None]) -> tuple[float | None, float | None]:
    present = [s for s in stats if s]
    if not present:
        return None, None
    meta_a = sum(s["meta_accesses"] for s in present)
    raw_a = sum(s["raw_accesses"] for s in present)
    meta_h = sum(s["meta_hits"] for s in present)
    raw_h = sum(s["raw_hits"] for s in present)
    return (meta_h / meta_a if meta_a else 0.0), (raw_h / raw_a if raw_a else 0.0)


def scan_plan(variant: Path | str | tuple[str, ...], template: str, storage: tuple[tuple[str, str], ...] = ()) -> tuple[Any, ...]:
    with open_archive(variant, template=template, storage_options=dict(storage)) as a:
        return tuple(a.blocks())


def _plan_items(v: Variant, plans: Sequence[ReadPlan], template: str) -> Iterator[tuple[ReadPlan, tuple[Any, ...]]]:
    """Each plan with what it reads on ``v``: the scan planned from ``v``'s own storage
    (once, for every plan that asks), a plan's own items for ``v`` where it has them."""
    scan_items: tuple[Any, ...] | None = None
    for plan in plans:
        items = dict(plan.by_variant).get(v.name, plan.items)
        if plan.per_variant:
            scan_items = scan_items if scan_items is not None else scan_plan(v.path, template, v.storage)
            items = scan_items
        yield plan, items


@dataclass
class _Row:
    """One variant x pattern x condition, ready to time."""

    variant: Variant
    plan: ReadPlan
    condition: Condition
    engine: Engine
    shares: list[tuple[Any, ...]]
    shared: bool
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    outs: list[dict[str, Any]] = field(default_factory=list)

    def run(self) -> tuple[float, float]:
        """One repetition: its wall and this process's CPU seconds."""
        if self.condition.cache == "cold":
            evict(self.variant.path)
        t0, cpu0 = time.perf_counter(), time.process_time()
        self.outs = _run(self.engine, self.shares, self.shared)
        return time.perf_counter() - t0, time.process_time() - cpu0

    def done(self, repeat: int, min_seconds: float) -> bool:
        times = self.times
        if times and min_seconds == 0.0 and sum(times) >= ROW_SECONDS:
            return True  # runs of seconds are their own median: more of them buy little (repeats scale with the data)
        return len(times) >= repeat and (sum(times) >= min_seconds or len(times) >= MAX_REPEAT_FACTOR * repeat)

    def result(self, peak: int | None) -> Result:
        v, c, times, outs = self.variant, self.condition, self.times, self.outs
        median = statistics.median(times)
        logical = sum(o["logical"] for o in outs)
        meta_rate, raw_rate = _hit_rates([o["page_buffer"] for o in outs])
        from layoutkit.storage.buckets import is_url

        return Result(
            remote=is_url(str(v.path)) or str(v.path).startswith("icechunk:s3://"),
            variant=v.name,
            format=v.format,
            layout=v.layout,
            pattern=self.plan.pattern,
            engine=c.engine,
            workers=c.workers,
            page_buffer=c.page_buffer,
            cache=c.cache,
            latency=c.latency,
            bandwidth=c.bandwidth,
            seconds=median,
            seconds_min=min(times),
            seconds_max=max(times),
            repeats=len(times),
            requests=sum(o["requests"] for o in outs),
            bytes_read=sum(o["bytes"] for o in outs),
            logical_bytes=logical,
            mb_per_s=logical / median / 1e6 if median else 0.0,
            meta_hit_rate=meta_rate,
            raw_hit_rate=raw_rate,
            equal=v.equal,
            times=times,
            peak_rss=peak,
            error=next((o["error"] for o in outs if o["error"]), None),
            cpu=statistics.fmean(self.cpu),
        )


def _time_rows(rows: list[_Row], repeat: int, warmup: int, min_seconds: float,
               progress: Callable[[str], object]) -> list[Result]:
    """Time ``rows`` together: each warmed up, then run in turn, round after round, until
    each has ``repeat`` repetitions adding up to ``min_seconds`` (a row that has them
    sits the later rounds out). One row alone gets its own peak RSS."""
    for path in dict.fromkeys(row.variant.path for row in rows if row.condition.cache == "warm"):
        warm(path)  # once per variant: rows timed together share it (advise's are 2 variants x 3-6 rows)
    # the peak starts from what this process holds: the last row's shot trees are freed only by the cyclic
    # collector (DataTree nodes point at their parents; up to 120 MiB of them carried into the next row),
    # and glibc keeps what was freed
    gc.collect()
    release_freed_memory()
    in_process = len(rows) == 1 and rows[0].condition.engine in ("threads", "serial") and reset_peak_rss()
    # the caller's heap sits out the collections: each run then starts from the same heap, its predecessor's
    # garbage collected between the runs, untimed, and a collection during a run walks only what the runs
    # made (a full collection of advise's heap took 0.06-0.1 s, landing at random in runs of 0.01-0.3 s)
    gc.freeze()
    try:
        for row in rows:
            for _ in range(warmup):
                row.run()
        while pending := [row for row in rows if not row.done(repeat, min_seconds)]:
            for row in pending:
                gc.collect()
                seconds, cpu = row.run()
                row.times.append(seconds)
                row.cpu.append(cpu)
                progress(f"{row.variant.name} {row.plan.pattern}")
                if row.done(repeat, min_seconds):
                    for _ in range(repeat - len(row.times)):  # the repetitions it no longer needs: the bar moves on
                        progress(f"{row.variant.name} {row.plan.pattern}")
    finally:
        gc.unfreeze()
    peak = peak_rss() if in_process else None
    return [row.result(peak) for row in rows]


def measure(
    variants: Sequence[Variant],
    plans: Sequence[ReadPlan],
    conditions: Callable[[Variant], list[Condition]],
    repeat: int = 3,
    template: str = "/shots/{shot}/signals/{signal}",
    scheduler: str | None = None,
    progress: Callable[[str], object] = lambda _: None,
    warmup: int = 0,
    min_seconds: float = 0.0,
    interleave: bool = False,
) -> list[Result]:
    """Run every plan on every variant under each of its conditions.

    Parameters
    ----------
    variants
        What to measure (the source first, by convention).
    plans
        One :class:`ReadPlan` per pattern, drawn from the source.
    conditions
        The sweep for a variant (see :func:`conditions_for`).
    repeat
        Repetitions per row; the row holds their median, minimum and maximum.
    progress
        Called with a label after each repetition.
    warmup
        Untimed repetitions before the timed ones, per row: the first read of a
        variant in a process also pays for what later ones reuse (codec pipelines,
        thread pools, lazily imported modules), measured up to 4x a later one.
    min_seconds
        Repeat past ``repeat`` until the timed repetitions add up to this many
        seconds (at most ``MAX_REPEAT_FACTOR`` x ``repeat``): a short row's median
        of three is mostly noise.
    interleave
        Time the rows in turn, one repetition of each per round, instead of one row
        after another: what the machine does meanwhile (another process, a slower
        spell) then falls on every row alike, and their differences hold. Measured on
        two samples of 7 and 13 shots, a signal read's growth per shot varied 0.45-1.24
        ms over three runs row after row, 0.74-0.86 ms in turn. Rows then carry no
        peak RSS.
    """
    if repeat < 1:
        raise InvalidOptionError(f"Expected --repeat of 1 or more. Got {repeat}.")
    engines: dict[tuple[str, int], Engine] = {}
    rows: list[_Row] = []
    try:
        for v in variants:
            for plan, items in _plan_items(v, plans, template):
                for c in conditions(v):
                    key = (c.engine, c.workers)
                    if key not in engines:
                        engines[key] = Engine(c.engine, c.workers, scheduler)
                    shares = [
                        (v.path if isinstance(v.path, tuple) else str(v.path), template, plan.pattern, share, c.latency, c.bandwidth, c.page_buffer or 0,
                         v.storage)
                        for share in split(items, plan.threads or c.workers)
                    ]
                    shared = c.engine == "threads" and v.format == "hdf5"
                    rows.append(_Row(v, plan, c, engines[key], shares, shared))
        groups = [rows] if interleave else [[row] for row in rows]
        return [result for group in groups for result in _time_rows(group, repeat, warmup, min_seconds, progress)]
    finally:
        for e in engines.values():
            e.close()


PROBE_LATENCY = 0.001
"""The latency of :func:`expected_seconds`'s probe reads: long enough to tell the rounds
of requests apart, short enough that a scan of a thousand rounds probes in a second."""


def _union(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the ``(start, end)`` spans, overlaps counted once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def probe(variant: Variant, pattern: str, items: list[Any], template: str,
          count_rounds: bool = True) -> tuple[float, float]:
    """One read of ``items`` by one worker, in this process, every request waiting
    :data:`PROBE_LATENCY`: its seconds without the waits, and its rounds (the waits'
    span over the probe latency: requests in flight together wait together). Without
    ``count_rounds`` (no row charges a latency), nothing waits and the rounds are 0."""
    import asyncio

    spans: list[tuple[float, float]] = []

    def wait(_: float) -> None:
        t = time.perf_counter()
        time.sleep(PROBE_LATENCY)
        spans.append((t, time.perf_counter()))

    async def await_(_: float) -> None:
        t = time.perf_counter()
        await asyncio.sleep(PROBE_LATENCY)
        spans.append((t, time.perf_counter()))

    def either(delay: float) -> Any:
        """The wait as the reader calls it: awaited by the Zarr readers' event loop,
        slept by HDF5's threads (a variant of either format, or a set of sources, may hold
        both; a coroutine handed to a synchronous caller was never awaited, and not waited)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return wait(delay)
        return await_(delay)

    path = variant.path if isinstance(variant.path, tuple) else str(variant.path)
    t0 = time.perf_counter()
    model = LatencyModel(PROBE_LATENCY) if count_rounds else None
    with open_archive(path, template=template, model=model, sleep=either,
                      storage_options=dict(variant.storage)) as archive:
        try:
            run_reads(archive, pattern, items)
        except READ_ERRORS:
            pass  # the row will say what failed
    waited = _union(spans)
    return max(0.0, time.perf_counter() - t0 - waited), waited / PROBE_LATENCY


def expected_seconds(
    variants: Sequence[Variant],
    plans: Sequence[ReadPlan],
    conditions: Callable[[Variant], list[Condition]],
    repeat: int,
    template: str,
) -> float:
    """About how long :func:`measure` will take: each pattern read once per variant by
    one worker at :data:`PROBE_LATENCY` (:func:`probe`; not delayed where no condition
    has a latency), its rounds charged at each condition's latency, times the runs the
    row will make (``repeat``, fewer once they add up to :data:`ROW_SECONDS`). Worker
    counts and engines are taken to cost what one worker does; bandwidth is left out."""
    total = 0.0
    # rounds cost only where a row waits for each: else the probe need not wait (a
    # millisecond a round, seconds over a scan of thousands of arrays)
    charged = any(c.latency for v in variants for c in conditions(v))
    for v in variants:
        for plan, items in _plan_items(v, plans, template):
            if not items:
                continue
            own, rounds = probe(v, plan.pattern, list(items), template, charged)
            for c in conditions(v):
                seconds = own + rounds * c.latency
                runs = min(repeat, max(1, math.ceil(ROW_SECONDS / seconds))) if seconds > 0 else repeat
                total += runs * seconds
    return total


def count_runs(
    variants: Sequence[Variant],
    plans: Sequence[ReadPlan],
    conditions: Callable[[Variant], list[Condition]],
    repeat: int,
) -> int:
    return sum(len(conditions(v)) for v in variants) * len(plans) * repeat


@dataclass(frozen=True)
class VerifyOptions:
    """Everything ``layoutkit verify`` takes, parsed (see the ``parse_*`` functions)."""

    patterns: str = "all"
    sample: int = 10
    seed: int = 0
    engines: tuple[str, ...] = ("threads",)
    workers: tuple[int, ...] = (1,)
    page_buffers: tuple[int, ...] = (64 * 1024**2,)
    caches: tuple[str, ...] = ("cold",)
    latencies: tuple[float, ...] = (0.0,)
    bandwidths: tuple[float, ...] = (0.0,)
    repeat: int = 3
    min_seconds: float = 0.0  # repeat a short row past ``repeat`` up to this many seconds (see measure)
    template: str = "/shots/{shot}/signals/{signal}"
    scheduler: str | None = None
    check: bool = True
    check_workers: int = 2
    storage_options: tuple[tuple[str, str], ...] = ()  # for variants in a bucket (--storage-option)
    workload: str | None = None  # a workload file (layoutkit trace): its reads replayed as the pattern "workload"


@dataclass
class VerifyReport:
    variants: list[Variant]
    mismatches: dict[str, list[Any]]
    results: list[Result]
    patterns: tuple[str, ...]
    skipped: dict[str, list[str]] = field(default_factory=dict)  # variant -> datasets it left out on purpose
    options: VerifyOptions | None = None
    """The conditions it ran under, parsed (what ``verify --out`` records)."""


def _name(path: Path | str | tuple[str, ...]) -> str:
    if isinstance(path, tuple):  # a list of sources
        return f"{_name(path[0])} and {len(path) - 1} more"
    return path.name if isinstance(path, Path) else str(path).rstrip("/").rsplit("/", 1)[-1]


def _names(paths: Sequence[Path | str]) -> list[str]:
    names = [_name(p) for p in paths]
    return [str(p) if names.count(_name(p)) > 1 else _name(p) for p in paths]


def _plans(src_at: Path | str | tuple[str, ...], options: VerifyOptions,
           left_out: frozenset[str]) -> tuple[tuple[str, ...], list[ReadPlan]]:
    """The patterns asked for and what each reads, drawn from the source; with
    ``--workload``, the recorded reads of the source last (the pattern ``workload``)."""
    from layoutkit.verify.patterns import available_patterns, parse_patterns, plan_reads
    from layoutkit.verify.workload import WORKLOAD, workload_plan

    with open_archive(src_at, template=options.template, storage_options=dict(options.storage_options)) as source:
        patterns = parse_patterns(options.patterns, available_patterns(source))
        plans = [plan_reads(p, source, options.sample, options.seed, left_out) for p in patterns]
        if options.workload is not None:
            plans.append(workload_plan(options.workload, src_at, source.arrays()))
            patterns = (*patterns, WORKLOAD)
    return patterns, plans


def verify(
    source: str | os.PathLike | Sequence[str | os.PathLike],
    variants: Sequence[str | os.PathLike],
    options: VerifyOptions = VerifyOptions(),
    on_check: Callable[[str], object] = lambda _: None,
    on_total: Callable[[int], object] = lambda _: None,
    on_run: Callable[[str], object] = lambda _: None,
    on_start: Callable[[], object] = lambda: None,
    on_expected: Callable[[float], object] | None = None,
) -> VerifyReport:
    """Prove every variant equal to the source, then measure the read patterns.

    Parameters
    ----------
    source
        The HDF5 file the variants were made from: a path, or a URL (``s3://bucket/key.h5``,
        read with ``options.storage_options``); or a shell-style glob of local files
        (``"exports/shots-*.h5"``) or a list of sources (``--sources-from``), a variant
        made from all of them proved equal to them
        all (:func:`~layoutkit.verify.equality.compare_set`) and the set measured as one
        archive.
    variants
        Zarr stores and HDF5 files written by ``convert`` and ``reorder``.
    options
        Patterns, sample, and the sweep of conditions.
    on_check, on_total, on_run, on_start
        Progress: a variant compared; the number of timed runs; a run done; the input
        is valid and the work begins.
    on_expected
        Told, after the equality proof and before the timed runs, about how many seconds
        they will take (:func:`expected_seconds`: a probe read of each pattern on each
        variant); None: no probe.

    Raises
    ------
    LayoutkitError
        On a missing or unreadable source or variant, a variant from another source, or
        a bad option. Mismatches are not errors: they are in the report.
    """
    from layoutkit.hdf5.files import check_source
    from layoutkit.hdf5.inventory import read_inventory
    from layoutkit.verify.equality import compare_set, compare_variant, recorded_skips
    from layoutkit.verify.workload import compare_selections

    if options.sample < 1:
        raise InvalidOptionError(f"Expected --sample of 1 or more. Got {options.sample}.")
    if options.repeat < 1:
        raise InvalidOptionError(f"Expected --repeat of 1 or more. Got {options.repeat}.")
    storage = options.storage_options
    # a local file, or an HDF5 file in a bucket; or a glob of them, read as one archive (the union of their shots)
    one = isinstance(source, (str, os.PathLike))
    srcs = [check_source(as_source(s, dict(storage)))
            for s in expand_sources(str(source) if isinstance(source, (str, os.PathLike)) else list(source), dict(storage))]
    src = srcs[0]
    src_at: Path | str | tuple[str, ...] = str(src) if isinstance(src, ObjectSource) else src  # what open_archive takes
    if len(srcs) > 1:
        src_at = str(source) if one else tuple(map(str, srcs))
    paths: list[Path | str] = [str(v) if is_url(str(v)) else Path(v) for v in variants]
    names = _names(paths)
    described = [describe(p, n, None, options.template, storage) for p, n in zip(paths, names)]  # raises on bad input
    # datasets a variant left out on purpose: named in the report, never drawn (no variant can serve them)
    skipped = {n: recorded_skips(p, dict(storage)) for p, n in zip(paths, names)}
    left_out = frozenset(s for paths_left in skipped.values() for s in paths_left)
    patterns, plans = _plans(src_at, options, left_out)
    on_start()
    mismatches: dict[str, list[Any]] = {n: [] for n in names}
    if options.check and len(srcs) > 1:
        for p, n in zip(paths, names):
            mismatches[n] = compare_set(srcs, p, workers=options.check_workers, storage_options=dict(storage),
                                        template=options.template)
            on_check(n)
    elif options.check:
        inventory = read_inventory(src, workers=options.check_workers)
        for p, n in zip(paths, names):
            mismatches[n] = compare_variant(src, p, inventory, workers=options.check_workers,
                                            storage_options=dict(storage), skipped=skipped[n])
            on_check(n)
    if options.check and options.workload is not None:  # the replayed selections, each against HDF5's own read
        for p, n in zip(paths, names):
            mismatches[n] += compare_selections(srcs, p, plans[-1].items, options.template, dict(storage))
    checked = [replace(v, equal=not mismatches[v.name] if options.check else None) for v in described]
    measured = [describe(src_at, _name(src_at), None, options.template, storage), *checked]

    def conditions(v: Variant) -> list[Condition]:
        return conditions_for(
            v.kind, options.engines, options.workers, options.page_buffers, options.caches,
            options.latencies, options.bandwidths,
        )  # fmt: skip

    if on_expected is not None:
        on_expected(expected_seconds(measured, plans, conditions, options.repeat, options.template))
    on_total(count_runs(measured, plans, conditions, options.repeat))
    results = measure(measured, plans, conditions, options.repeat, options.template, options.scheduler, on_run,
                      min_seconds=options.min_seconds)
    return VerifyReport(measured, mismatches, results, patterns, skipped, options)


__all__ = [
    "VerifyOptions",
    "VerifyReport",
    "verify",
    "CACHES",
    "Condition",
    "ENGINES",
    "Engine",
    "Result",
    "Variant",
    "conditions_for",
    "count_runs",
    "describe",
    "evict",
    "expected_seconds",
    "measure",
    "read_share",
    "read_shared",
    "warm",
]
