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
    if not isinstance(options, cls):
        raise InvalidOptionError(f"{command}: expected the options as a {cls.__name__}. Got {type(options).__name__}.")
    return options


def _destination_named_for(command: str, fmt: str, dst: Source) -> None:
    from layoutkit.cli.running import check_name

    check_name(command, fmt, os.fspath(dst), False)


@says_it_in_python
def convert(
    src: Sources,
    dst: Source,
    options: Any = None,
    *,
    append: bool = False,
    storage_options: dict[str, str] | None = None,
    progress: Callable[[int], None] | None = None,
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

    Returns
    -------
    ConvertSummary, or AppendSummary with ``append``.

    Raises
    ------
    LayoutkitError
        Every expected failure, in one sentence (an ``InvalidOptionError`` for a bad
        value, naming the keyword).
    """
    from layoutkit.convert import convert as run_convert
    from layoutkit.zarr_options import ConvertOptions

    if append:
        if options is not None or values:
            said = ", ".join(sorted(values)) or "options"
            raise InvalidOptionError(f"append=True writes with the store's own recipe: leave out {said}.")
        return globals()["append"](src, dst, storage_options=storage_options, progress=progress)
    options = _options(ConvertOptions, options, values, "convert")
    from layoutkit.layouts import layout_for

    layout = layout_for("convert", options)
    _destination_named_for("convert", layout.format, dst)
    if storage_options:  # sources or the destination in a bucket: parsed once, at the edge
        from layoutkit.archiving import batches
        from layoutkit.storage import as_sources

        sources = as_sources(src, options.template, dict(storage_options), None)
        return batches.run(layout, sources, dst, options, progress, plan, stages, dict(storage_options))
    return run_convert(src, dst, options, progress, plan, stages)


@says_it_in_python
def reorder(
    src: Sources,
    dst: Source,
    options: Any = None,
    *,
    progress: Callable[[int], None] | None = None,
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

    Returns
    -------
    ReorderSummary
    """
    from layoutkit.layouts.hdf5_paged.options import ReorderOptions
    from layoutkit.reorder import reorder as run_reorder

    options = _options(ReorderOptions, options, values, "reorder")
    _destination_named_for("reorder", "hdf5", dst)
    return run_reorder(src, dst, options, progress, plan, stages)


@says_it_in_python
def append(
    src: Sources,
    dst: Source,
    *,
    storage_options: dict[str, str] | None = None,
    progress: Callable[[int], None] | None = None,
    concat_dim: str | None = None,
    workers: int | str | None = None,
    memory_limit: int | str | None = None,
) -> Any:
    """Add the shots of ``src`` to the existing store ``dst`` with the store's own recipe:
    ``layoutkit convert SRC... DST --append``. Only the new shots' objects are written,
    sources the store lists already are skipped, and readers see the old store or the new.

    Returns
    -------
    AppendSummary
        ``new_sources``, ``new_shots``, ``objects``, ``bytes_written``, ``wrote_nothing``...
    """
    from layoutkit.archiving.append import append as run_append
    from layoutkit.options import RUN_PARSERS

    run: dict[str, Any] = {}
    for name, value in (("workers", workers), ("memory_limit", memory_limit)):
        if value is not None:
            run[name] = RUN_PARSERS[name](value)
    sources = [os.fspath(s) for s in src] if isinstance(src, (list, tuple)) else [os.fspath(src)]  # type: ignore[arg-type]
    return run_append(sources, os.fspath(dst), run, dict(storage_options or {}), progress or (lambda _: None), None,
                      None, concat_dim)


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
) -> Any:
    """Prove every variant holds exactly the source's data, then time the read patterns
    under each condition: ``layoutkit verify``. Several values of a condition are
    comma-separated as on the command line (``workers="1,2"``, ``latency="0,10ms"``).

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
    from layoutkit.plan import DEFAULT_TEMPLATE, parse_template
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
    )  # fmt: skip
    return run_verify(source, given, options)


@says_it_in_python
def inspect(
    path: Source,
    *,
    template: str | None = None,
    storage_options: dict[str, str] | None = None,
    workers: int | str = 2,
) -> Any:
    """How an HDF5 file or a Zarr store is laid out, and what to do about it:
    ``layoutkit inspect``.

    Returns
    -------
    InspectReport
        ``arrays``, ``chunks``, ``recommendations``... (``report.to_dict()`` is what
        ``--json`` prints).
    """
    from layoutkit.inspect import inspect_path
    from layoutkit.options import RUN_PARSERS
    from layoutkit.plan import DEFAULT_TEMPLATE, parse_template

    return inspect_path(path, parse_template(template) if template else DEFAULT_TEMPLATE, storage_options,
                        RUN_PARSERS["workers"](workers))


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
) -> Any:
    """Try candidate layouts on samples of ``src``, predict each one's read time at full
    size and recommend one: ``layoutkit advise``. With ``out``, its results, recipe and
    plot are written there, as the command writes them.

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
    from layoutkit.plan import DEFAULT_TEMPLATE, parse_template

    lat, bw = parse_durations(str(latency)), parse_bandwidths(str(bandwidth))
    if len(lat) != 1 or len(bw) != 1:
        raise InvalidOptionError(f"Expected one latency and one bandwidth. Got {latency!r} and {bandwidth!r}.")
    if price_per_1000_get < 0:
        raise InvalidOptionError(f"Expected price_per_1000_get of 0 or more. Got {price_per_1000_get}.")
    if out is not None and Path(out).exists() and (not Path(out).is_dir() or any(Path(out).iterdir())):
        raise InvalidOptionError(f"out {os.fspath(out)!r} exists and is not empty; choose another.")
    options = AdviseOptions(
        patterns=patterns, latency=lat[0], bandwidth=bw[0], workers=int(workers),
        budget=parse_budget(str(budget)) if isinstance(budget, str) else float(budget), candidates=candidates,
        template=parse_template(template) if template else DEFAULT_TEMPLATE, sample=int(sample), seed=int(seed),
        repeat=int(repeat), price_per_1000_get=price_per_1000_get, shots=sample_shots,
        tmpdir=os.fspath(tmpdir) if tmpdir else None, target=target,
        storage_options=tuple(sorted((storage_options or {}).items())),
    )  # fmt: skip
    result = run_advise(os.fspath(src), options)
    if out is not None:
        write_outputs(result, Path(out))
    return result


__all__ = ["advise", "append", "convert", "inspect", "reorder", "verify"]
