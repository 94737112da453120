"""One Python call per command: ``layoutkit.convert``, ``reorder``, ``verify``,
``inspect``, ``advise`` and ``append`` (or ``convert(..., append=True)``).

Each takes its command's options by the command's names (``chunk_size``, ``page_buffer``,
``latency``...) and values (``"8MiB"``, ``"0,10ms"``, ``"threads"``), checked by the
parsers the command line uses, before any work: a bad value is one
:class:`~layoutkit.errors.InvalidOptionError` naming the keyword. Each returns what the
command prints from (a summary, a report) instead of printing. The command line is a
thin layer over the same library functions (:mod:`layoutkit.cli`).

    layoutkit.convert("shots.h5", "by-signal.zarr", layout="signal-major", chunk_size="8MiB")
    layoutkit.reorder("shots.h5", "by-shot.h5", by="shot")
    report = layoutkit.verify("shots.h5", ["by-signal.zarr", "by-shot.h5"], latency="0,10ms")
    layoutkit.inspect("shots.h5").recommendations
    layoutkit.advise("shots.h5", patterns="signal=1", budget="1min").recommended
    layoutkit.append(["more.h5"], "by-signal.zarr")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from layoutkit.errors import InvalidOptionError, says_it_in_python

Source = str | os.PathLike
Sources = Source | Sequence[Source]


def _options(cls: type, options: Any, values: dict[str, Any], command: str) -> Any:
    """``options``, or one built from the command's keyword values (not both)."""
    if options is not None and values:
        raise InvalidOptionError(f"{command}: give the options as a {cls.__name__} or as keywords "
                                 f"({', '.join(sorted(values))}), not both.")
    if options is None:
        return cls(**values)
    from layoutkit.layouts import layouts_of

    if not isinstance(options, (cls, *(layout.options_class for layout in layouts_of(command)))):
        raise InvalidOptionError(f"{command}: expected the options as a {cls.__name__} (or the options of "
                                 f"another layout of {command}). Got {type(options).__name__}.")
    return options


@says_it_in_python
def convert(
    src: Sources,
    dst: Source,
    options: Any = None,
    *,
    append: bool = False,
    storage_options: dict[str, str] | None = None,
    tmpdir: Source | None = None,
    icechunk: bool = False,
    concat_dim: str | None = None,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[Any], None] | None = None,
    plan: Any = None,
    stages: Any = None,
    **values: Any,
) -> Any:
    """Rewrite an HDF5 file (netCDF-4 included), or several as one archive, as a Zarr
    store: ``layoutkit convert``.

    Parameters
    ----------
    src, dst
        The source(s): paths, bucket URLs, a glob; the store to write (a path, a bucket
        URL, ``icechunk:LOCATION``).
    options
        A :class:`~layoutkit.zarr_options.ConvertOptions`, or leave it out and give its
        fields as keywords, by the command's names: ``layout``, ``zarr_format``,
        ``chunks``, ``chunk_size``, ``compressor``, ``shards``, ``consolidate``,
        ``workers``, ``scheduler``, ``memory_limit``, ``batch_files``, ``overwrite``,
        ``skip_unsupported``, ``template``.
    append
        Add ``src`` to the existing store ``dst`` with the store's own recipe
        (``--append``; see :func:`append`).
    storage_options
        For bucket URLs (``--storage-option``).
    tmpdir, icechunk, concat_dim, dry_run
        As ``--tmpdir``, ``--icechunk``, ``--concat-dim`` and ``--dry-run``.
    progress, on_plan, stages
        Called with the bytes of each finished task; called with the
        :class:`~layoutkit.writing.Planned` write before it runs; gets where the time
        went (``--timings``).

    Returns
    -------
    ConvertSummary; AppendSummary with ``append``; with ``dry_run`` the
    :class:`~layoutkit.writing.Planned` write (its ``plan``, ``inventory``, ``batches``),
    nothing written.

    Raises
    ------
    LayoutkitError
        Every expected failure, in one sentence (an ``InvalidOptionError`` for a bad
        value, naming the keyword).
    """
    from layoutkit.writing import write
    from layoutkit.zarr_options import ConvertOptions

    if append:
        if options is not None or dry_run:
            said = "--dry-run" if dry_run else f"the options ({type(options).__name__})"
            raise InvalidOptionError(f"--append writes with the store's own recipe and keeps what it holds: leave "
                                     f"out {said}.")
        return globals()["append"](src, dst, storage_options=storage_options, tmpdir=tmpdir, icechunk=icechunk,
                                   concat_dim=concat_dim, progress=progress, stages=stages, **values)
    options = _options(ConvertOptions, options, values, "convert")
    return write("convert", src, dst, options, storage_options=storage_options, tmpdir=tmpdir, icechunk=icechunk,
                 concat_dim=concat_dim, dry_run=dry_run, progress=progress, stages=stages, on_plan=on_plan, plan=plan)


@says_it_in_python
def reorder(
    src: Sources,
    dst: Source,
    options: Any = None,
    *,
    storage_options: dict[str, str] | None = None,
    tmpdir: Source | None = None,
    concat_dim: str | None = None,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[Any], None] | None = None,
    plan: Any = None,
    stages: Any = None,
    **values: Any,
) -> Any:
    """Rewrite an HDF5 file as paged-aggregation HDF5, its bytes ordered by shot, signal
    or group: ``layoutkit reorder``.

    Parameters
    ----------
    options
        A :class:`~layoutkit.layouts.hdf5_paged.options.ReorderOptions`, or its fields as
        keywords by the command's names: ``by``, ``template``, ``page_size``,
        ``compressor``, ``compress_threshold``, ``chunks``, ``chunk_size``, ``dedupe``,
        ``workers``, ``memory_limit``, ``overwrite``.
    storage_options, tmpdir, concat_dim, dry_run, progress, on_plan, stages
        As for :func:`convert`.

    Returns
    -------
    ReorderSummary; with ``dry_run`` the :class:`~layoutkit.writing.Planned` write.
    """
    from layoutkit.layouts.hdf5_paged.options import ReorderOptions
    from layoutkit.writing import write

    options = _options(ReorderOptions, options, values, "reorder")
    return write("reorder", src, dst, options, storage_options=storage_options, tmpdir=tmpdir,
                 concat_dim=concat_dim, dry_run=dry_run, progress=progress, stages=stages, on_plan=on_plan, plan=plan)


@says_it_in_python
def append(
    src: Sources,
    dst: Source,
    *,
    storage_options: dict[str, str] | None = None,
    tmpdir: Source | None = None,
    icechunk: bool = False,
    concat_dim: str | None = None,
    progress: Callable[[int], None] | None = None,
    stages: Any = None,
    **values: Any,
) -> Any:
    """Add the shots of ``src`` to the existing store ``dst`` with the store's own recipe:
    ``layoutkit convert SRC... DST --append``. Only the new shots' objects are written,
    sources the store lists already are skipped, and readers see the old store or the new.

    ``values``: the run's own options (``workers``, ``scheduler``, ``memory_limit``) by
    the command's names and values; an option of the layout is refused unless it is the
    store's own (the recipe is the store's).

    Returns
    -------
    AppendSummary
        ``new_sources``, ``new_shots``, ``objects``, ``bytes_written``, ``wrote_nothing``...
    """
    from layoutkit.appending.append import append as run_append

    if values.get("overwrite"):
        raise InvalidOptionError("--append writes with the store's own recipe and keeps what it holds: leave out "
                                 "--overwrite.")
    if values.get("batch_files"):
        raise InvalidOptionError("--append adds its files in one commit (readers see the store before or after all "
                                 "of them): leave out --batch-files, or append the files in several runs.")
    typed = {k: v for k, v in values.items() if k not in ("batch_files", "overwrite")}
    sources = [os.fspath(s) for s in src] if isinstance(src, (list, tuple)) else [os.fspath(src)]  # type: ignore[arg-type]
    target = os.fspath(dst)
    if icechunk and not target.startswith("icechunk:"):
        target = f"icechunk:{target}"
    return run_append(sources, target, typed, dict(storage_options or {}), progress or (lambda _: None), stages,
                      tmpdir, concat_dim)


@says_it_in_python
def verify(
    source: Sources,
    variants: Sequence[Source] | Source,
    *,
    patterns: str = "all",
    sample: int = 10,
    seed: int = 0,
    engine: str = "threads",
    workers: str | int = "1",
    page_buffer: str | int = "64MiB",
    cache: str = "cold",
    latency: str | float = "0",
    bandwidth: str | float = "0",
    repeat: int = 3,
    template: str | None = None,
    scheduler: str | None = None,
    check: bool = True,
    storage_options: dict[str, str] | None = None,
    workload: Source | None = None,
    **observers: Any,
) -> Any:
    """Prove every variant holds exactly the source's data, then time the read patterns
    under each condition: ``layoutkit verify``. ``workload``: a file ``layoutkit trace``
    wrote, its reads of ``source`` replayed on every variant (the pattern ``workload``)
    and each selection proved equal. Several values of a condition are
    comma-separated as on the command line (``workers="1,2"``, ``latency="0,10ms"``).
    ``observers``: ``on_start``, ``on_check``, ``on_total``, ``on_expected``, ``on_run``
    of :func:`layoutkit.verify.run.verify` (the command's progress bar).

    Returns
    -------
    VerifyReport
        ``mismatches`` (variant -> what differs; empty lists when all are equal),
        ``results`` (one per variant, pattern and condition: seconds, requests, bytes),
        ``variants``, ``skipped``. ``report.equal`` tells whether every variant is equal.
    """
    from layoutkit.options import (
        parse_bandwidths,
        parse_choices,
        parse_counts,
        parse_durations,
        parse_sizes,
    )
    from layoutkit.templates import DEFAULT_TEMPLATE, parse_template
    from layoutkit.verify.run import CACHES, ENGINES, VerifyOptions
    from layoutkit.verify.run import verify as run_verify

    given = [variants] if isinstance(variants, (str, os.PathLike)) else list(variants)
    if not given:
        raise InvalidOptionError("Name at least one variant to verify after the source.")
    options = VerifyOptions(
        patterns=patterns, sample=int(sample), seed=int(seed), engines=parse_choices(engine, ENGINES, "--engine"),
        workers=parse_counts(str(workers), "--workers"), page_buffers=parse_sizes(str(page_buffer), "page buffer size"),
        caches=parse_choices(cache, CACHES, "--cache"), latencies=parse_durations(str(latency)),
        bandwidths=parse_bandwidths(str(bandwidth)), repeat=int(repeat),
        template=parse_template(template) if template else DEFAULT_TEMPLATE, scheduler=scheduler, check=check,
        storage_options=tuple(sorted((storage_options or {}).items())),
        workload=os.fspath(workload) if workload is not None else None,
    )  # fmt: skip
    return run_verify(source, given, options, **observers)


@says_it_in_python
def inspect(
    path: Source,
    *,
    template: str | None = None,
    storage_options: dict[str, str] | None = None,
    workers: int | str = 2,
    progress: Callable[[int, int], None] | None = None,
) -> Any:
    """How an HDF5 file or a Zarr store is laid out, and what to do about it:
    ``layoutkit inspect``. ``progress`` is called with the datasets read so far and their
    number.

    Returns
    -------
    InspectReport
        ``arrays``, ``chunks``, ``recommendations``... (``report.to_dict()`` is what
        ``--json`` prints).
    """
    from layoutkit.inspect import inspect_path
    from layoutkit.options import RUN_PARSERS
    from layoutkit.templates import DEFAULT_TEMPLATE, parse_template

    return inspect_path(path, parse_template(template) if template else DEFAULT_TEMPLATE, storage_options,
                        RUN_PARSERS["workers"](workers), progress)


@says_it_in_python
def advise(
    src: Source,
    *,
    patterns: str = "",
    latency: str | float = "10ms",
    bandwidth: str | float = "0",
    workers: int = 2,
    budget: str | float = "2min",
    candidates: str = "recipes",
    sample: int = 10,
    sample_shots: int | None = None,
    seed: int = 0,
    repeat: int = 3,
    price_per_1000_get: float = 0.0004,
    template: str | None = None,
    tmpdir: Source | None = None,
    target: str | None = None,
    storage_options: dict[str, str] | None = None,
    out: Source | None = None,
    overwrite: bool = False,
    workload: Source | None = None,
    **observers: Any,
) -> Any:
    """Try candidate layouts on samples of ``src``, predict each one's read time at full
    size and recommend one: ``layoutkit advise``. With ``out``, its results, recipe and
    plot are written there, as the command writes them (``result.written``); an ``out``
    that holds files is refused unless ``overwrite``. ``workload``: a file ``layoutkit
    trace`` wrote, whose reads of ``src`` are the pattern ``workload`` (alone, or weighed
    with ``patterns``; ``result.workload``, and each trial's ``workload_costs``). ``observers``: ``on_total`` and
    ``on_step`` of :func:`layoutkit.advise.run.advise` (the command's progress bar).

    Returns
    -------
    AdviseResult
        ``recommended`` (its ``name``, ``layout``, ``weighted_seconds``), ``trials``,
        ``not_tried``.
    """
    from pathlib import Path

    from layoutkit.advise.run import AdviseOptions, parse_budget, write_outputs
    from layoutkit.advise.run import advise as run_advise
    from layoutkit.options import parse_bandwidths, parse_durations
    from layoutkit.storage.local import check_report_folder
    from layoutkit.templates import DEFAULT_TEMPLATE, parse_template

    if out is not None:  # before any work: a report that cannot be written is bad input
        out = Path(out)
        check_report_folder(out)
        if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
            raise InvalidOptionError(f"--out {str(out)!r} exists and is not empty; choose another or pass "
                                     "--overwrite.")
    lat, bw = parse_durations(str(latency)), parse_bandwidths(str(bandwidth))
    if len(lat) != 1 or len(bw) != 1:
        raise InvalidOptionError(f"Expected one --latency and one --bandwidth. Got {latency!r} and {bandwidth!r}.")
    if price_per_1000_get < 0:
        raise InvalidOptionError(f"Expected --price-per-1000-get of 0 or more. Got {price_per_1000_get}.")
    options = AdviseOptions(
        patterns=patterns, latency=lat[0], bandwidth=bw[0], workers=int(workers),
        budget=parse_budget(str(budget)) if isinstance(budget, str) else float(budget), candidates=candidates,
        template=parse_template(template) if template else DEFAULT_TEMPLATE, sample=int(sample), seed=int(seed),
        repeat=int(repeat), price_per_1000_get=price_per_1000_get, shots=sample_shots,
        tmpdir=os.fspath(tmpdir) if tmpdir else None, target=target,
        storage_options=tuple(sorted((storage_options or {}).items())),
        workload=os.fspath(workload) if workload is not None else None,
    )  # fmt: skip
    result = run_advise(os.fspath(src), options, **observers)
    if out is not None:
        if overwrite and out.is_dir():
            for name in ("results.json", "recommended.toml", "advise.png"):
                (out / name).unlink(missing_ok=True)
        result.written = write_outputs(result, out)
    return result


@says_it_in_python
def trace(command: Sequence[str], out: Source = "workload.json", *, overwrite: bool = False,
          syscalls: bool = False) -> Any:
    """Run ``command`` and record what its Python processes read through h5py, zarr and
    ``layoutkit.open`` into the workload file ``out``: ``layoutkit trace -- COMMAND``.
    With ``syscalls``, what any program reads from HDF5 files, mapped from the offsets
    of its system calls (strace): ``layoutkit trace --syscalls -- COMMAND``.

    Returns
    -------
    Workload
        ``reads`` (each distinct read: array, selection, process, thread, count),
        ``exit_code`` (the command's).
    """
    from layoutkit.trace.run import trace as run_trace

    return run_trace(list(command), out, overwrite=overwrite, syscalls=syscalls)


__all__ = ["advise", "append", "convert", "inspect", "reorder", "trace", "verify"]
