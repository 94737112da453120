"""``layoutkit advise``: write candidate layouts from two samples of the source, measure
the read patterns on them, predict each pattern's cost at the source's full size, and
recommend the layout with the least weighted time.

The run, within ``--budget`` of wall time:

1. **Sample.** Two samples of the source (:mod:`layoutkit.advise.subset`): for a shot
   archive, ``n`` and ``2n`` whole shots spread over the archive (the smaller inside the
   larger), ``n`` chosen from the budget; for any other file, whole arrays up to two
   sizes in bytes. Both keep the source's chunking, filters and stored bytes.
2. **Candidates** (:mod:`layoutkit.advise.candidates`), the likeliest to win the
   patterns asked first (:func:`~layoutkit.advise.candidates.likeliest_first`, a cheap
   model of what each layout puts together), each while the budget lasts (the cost of
   the next one is estimated from those done): written from
   both samples through the layout registry, the larger checked equal to its sample,
   then measured with verify's patterns (:func:`layoutkit.verify.run.measure`): both
   without latency (requests, bytes, local seconds, CPU), the larger once more with the
   latency and bandwidth given.
3. **Predict** with :mod:`layoutkit.advise.model`, at the source's size.
4. **Recommend** the least weighted predicted time; :func:`write_outputs` writes
   ``results.json``, ``recommended.toml`` (a recipe ``--recipe`` takes) and a plot.

Everything is written under a temporary directory that is removed at the end, on an
error and on Ctrl-C: advise leaves nothing but ``--out``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from obstore.exceptions import BaseError as StoreError

from layoutkit.advise.candidates import CANDIDATE_SETS, Candidate, candidates, likeliest_first
from layoutkit.advise.model import (
    Observation,
    Prediction,
    extend,
    fit_concurrency,
    full_counts,
    grown_concurrency,
    predict,
    samples_alike,
    weighted,
)
from layoutkit.advise.pages import PAGED_PATTERNS, PagedFile, extra_requests
from layoutkit.advise.subset import Part, array_part, read_sizes, shot_part, shots_of, spread, typical_items, write_part
from layoutkit.advise.workload import SampledWorkload, costliest, resembles, sample_workload
from layoutkit.archive import Archive, open_archive
from layoutkit.errors import InvalidOptionError, LayoutkitError
from layoutkit.hdf5.files import check_source, first_line
from layoutkit.hdf5.inventory import Inventory, read_inventory
from layoutkit.layouts import get_layout, layout_for
from layoutkit.options import duration_text, format_size, parse_duration
from layoutkit.storage import (
    ObjectSource,
    as_source,
    describe_store_error,
    destination,
    is_icechunk,
    is_url,
    object_store,
)
from layoutkit.storage.buckets import delete_keys, list_keys
from layoutkit.templates import DEFAULT_TEMPLATE
from layoutkit.verify.patterns import ARRAY_PATTERNS, PATTERNS, SHOT_ARCHIVE_PATTERNS, ReadPlan, plan_reads, split
from layoutkit.verify.patterns import OPEN_ONLY as OPENING
from layoutkit.verify.run import Condition, Variant, describe, measure
from layoutkit.verify.workload import WORKLOAD

# Measured on the 40-shot sample archive (2 cores, 7 recipes, 2-minute budget): a candidate
# costs 0.36-0.44 s per shot of the larger sample for each pass over it (writing, and each
# pattern measured): 65-80 s for 13 shots and one pattern, 79 s for 9 shots and two, 84-91 s
# for 11 and two. At 0.5 the two-pattern samples were 5 and 9 shots, K=2, and the pick of
# four layouts within 10-25% of each other was left to noise (12-24% from the best in three
# runs of six); at 6 and 11 shots, K=3, it was within 10% in four runs of four.
SECONDS_PER_SHOT_AND_PASS = 0.4
MAX_SAMPLE_BYTES = 512 * 1024**2  # stored bytes of the larger sample, at most
MIN_OBSERVED_SECONDS = 0.5  # timed runs per observation add up to this, at least (verify.measure's min_seconds)
OUTPUT_RESERVE = 3.0  # seconds kept for writing results.json, the recipe and the plot
DEFAULT_PAGE_BUFFER = 64 * 1024**2
NOMINAL_BANDWIDTH = 100e6
RUN_NOISE = 0.05
"""The least uncertainty of a prediction, as a fraction of it: the noise between runs of one
advise. Repeated runs on a loaded machine put signal-major and cmod-signal at 0.210 and
0.218 s for one signal at 10 ms, each with a smaller spread inside its run, and which came
first changed between runs; within 5% of each other they are tied, and the counts rank them
(:attr:`AdviseResult.ranked`)."""
"""Bytes a second a request reads, for ranking candidates the timing cannot tell apart
when no ``--bandwidth`` is given: an object store's per-request rate (S3's, and the
LatencyModel of the benchmarks and the demo), so that 48 MiB read in 9 GETs does not
rank before 2.2 MiB in 10 (``AdviseResult.ranked``)."""


class BudgetTooSmallError(LayoutkitError):
    """Not even one candidate fits the budget."""


# -- parsing ------------------------------------------------------------------------------

def parse_budget(text: str | float) -> float:
    """A wall-time budget such as ``2min``, ``90s``, ``1h`` or ``120`` (seconds)."""
    return parse_duration(text, what="a --budget of wall time", example="2min, 90s or 1h", positive=True)


def parse_weights(text: str, available: tuple[str, ...]) -> dict[str, float]:
    """``--patterns shot=0.7,signal=0.3`` -> ``{"shot": 0.7, "signal": 0.3}`` (a name alone
    weighs 1)."""
    weights: dict[str, float] = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, sep, value = (s.strip() for s in item.partition("="))
        if name == WORKLOAD and name not in available:
            raise InvalidOptionError(f"The pattern {WORKLOAD!r} is the reads of a program: give them with --workload FILE "
                                     "(a file layoutkit trace wrote).")
        if name not in PATTERNS and name not in available:
            raise InvalidOptionError(
                f"Expected --patterns as NAME=WEIGHT pairs with NAME from {', '.join(PATTERNS)}, such as "
                f"shot=0.7,signal=0.3. Got {name!r}."
            )
        if name not in available:
            raise InvalidOptionError(f"The pattern {name!r} does not apply to this source; it has {', '.join(available)}.")
        try:
            weight = float(value) if sep else 1.0
        except ValueError:
            weight = -1.0
        if not weight > 0 or weight != weight or weight == float("inf"):
            raise InvalidOptionError(f"Expected a pattern weight that is a positive number, such as {name}=0.5. Got {item!r}.")
        weights[name] = weights.get(name, 0.0) + weight
    if not weights:
        raise InvalidOptionError("Expected at least one pattern in --patterns, such as shot=0.7,signal=0.3. Got none.")
    return weights


# -- options and results ------------------------------------------------------------------


@dataclass(frozen=True)
class AdviseOptions:
    """Everything ``layoutkit advise`` takes, parsed."""

    patterns: str = ""  # "" = shot=1,signal=1 for a shot archive, scan=1,subset=1 otherwise
    latency: float = 0.010
    bandwidth: float = 0.0  # bytes/s per request, 0 = unlimited
    workers: int = 2
    budget: float = 120.0
    candidates: str = "recipes"
    template: str = DEFAULT_TEMPLATE
    sample: int = 10  # K, as verify's --sample (capped by the smaller sample's shots)
    seed: int = 0
    repeat: int = 3
    page_buffer: int = DEFAULT_PAGE_BUFFER
    price_per_1000_get: float = 0.0004  # dollars; S3 Standard's list price
    shots: int | None = None  # shots in the larger sample (None: from the budget)
    tmpdir: str | None = None
    target: str | None = None  # a bucket prefix (s3://...) to write and read the candidates in
    storage_options: tuple[tuple[str, str], ...] = ()
    workload: str | None = None  # a workload file (layoutkit trace): its reads as the pattern "workload"


@dataclass
class PatternFit:
    """One pattern on one candidate: what was measured and what is predicted."""

    small: Observation
    large: Observation
    small_seconds_at_latency: float
    seconds_at_latency: float
    prediction: Prediction
    extra_pages: int | None = None  # a paged file's data pages beyond the larger sample's (None: not counted)
    growing: bool | None = None  # whether its reads grow with the archive (None: as its pattern's do)

    @property
    def uncertainty(self) -> float:
        """Seconds either side of the prediction: the spread of the repeated runs on the
        samples (fastest to slowest, relative to their median), carried to full size, and
        never less than :data:`RUN_NOISE` of it."""
        spreads = [(o.slowest - o.fastest) / o.seconds for o in (self.small, self.large)
                   if o.fastest is not None and o.slowest is not None and o.seconds > 0]
        return self.prediction.seconds * max([*spreads, RUN_NOISE])

    def may_be_low(self, pattern: str) -> bool:
        """Both samples made the same requests for a read that grows, and nothing else
        counted its growth: the prediction may be low."""
        return self.extra_pages is None and samples_alike(self.small, self.large, pattern, self.growing)


@dataclass
class Trial:
    """One candidate: its status, and its measurements and predictions once measured."""

    name: str
    command: str
    recipe: dict[str, Any]
    status: str = "measured"  # measured | not applicable | different | over budget | failed
    reason: str = ""
    patterns: dict[str, PatternFit] = field(default_factory=dict)
    stored_bytes: tuple[int, int] = (0, 0)  # the candidate written from each sample
    predicted_bytes: float = 0.0
    build_seconds: tuple[float, float] = (0.0, 0.0)  # writing it from each sample
    predicted_build_seconds: float = 0.0  # writing it from the whole source, extended from the samples
    weighted_uncertainty: float = 0.0  # seconds either side of weighted_seconds
    weighted_requests: float = 0.0
    weighted_bytes_read: float = 0.0  # bytes a weighted pattern run reads at full size
    seconds_spent: float = 0.0
    weighted_seconds: float = float("inf")
    workload_costs: list[tuple[str, int, int]] = field(default_factory=list)
    """The workload's reads of each signal (or array) on the larger sample: requests and
    bytes, most requests first (:func:`layoutkit.advise.workload.costliest`)."""

    @property
    def layout(self) -> str:
        """The layout it writes, with its byte order for paged HDF5 (``hdf5-paged by signal``)."""
        name = str(self.recipe.get("layout", ""))
        return f"{name} by {self.recipe['by']}" if "by" in self.recipe else name


@dataclass
class AdviseResult:
    source: str
    options: AdviseOptions
    weights: dict[str, float]
    unit: str  # "shots" or "bytes"
    scales: tuple[float, float, float]  # small sample, large sample, full source
    reads: int  # K
    trials: list[Trial]
    elapsed: float
    not_tried: list[str] = field(default_factory=list)
    read_items: dict[str, list[str]] = field(default_factory=dict)  # the shots or signals each pattern read
    written: list[Path] = field(default_factory=list)
    """What was written under ``out`` (:func:`layoutkit.advise`): results, recipe, plot."""
    workload: SampledWorkload | None = None
    """``--workload``: the program's reads and those made on the samples for them."""

    @property
    def ranked(self) -> list[Trial]:
        """Fastest first; but the candidates whose prediction ranges overlap the fastest's
        (:attr:`tied`) come first, among themselves by :meth:`transfer_seconds`
        (what their requests and bytes read take at the latency and bandwidth asked for),
        then requests, then bytes stored: a difference inside the noise decides nothing,
        and the counts do not depend on the run. Requests alone put a candidate that
        reads 48 MiB in 9 GETs before one that reads 2.2 MiB in 10, and which of the two
        came first then turned on whether the noise of the run tied them."""
        by_time = sorted((t for t in self.trials if t.status == "measured"), key=lambda t: t.weighted_seconds)
        tied = self.tied
        return [*sorted(tied, key=lambda t: (round(self.transfer_seconds(t), 6), round(t.weighted_requests),
                                             t.predicted_bytes, t.weighted_seconds)),
                *(t for t in by_time if t not in tied)]

    def transfer_seconds(self, trial: Trial) -> float:
        """The seconds a weighted pattern run's requests and bytes take at ``--latency`` a
        request and ``--bandwidth`` (:data:`NOMINAL_BANDWIDTH` when unlimited), one after
        another: computed from counts, the same in every run."""
        rate = self.options.bandwidth or NOMINAL_BANDWIDTH
        return trial.weighted_requests * self.options.latency + trial.weighted_bytes_read / rate

    def rank_rule(self) -> str:
        """How :attr:`ranked` orders the candidates it cannot tell apart by time, in words."""
        rate = f"{(self.options.bandwidth or NOMINAL_BANDWIDTH) / 1e6:g} MB/s"
        return (f"by what their requests and bytes read take at {self.options.latency * 1e3:g} ms a request and "
                f"{rate}, then by requests, then by bytes stored")

    @property
    def tied(self) -> list[Trial]:
        """The fastest candidate and those whose prediction's range (± its uncertainty:
        the spread of its repeated runs, carried to full size) overlaps the fastest's.
        Within the larger of the two uncertainties, not their sum, was the rule before:
        on a loaded machine the spread inside one run understates the noise between runs
        (one candidate predicted 0.09-0.20 s in six runs of the same advise, each run's
        spread saying ± 0.07-0.17), and the fastest by counts fell out of the tie in two
        runs of six, changing the answer; with the ranges it stayed in, in all six."""
        by_time = sorted((t for t in self.trials if t.status == "measured"), key=lambda t: t.weighted_seconds)
        if not by_time:
            return []
        first = by_time[0]
        return [t for t in by_time if t.weighted_seconds - t.weighted_uncertainty
                <= first.weighted_seconds + first.weighted_uncertainty]

    def tie_note(self) -> str | None:
        """What the ranking did with the candidates it could not tell apart by time."""
        tied = self.tied
        if len(tied) < 2:
            return None
        ranked = self.ranked[: len(tied)]
        first, runner = ranked[0], ranked[1]
        return (f"{len(tied)} candidates have predictions whose ranges overlap the fastest's "
                f"({', '.join(f'{t.name} {t.weighted_seconds:.3g} ± {t.weighted_uncertainty:.1g} s' for t in tied[:4])}"
                f"{', ...' if len(tied) > 4 else ''}): they are ranked {self.rank_rule()}, so "
                f"{first.name} ({_counts(first)}) comes before {runner.name} ({_counts(runner)}).")

    @property
    def recommended(self) -> Trial:
        return self.ranked[0]


def weighted_counts(trial: Trial) -> tuple[str, str, str]:
    """The weighted GETs, bytes read and bytes stored of a candidate, as the table and the
    sentences print them (one formatting, so that a sentence's numbers are its table's)."""
    return (f"{trial.weighted_requests:,.0f}", format_size(trial.weighted_bytes_read), format_size(trial.predicted_bytes))


def _counts(trial: Trial) -> str:
    gets, read, stored = weighted_counts(trial)
    return f"{gets} weighted GETs reading {read}, {stored} stored"


# -- the run ------------------------------------------------------------------------------


def typical_plan(pattern: str, archive: Archive, reads: int, seed: int,
                 sizes: dict[str, dict[str, int]] | None = None) -> ReadPlan:
    """One pattern's reads drawn from ``archive``, as verify draws them; with ``sizes``
    (the whole source's, :func:`read_sizes`), a shot or signal read takes K of typical
    size (:func:`typical_items`). advise reads its samples so, and the benchmark and the
    tests measure the full size so."""
    if sizes and sizes.get(pattern):
        names = archive.shots if pattern == "shot" else archive.signals
        return ReadPlan(pattern, typical_items(names, sizes[pattern], reads, seed, pattern))
    return plan_reads(pattern, archive, reads, seed)


def _plans(source: Path, patterns: tuple[str, ...], reads: int, seed: int, template: str,
           sizes: dict[str, dict[str, int]] | None = None) -> list[ReadPlan]:
    with open_archive(source, template=template) as archive:
        return [typical_plan(p, archive, reads, seed, sizes) for p in patterns]


def opening_plan(plans: list[ReadPlan], workers: int) -> ReadPlan:
    """Opening alone, by as many workers as the patterns read with: each opens the archive
    (one open measured where two threads each opened a 40-shot shot-major store, 42 ms of
    parsing apiece under one GIL, predicted its shot reads 31% too fast)."""
    shares = max((workers if p.per_variant else len(split(p.items, p.threads or workers)) for p in plans), default=1)
    return ReadPlan(OPENING, tuple(range(shares)))


def _remove_target(prefix: str, storage: dict[str, str]) -> None:
    """Delete every object advise wrote under ``prefix``."""
    store, key = object_store(prefix, storage)
    delete_keys(store, [k for k, _ in list_keys(store, key)])


def _observe(variants: dict[str, Variant], plans: list[ReadPlan], condition: Condition, repeat: int,
             template: str, scales: dict[str, float], warmup: int = 0,
             ) -> tuple[dict[str, dict[str, Observation]], str | None]:
    """Each plan on each sample's variant (pattern -> size -> observation), and the first
    failure a read reported (None: none): ``warmup`` untimed runs each (the first read in a process
    pays for what later ones reuse), then at least ``repeat`` and
    :data:`MIN_OBSERVED_SECONDS` of timed ones (a 0.05 s pattern's median of three is
    mostly noise), every row in turn (``measure(interleave=True)``): the model reads
    growth from the samples' difference, a few ms extended many times over, which
    timing them one after the other left to the machine's slower spells (a signal
    read's growth per shot varied 3x between runs)."""
    results = measure(list(variants.values()), plans, lambda _: [condition], repeat, template, warmup=warmup,
                      min_seconds=MIN_OBSERVED_SECONDS, interleave=True)
    observed: dict[str, dict[str, Observation]] = {plan.pattern: {} for plan in plans}
    for r in results:  # each variant is named by its sample's size
        observed[r.pattern][r.variant] = Observation(
            scales[r.variant], float(r.requests), float(r.bytes_read), r.seconds, r.cpu or 0.0, r.seconds_min,
            r.seconds_max, float(r.logical_bytes))
    return observed, next((f"the {r.pattern} pattern failed: {r.error}" for r in results if r.error), None)


def _write(candidate: Candidate, source: Path, written: Path | str, template: str, storage: dict[str, str],
           tmpdir: str | None) -> int:
    """Write the candidate from ``source``; returns the bytes it stored."""
    from layoutkit.writing import write

    options = candidate.options(template)
    return write(candidate.command, source, destination(written, storage, tmpdir), options).dest_bytes


class _Clock:
    def __init__(self, budget: float) -> None:
        self.start = time.perf_counter()
        self.deadline = self.start + budget - OUTPUT_RESERVE

    def now(self) -> float:
        return time.perf_counter()

    def left(self) -> float:
        return self.deadline - self.now()

    def check(self) -> None:
        """Raise :class:`_OverBudget` once the budget has run out."""
        if self.left() < 0:
            raise _OverBudget


class _OverBudget(Exception):
    pass


def advise(
    source: str | os.PathLike,
    options: AdviseOptions = AdviseOptions(),
    on_total: Callable[[int], None] = lambda _: None,
    on_step: Callable[[str], None] = lambda _: None,
) -> AdviseResult:
    """Sample the source, try the candidates, predict and rank them (see the module).

    Parameters
    ----------
    source
        An HDF5 file: a path, or a URL (``s3://bucket/key.h5``, read with
        ``options.storage_options``; the samples are copied from it into the work folder).
    options
        Patterns and weights, the conditions to predict for, the budget, the candidates.
    on_total, on_step
        Progress: the number of candidates; a candidate done (its name).

    Raises
    ------
    LayoutkitError
        Bad source or option; :class:`BudgetTooSmallError` when no candidate fits the
        budget.
    """
    clock = _Clock(options.budget)
    src = check_source(as_source(source, dict(options.storage_options)))  # a local file, or one in a bucket
    _check_options(options)
    inventory = read_inventory(src, workers=2)
    shots = shots_of(inventory, options.template)
    available = SHOT_ARCHIVE_PATTERNS if len(shots) >= 2 else ARRAY_PATTERNS
    recorded = _recorded(options.workload, src, inventory)
    weights = _weights(options.patterns, available, len(shots) >= 2, recorded is not None)
    trials = candidates(options.candidates, options.template)
    if options.candidates in CANDIDATE_SETS:  # names the user gave are tried in the order given
        likely = dict(weights)
        if recorded is not None:  # the workload counts as the standard pattern it resembles
            like = resembles(recorded[0], {a.path: a.shape for a in inventory.arrays}, options.template)
            weight = likely.pop(WORKLOAD)
            likely[like or WORKLOAD] = likely.get(like or WORKLOAD, 0.0) + weight
        trials = likeliest_first(trials, likely, options.template)
    storage = dict(options.storage_options)
    target = _target(options, storage)
    work = Path(tempfile.mkdtemp(prefix="layoutkit-advise-", dir=options.tmpdir))
    try:
        bench = _bench(src, inventory, shots, weights, options, work, len(trials), recorded)
        on_total(len(trials))
        estimate = 4 * (clock.now() - clock.start) + 1.0  # before any candidate: from the sampling
        done, not_tried = _try_all(trials, bench, src.name, work, target, clock, estimate, on_step)
        measured = [t for t in done if t.status == "measured"]
        if not measured:
            reasons = "; ".join(f"{t.name}: {t.reason}" for t in done[:3])
            raise LayoutkitError(f"No candidate layout could be written from {src.name}: {reasons}.")
        for t in measured:
            t.weighted_seconds = weighted({p: f.prediction.seconds for p, f in t.patterns.items()}, weights)
            t.weighted_uncertainty = weighted({p: f.uncertainty for p, f in t.patterns.items()}, weights)
            t.weighted_requests = weighted({p: f.prediction.requests for p, f in t.patterns.items()}, weights)
            t.weighted_bytes_read = weighted({p: f.prediction.bytes for p, f in t.patterns.items()}, weights)
        items = {p.pattern: [str(i) for i in p.items] for p in bench.plans if p.pattern in ("shot", "signal")}
        return AdviseResult(str(src), options, weights, bench.unit, bench.scales, bench.reads, done,
                            clock.now() - clock.start, not_tried, items, workload=bench.workload)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if target:
            _remove_target(target, storage)


def _recorded(path: str | None, src: Path | ObjectSource, inventory: Inventory) -> tuple[tuple[Any, ...], int] | None:
    """The reads of ``src`` in the workload file ``path`` (``--workload``), in order, and
    the threads the program read them from; None without a workload."""
    if path is None:
        return None
    from layoutkit.trace.workload import load, replay_items

    workload = load(path)
    return replay_items(workload, src if isinstance(src, Path) else str(src), [a.path for a in inventory.arrays]), workload.threads


def _weights(patterns: str, available: tuple[str, ...], shot_archive: bool, workload: bool) -> dict[str, float]:
    """The weights ``--patterns`` gives; with ``--workload``, the workload's too (1 unless
    given, alone when no pattern is)."""
    if not workload:
        return parse_weights(patterns or ("shot=1,signal=1" if shot_archive else "scan=1,subset=1"), available)
    weights = parse_weights(patterns, (*available, WORKLOAD)) if patterns.strip() else {}
    weights.setdefault(WORKLOAD, 1.0)
    return weights


def _check_options(options: AdviseOptions) -> None:
    if options.workers < 1:
        raise InvalidOptionError(f"Expected --workers of 1 or more. Got {options.workers}.")
    if options.repeat < 1:
        raise InvalidOptionError(f"Expected --repeat of 1 or more. Got {options.repeat}.")
    if options.sample < 1:
        raise InvalidOptionError(f"Expected --sample of 1 or more. Got {options.sample}.")
    if options.latency < 0 or options.bandwidth < 0:
        raise InvalidOptionError("Expected a latency and a bandwidth of 0 or more.")
    if options.shots is not None and options.shots < 2:
        raise InvalidOptionError(f"Expected --sample-shots of 2 or more. Got {options.shots}.")


def _target(options: AdviseOptions, storage: dict[str, str]) -> str | None:
    """This run's own prefix under ``--target`` (checked now, before any work), or None."""
    if not options.target:
        return None
    if not is_url(options.target) or is_icechunk(options.target):
        raise InvalidOptionError(f"Expected --target as a bucket prefix such as s3://bucket/scratch. Got {options.target!r}.")
    target = f"{options.target.rstrip('/')}/layoutkit-advise-{uuid.uuid4().hex[:8]}"
    _check_target(target, storage)
    return target


@dataclass(frozen=True)
class _Bench:
    """What every candidate is tried on: the two samples, the reads made on both, the
    weights, the sizes (small sample, large sample, full source), and the inventories
    of the larger sample and the source (for how a candidate stores them at full size)."""

    small: Path
    large: Path
    plans: list[ReadPlan]
    weights: dict[str, float]
    scales: tuple[float, float, float]
    unit: str
    reads: int
    inventories: tuple[Inventory, Inventory] | None
    options: AdviseOptions
    workload: SampledWorkload | None = None  # --workload: its reads, and each sample's for them


def _bench(src: Path | ObjectSource, inventory: Inventory, shots: dict[str, str], weights: dict[str, float],
           options: AdviseOptions, work: Path, candidates_count: int,
           recorded: tuple[tuple[Any, ...], int] | None = None) -> _Bench:
    small, large, scales, unit = _samples(src, inventory, shots, options, work, candidates_count, len(weights))
    # K of the smaller sample's shots, at most half of them: both samples then read a scattered part
    # of the archive, as the full one will (reading every shot of a sample reads it contiguously)
    reads = min(options.sample, max(1, int(scales[0]) // 2)) if unit == "shots" else options.sample
    # drawn from the smaller sample and made on both (the larger holds the smaller): they differ by size
    # alone. Shots and signals are K of typical size for the whole source: K random shots of a 7-shot
    # sample read 9-26% fewer bytes than K random shots of the 40-shot source did (subset.typical_items)
    sizes = read_sizes(inventory, options.template) if unit == "shots" else None
    plans = _plans(small, tuple(p for p in weights if p != WORKLOAD), reads, options.seed, options.template, sizes)
    sampled = None
    if recorded is not None:  # the program's reads, each sample making those that stand for them there
        sampled = sample_workload(recorded[0], {a.path: a.shape for a in inventory.arrays}, (small, large),
                                  options.template, unit == "shots", threads=recorded[1])
        if not sampled.large:
            raise LayoutkitError(f"None of the {len(recorded[0])} reads of {options.workload} has a stand-in in the "
                                 "samples advise wrote (the arrays they read are not in them).")
        plans.append(ReadPlan(WORKLOAD, sampled.large, by_variant=(("small", sampled.small), ("large", sampled.large)),
                              threads=sampled.threads))
    # every pattern opens the archive, which costs more as it grows: opening alone is measured too (not the
    # open pattern, which also lists every array: a paged file's listing grew 3x faster than its opening)
    plans.append(opening_plan(plans, options.workers))
    # the larger sample's and the source's arrays, for how a candidate stores them at full size (a paged
    # file's pages, pages.py; a Zarr store's shards, _resharded)
    inventories = (read_inventory(large, workers=1), inventory) if unit == "shots" else None
    return _Bench(small, large, plans, weights, scales, unit, reads, inventories, options, sampled)


def _try_all(trials: list[Candidate], bench: _Bench, source_name: str, work: Path, target: str | None, clock: _Clock,
             estimate: float, on_step: Callable[[str], None]) -> tuple[list[Trial], list[str]]:
    """Each candidate in turn while the budget lasts: (the trials, the candidates not tried)."""
    options = bench.options
    done: list[Trial] = []
    for i, candidate in enumerate(trials):
        if bench.unit != "shots" and needs_shots(candidate, options.template):
            done.append(Trial(candidate.name, candidate.command, candidate.recipe_values(options.template),
                              "not applicable", f"it orders a shot archive, and {options.template} matches "
                              f"nothing in {source_name}"))  # fmt: skip
            on_step(candidate.name)
            continue
        if any(t.seconds_spent for t in done) and clock.left() < max(t.seconds_spent for t in done) * 1.1:
            return done, [c.name for c in trials[i:]]
        if not any(t.status == "measured" for t in done) and clock.left() < estimate:
            _too_small(options.budget, bench.unit, bench.scales, clock)
        trial = _try(candidate, bench, work / f"c{i}", f"{target}/c{i}" if target else None, clock)
        if trial.status == "over budget" and not any(t.status == "measured" for t in done):
            _too_small(options.budget, bench.unit, bench.scales, clock)
        done.append(trial)
        on_step(candidate.name)
        if trial.status == "over budget":
            return done, [c.name for c in trials[i + 1 :]]
    return done, []


def _check_target(target: str, storage: dict[str, str]) -> None:
    """Refuse, before any work, a target bucket that cannot be listed (no such bucket,
    no access, no endpoint)."""
    store, key = object_store(target, storage)
    try:
        list_keys(store, key)
    except Exception as exc:  # noqa: BLE001 - obstore raises its own classes; describe_store_error names them
        raise InvalidOptionError(describe_store_error(target, exc)) from None


def needs_shots(candidate: Candidate, template: str) -> bool:
    """Whether the candidate's layout orders shots and signals (it refuses other files)."""
    options = candidate.options(template)
    return layout_for(candidate.command, options).needs_shot_archive(options)


def _too_small(budget: float, unit: str, scales: tuple[float, float, float], clock: _Clock) -> None:
    size = f"{scales[1]:.0f}-shot" if unit == "shots" else f"{scales[1] / 1e6:.0f} MB"
    needed = clock.now() - clock.start + OUTPUT_RESERVE
    raise BudgetTooSmallError(
        f"A --budget of {budget:g} s is too small to build one candidate layout from a {size} sample "
        f"(sampling alone took {needed:.1f} s); give a larger --budget, such as {max(30, int(needed * 8))}s."
    )


def sample_shots(budget: float, candidates: int, patterns: int) -> int:
    """Shots in the larger sample so that every candidate fits 80% of the budget: each
    costs about :data:`SECONDS_PER_SHOT_AND_PASS` per shot for writing and for each
    pattern (at least 2 shots; the budget then stops at the candidates that fit)."""
    passes = candidates * (1 + patterns)
    return max(2, int(0.8 * budget / (passes * SECONDS_PER_SHOT_AND_PASS)))


def _samples(src: Path | ObjectSource, inventory: Inventory, shots: dict[str, str], options: AdviseOptions, work: Path,
             candidates: int, patterns: int) -> tuple[Path, Path, tuple[float, float, float], str]:
    """Write the two samples; returns their paths, the sizes (small, large, full) and the
    unit of size."""
    if len(shots) >= 2:
        names = list(shots)
        stored = sum(a.storage_bytes for a in inventory.arrays) or 1
        per_shot = stored / len(names)
        count = options.shots or sample_shots(options.budget, candidates, patterns)
        count = max(2, min(count, len(names), int(MAX_SAMPLE_BYTES // max(1.0, per_shot))))
        large_shots = spread(names, count)
        small_shots = large_shots[::2]
        parts: tuple[Part, Part] = (shot_part(inventory, shots, small_shots), shot_part(inventory, shots, large_shots))
        full = float(len(names))
        unit = "shots"
    else:
        full = float(sum(a.storage_bytes for a in inventory.arrays) or 1)
        target = min(full, MAX_SAMPLE_BYTES, max(8e6, options.budget * 2e6))
        parts = (array_part(inventory, int(target / 2)), array_part(inventory, int(target)))
        unit = "bytes"
    small = write_part(src, inventory, parts[0], work / "sample-small.h5")
    large = write_part(src, inventory, parts[1], work / "sample-large.h5")
    return small, large, (parts[0].scale, parts[1].scale, full), unit


def _try(candidate: Candidate, bench: _Bench, work: Path, where: str | None, clock: _Clock) -> Trial:
    """Write the candidate from both samples (under ``where`` in a bucket, else in
    ``work``), prove it equal, measure every read on both and predict each at full size."""
    from layoutkit.verify.equality import compare_variant

    options = bench.options
    started = clock.now()
    trial = Trial(candidate.name, candidate.command, candidate.recipe_values(options.template))
    work.mkdir()
    layout = layout_for(candidate.command, candidate.options(options.template))
    written: dict[str, Path | str] = (
        {size: f"{where}/{size}{layout.suffix}" for size in ("small", "large")} if where
        else {size: work / f"{size}{layout.suffix}" for size in ("small", "large")}
    )
    if "local" not in layout.destinations:  # a layout that writes only Icechunk repositories (virtual)
        written = {size: f"icechunk:{place}" for size, place in written.items()}
    storage = dict(options.storage_options)
    samples = {"small": bench.small, "large": bench.large}
    try:
        stored, build = {}, {}
        for size in ("small", "large"):
            t0 = clock.now()
            stored[size] = _write(candidate, samples[size], written[size], options.template, storage, str(work))
            build[size] = clock.now() - t0
            clock.check()
        mismatches = compare_variant(bench.large, written["large"], workers=2, storage_options=storage)
        if mismatches:
            trial.status, trial.reason = "different", f"{len(mismatches)} mismatches, e.g. {mismatches[0]}"
            return trial
        trial.stored_bytes = (stored["small"], stored["large"])
        trial.build_seconds = (build["small"], build["large"])
        # the full page buffer on the samples too: shrunk with them, it thrashes on metadata pages the full
        # file keeps (measured: 206 GETs predicted for a shot read that takes 18)
        page_buffer = options.page_buffer if layout.format == "hdf5" else None
        measured = _measure(bench, written, page_buffer, clock)
        if isinstance(measured, str):
            trial.status, trial.reason = "failed", measured
            return trial
        observed, at_latency = measured
        paged = (_paged_files(candidate, options.template, bench.inventories, _data_bytes(written["large"], storage))
                 if page_buffer else None)
        resharded = _resharded(candidate, options.template, bench.inventories) if "shot" in bench.weights else None
        page_seconds = _page_seconds(written["large"], paged[1].page) if paged is not None else None
        for plan in bench.plans:
            if plan.pattern in bench.weights:
                trial.patterns[plan.pattern] = _fit(plan, bench, observed, at_latency, page_buffer, paged, resharded,
                                                    page_seconds)
        trial.workload_costs = _workload_costs(bench, written["large"], storage, page_buffer)
        trial.predicted_bytes = (_extend_bytes(bench.scales, trial.stored_bytes) if paged is None
                                 else _paged_bytes(paged[1], bench.scales, _metadata_bytes(written, storage)))
        trial.predicted_build_seconds = _extend_build(bench.scales, trial.build_seconds)
    except _OverBudget:
        trial.status, trial.reason, trial.patterns = "over budget", "the budget ran out while it was measured", {}
    except LayoutkitError as exc:
        trial.status, trial.reason = "not applicable", first_line(exc)
    except StoreError as exc:  # --target: the bucket failed a request; the candidate is not measured
        trial.status, trial.reason = "failed", describe_store_error(where or "", exc)
    finally:
        trial.seconds_spent = clock.now() - started
        shutil.rmtree(work, ignore_errors=True)
        if where:
            _remove_target(where, storage)
    return trial


def _workload_costs(bench: _Bench, written: Path | str, storage: dict[str, str],
                    page_buffer: int | None) -> list[tuple[str, int, int]]:
    """With ``--workload``: its reads' requests and bytes on the candidate written from the
    larger sample, by signal or array (:func:`layoutkit.advise.workload.costliest`)."""
    if bench.workload is None:
        return []
    return costliest(written, bench.workload.large, bench.options.template, storage, bench.unit == "shots", page_buffer)


Observed = dict[str, dict[str, Observation]]  # pattern -> sample size -> what its reads made


def _measure(bench: _Bench, written: dict[str, Path | str], page_buffer: int | None,
             clock: _Clock) -> tuple[Observed, dict[str, dict[str, float]]] | str:
    """Every read on both written samples, here (no latency), then at the latency asked
    for: (what they made, their seconds at that latency); or why a read failed."""
    options = bench.options
    variants = {size: describe(w, size, True, options.template, options.storage_options)
                for size, w in written.items()}  # opened once each, not once per measurement
    local = Condition("threads", options.workers, page_buffer, "warm", 0.0, 0.0)
    remote = Condition("threads", options.workers, page_buffer, "warm", options.latency, options.bandwidth)
    sample_scales = {"small": bench.scales[0], "large": bench.scales[1]}
    observed, error = _observe(variants, bench.plans, local, options.repeat, options.template, sample_scales, warmup=1)
    if error:
        return error
    clock.check()
    at_latency = {pattern: {size: o.seconds for size, o in sizes.items()} for pattern, sizes in observed.items()}
    if options.latency or options.bandwidth:
        timed, _ = _observe(variants, [p for p in bench.plans if p.pattern in bench.weights], remote, options.repeat,
                            options.template, sample_scales)
        for pattern, sizes in timed.items():
            at_latency[pattern] = {size: o.seconds for size, o in sizes.items()}
        clock.check()
    return observed, at_latency


def _fit(plan: ReadPlan, bench: _Bench, observed: Observed, at_latency: dict[str, dict[str, float]],
         page_buffer: int | None, paged: tuple[PagedFile, PagedFile] | None, resharded: int | None, page_seconds: float | None) -> PatternFit:
    """One pattern's prediction at full size, from what it made on both samples."""
    options, scales, pattern = bench.options, bench.scales, plan.pattern
    obs = observed[pattern]
    c_small, c_large = (fit_concurrency(obs[size], at_latency[pattern][size], options.latency, options.bandwidth)
                        for size in ("small", "large"))
    growing = bench.workload.grows if pattern == WORKLOAD and bench.workload is not None else None
    counts = full_counts(obs["small"], obs["large"], scales[2], pattern, growing)
    extra, pages_cost = None, None
    if paged is not None and pattern == WORKLOAD and bench.workload is not None:
        # the pages the program's own reads touch in the full file, beyond those its stand-ins touch in the sample's
        extra = _workload_pages(paged, bench.workload, page_buffer or 0)
        counts = (max(counts[0], obs["large"].requests + extra),
                  max(counts[1], obs["large"].bytes + extra * paged[1].page))
        pages_cost = page_seconds
    elif paged is not None and pattern in PAGED_PATTERNS:
        # verify's thread workers share one open file and its page buffer, reading at once (a buffer
        # per worker counted 51 pages for a signal read that fetched 25; one reader, 45)
        extra = extra_requests(*paged, pattern, [str(i) for i in plan.items], options.workers,
                               page_buffer or 0, options.template, shared=True)  # fmt: skip
        counts = (max(counts[0], obs["large"].requests + extra),
                  max(counts[1], obs["large"].bytes + extra * paged[1].page))
        pages_cost = page_seconds
    elif resharded is not None and pattern == "shot":
        # K shots read the same arrays however large the archive: their requests change only where
        # the full store keeps an array otherwise, one shard index more per shot read for each array
        # the sample stores whole and the full store shards; and each request fetches what it did on
        # the sample, as the planner sizes chunks by bytes, not by the archive (the line in log of the
        # size through 5 and 9 shots grew signal-major Zarr's 14.8 MB to 20.1 MB for 16.5 MB fetched,
        # and the local time by bytes with it: its shot read was predicted +44% in two runs of three)
        requests = obs["large"].requests + resharded * len(plan.items)
        per_request = obs["large"].bytes / obs["large"].requests if obs["large"].requests else 0.0
        counts = (requests, per_request * requests if per_request else counts[1])
    c = grown_concurrency(obs["small"].requests, c_small, obs["large"].requests, c_large, counts[0])
    others = {} if pattern == "open" else observed[OPENING]
    prediction = predict(obs["small"], obs["large"], scales[2], options.latency, options.bandwidth, c,
                         others.get("small"), others.get("large"), pattern, counts, pages_cost, growing)  # fmt: skip
    return PatternFit(obs["small"], obs["large"], at_latency[pattern]["small"], at_latency[pattern]["large"],
                      prediction, extra, growing)


def _workload_pages(paged: tuple[PagedFile, PagedFile], workload: SampledWorkload, buffer: int) -> int:
    """Data pages the workload's reads fetch from the full paged file beyond those its
    stand-ins fetch from the larger sample's, each read taken as its whole array (the
    geometry knows arrays, not selections), dealt to the program's threads as the replay
    deals them."""
    large, full = paged

    def pages(file: PagedFile, items: tuple[Any, ...]) -> int:
        return file.array_requests([[path] for path, _ in items], workload.threads, buffer)

    return max(0, pages(full, workload.full) - pages(large, workload.large))


def _resharded(candidate: Candidate, template: str, inventories: tuple[Inventory, Inventory] | None) -> int | None:
    """For a Zarr candidate, how many of its arrays the store written from the larger
    sample keeps unsharded that the full source's store would shard (the same planner,
    on both inventories); None for another candidate. A shot read makes as many requests
    at full size as on that sample, plus a shard index per shot for each of these
    (measured on the 40-shot benchmark, signal-major Zarr's read of 2 shots: 273 GETs at
    5 shots, 16 such arrays, 307 at 9, one, 307-308 at 13, 20 and 40; the line in log
    of the size through 5 and 9 shots predicted 395)."""
    options = candidate.options(template)
    layout = layout_for(candidate.command, options)
    if layout.format != "zarr" or inventories is None:
        return None
    try:
        large, full = ({a.path: a.shards is not None for a in layout.plan(i, options, {}).arrays} for i in inventories)
    except LayoutkitError:
        return None
    return sum(1 for path, sharded in large.items() if not sharded and full.get(path, False))


PAGE_TIMING_SECONDS = 0.05  # a paged file's pages are read for at least this long to time one


def _page_seconds(written: Path | str, page: int) -> float | None:
    """What reading one page of a written paged file costs here (from the page cache, as
    verify's warm reads find it): whole pages read until :data:`PAGE_TIMING_SECONDS` have
    passed. None for a file in a bucket, whose pages cost requests, counted already."""
    if is_url(str(written)):
        return None
    pages, started = 0, time.perf_counter()
    with open(written, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        if not size:
            return None
        while True:
            for offset in range(0, size, page):
                os.pread(f.fileno(), page, offset)
                pages += 1
            if time.perf_counter() - started >= PAGE_TIMING_SECONDS:
                return (time.perf_counter() - started) / pages


def _data_bytes(written: Path | str, storage: dict[str, str]) -> int:
    """The bytes a written file's datasets hold. Not its size: a paged file is whole pages
    (a sample's 14.6 MB of data in 3 pages of 8 MiB, 25.2 MB), and scaling the full
    file's arrays by that laid them out over 12 pages where reorder wrote 6 (18 pages
    predicted for a shot read that fetched 10)."""
    return sum(a.storage_bytes for a in read_inventory(as_source(str(written), storage), workers=1).arrays)


def _paged_files(candidate: Candidate, template: str, inventories: tuple[Inventory, Inventory] | None,
                 stored_large: int) -> tuple[PagedFile, PagedFile] | None:
    """The candidate's paged file as written from the larger sample and as it would be
    from the full source (the same plan ``reorder`` makes; every array at its stored size
    scaled by the bytes the candidate's datasets hold against the sample's source): None for a
    candidate that writes no paged file."""
    options = candidate.options(template)
    layout = layout_for(candidate.command, options)
    if layout.format != "hdf5" or inventories is None:
        return None
    large_source = sum(a.storage_bytes for a in inventories[0].arrays) or 1
    ratio = stored_large / large_source
    out = []
    for inventory in inventories:
        plan = layout.plan(inventory, options, {})
        sizes = {a.path: round(a.storage_bytes * ratio) for a in inventory.arrays}
        scales_of = {a.path: [s for axis in a.dim_scales for s in axis] for a in inventory.arrays if a.dim_scales}
        out.append(PagedFile(plan.order, sizes, scales_of, plan.page_size))
    return out[0], out[1]


def _extend_bytes(scales: tuple[float, float, float], stored: tuple[int, int]) -> float:
    return extend(scales[0], stored[0], scales[1], stored[1], scales[2])


def _metadata_bytes(written: dict[str, Path | str], storage: dict[str, str]) -> tuple[int, int]:
    """The metadata bytes (object headers, their indexes and heaps, as ``h5stat -S``
    counts them) of the HDF5 files written from the small and the large sample."""
    from layoutkit.hdf5.files import open_h5
    from layoutkit.hdf5.walk import walk_objects

    out = []
    for size in ("small", "large"):
        with open_h5(as_source(str(written[size]), storage)) as f:
            out.append(walk_objects(f.id).metadata_bytes)
    return out[0], out[1]


def _paged_bytes(full: PagedFile, scales: tuple[float, float, float], metadata: tuple[int, int]) -> float:
    """A paged file's size from the whole source: whole pages (paged aggregation keeps
    raw data and metadata on pages of their own), its data pages as its geometry lays the
    full archive out, and its metadata on the line through the samples' metadata bytes.
    The samples' sizes on a line predicted 32 MiB for a file of 24 (issue 66): a sample
    of one page of data and one of metadata is two whole pages however little it holds."""
    meta = extend(scales[0], metadata[0], scales[1], metadata[1], scales[2])
    return float((full.data_pages + max(1, -(-int(meta) // full.page))) * full.page)


def _extend_build(scales: tuple[float, float, float], seconds: tuple[float, float]) -> float:
    """Seconds to write the whole source: the samples' times on the line through them,
    never below the larger sample's time scaled by size alone at half its rate (a small
    sample's fixed costs, start-up and the root, can make the line fall)."""
    line = extend(scales[0], seconds[0], scales[1], seconds[1], scales[2])
    return max(line, 0.5 * seconds[1] * scales[2] / max(scales[1], 1e-12), seconds[1])


# -- outputs ------------------------------------------------------------------------------


def to_json(result: AdviseResult) -> dict[str, Any]:
    """The whole run as plain data (``results.json``)."""
    price = result.options.price_per_1000_get / 1000
    trials = []
    for t in result.trials:
        trials.append({
            "name": t.name, "command": t.command, "recipe": t.recipe, "status": t.status, "reason": t.reason,
            "seconds_spent": t.seconds_spent,
            "stored_bytes_samples": list(t.stored_bytes), "stored_bytes_predicted": t.predicted_bytes,
            "build_seconds_samples": list(t.build_seconds), "build_seconds_predicted": t.predicted_build_seconds,
            "weighted_seconds": None if t.status != "measured" else t.weighted_seconds,
            "weighted_uncertainty": None if t.status != "measured" else t.weighted_uncertainty,
            "weighted_requests": None if t.status != "measured" else t.weighted_requests,
            "weighted_bytes_read": None if t.status != "measured" else t.weighted_bytes_read,
            "patterns": {
                p: {
                    "predicted": {**asdict(f.prediction), "seconds": f.prediction.seconds,
                                  "uncertainty": f.uncertainty, "get_cost": f.prediction.requests * price},
                    "small": asdict(f.small), "large": asdict(f.large),
                    "samples_alike": f.may_be_low(p),  # no growth seen: may predict low
                    "extra_pages": f.extra_pages,
                    "small_seconds_at_latency": f.small_seconds_at_latency,
                    "large_seconds_at_latency": f.seconds_at_latency,
                }
                for p, f in t.patterns.items()
            },
            "workload_costs": [{"reads_of": k, "requests": r, "bytes": b} for k, r, b in t.workload_costs],
        })  # fmt: skip
    ranked = result.ranked
    return {
        "source": result.source,
        "options": asdict(result.options),
        "weights": result.weights,
        "unit": result.unit,
        "sample": {"small": result.scales[0], "large": result.scales[1], "full": result.scales[2],
                   "reads_per_pattern": result.reads},
        "read_items": result.read_items,
        "elapsed_seconds": result.elapsed,
        "budget_seconds": result.options.budget,
        "recommended": ranked[0].name,
        "rewrite": rewrite_verdict(result),
        "tied": [t.name for t in result.tied] if len(result.tied) > 1 else [],
        "tie_note": result.tie_note(),
        "runner_up": ranked[1].name if len(ranked) > 1 else None,
        "ranking": [t.name for t in ranked],
        "not_tried": result.not_tried,
        "workload": None if result.workload is None else {"file": result.options.workload, **result.workload.to_json()},
        "candidates": trials,
    }  # fmt: skip


NO_REWRITE_WITHIN = 0.2
"""A layout of references whose weighted time is within this fraction of the best
rewritten layout's: the rewrite does not pay."""


def rewrite_verdict(result: AdviseResult) -> str | None:
    """Whether rewriting pays, when a layout that does not rewrite (references into the
    source) was measured beside layouts that do: its weighted time against the best
    rewritten one's, and the pattern where it loses most. None when not both measured.
    One the ranking cannot tell from the fastest (:attr:`AdviseResult.tied`) needs no
    rewrite either: the verdict never contradicts the recommendation."""
    def rewrites(trial: Trial) -> bool:
        layout = get_layout(str(trial.recipe.get("layout"))) if trial.recipe.get("layout") else None
        return layout is None or layout.rewrites

    ranked = result.ranked
    kept = next((t for t in ranked if not rewrites(t)), None)
    copied = next((t for t in ranked if rewrites(t)), None)
    if kept is None or copied is None:
        return None
    cost = (f" (building it: about {duration_text(kept.predicted_build_seconds)} against "
            f"{duration_text(copied.predicted_build_seconds)} to rewrite)") if copied.predicted_build_seconds else ""
    as_fast = kept.weighted_seconds <= copied.weighted_seconds * (1 + NO_REWRITE_WITHIN) or kept in result.tied
    if as_fast and ranked[0] is not kept:  # the recommendation is a rewrite: say what it gains, not the opposite
        close = (f"as fast as {copied.name}, within the uncertainty of the predictions," if kept in result.tied
                 else f"{kept.weighted_seconds / copied.weighted_seconds - 1:.0%} slower than {copied.name}")
        return (f"{kept.name} (no rewrite) is {close} for your patterns, but makes {kept.weighted_requests:,.0f} "
                f"weighted GETs to its {copied.weighted_requests:,.0f}; for speed alone nothing need change, for "
                f"fewer requests (what a bucket bills): rewrite{cost}.")
    if kept.weighted_seconds <= copied.weighted_seconds * (1 + NO_REWRITE_WITHIN):
        within = kept.weighted_seconds / copied.weighted_seconds - 1
        how = f"is within {within:.0%} of" if within > 0.005 else "is as fast as, or faster than,"
        return (f"{kept.name} (no rewrite) {how} the best rewritten layout, {copied.name}, for your patterns: "
                f"no rewrite needed{cost}.")
    if kept in result.tied:  # the ranking cannot tell it from the fastest: neither can the verdict
        fastest = result.tied[0]
        return (f"{kept.name} (no rewrite) is predicted {kept.weighted_seconds / fastest.weighted_seconds:.1f}x "
                f"the time of the fastest, {fastest.name}, over your patterns, within the uncertainty of the "
                f"predictions: no rewrite needed{cost}.")
    worst = max((p for p in kept.patterns if p in copied.patterns),
                key=lambda p: kept.patterns[p].prediction.seconds / max(copied.patterns[p].prediction.seconds, 1e-12))
    times = kept.patterns[worst].prediction.seconds / max(copied.patterns[worst].prediction.seconds, 1e-12)
    return (f"{kept.name} (no rewrite) reads the {worst} pattern {times:.1f}x slower than {copied.name}, "
            f"{kept.weighted_seconds / copied.weighted_seconds:.1f}x over your patterns: rewrite{cost}.")


def recommended_toml(result: AdviseResult) -> str:
    """The recommended layout as a recipe ``--recipe`` takes."""
    import tomli_w

    from layoutkit.recipes import parse_recipe

    best = result.recommended
    recipe = dict(best.recipe)
    conditions = f"{result.options.latency * 1e3:g} ms latency, {result.options.workers} workers"
    patterns = ", ".join(f"{p}={w:g}" for p, w in result.weights.items())
    doc = {
        "target": recipe.pop("target"),
        "description": (
            f"Recommended by layoutkit advise for {Path(result.source).name} (patterns {patterns}; {conditions}): "
            f"candidate {best.name}, predicted {best.weighted_seconds:.3g} s weighted per pattern run at full size."
        ),
        **recipe,
    }
    text = tomli_w.dumps(doc)
    parse_recipe(text, name="recommended")  # what we write must load
    return text


def write_command(result: AdviseResult, recipe_path: Path) -> str:
    """The exact command that writes the recommended layout, beside SRC (in its bucket
    for a URL, with the storage options given, secrets left out: they come from the
    environment)."""
    src = as_source(result.source)
    best = result.recommended
    layout = layout_for(best.command, SimpleNamespace(**best.recipe))  # the full recipe: its layout key too
    dst = f"{src.stem}-{best.name}{layout.suffix}"  # beside, never over, SRC
    command = f"layoutkit {best.command} {src} {src.with_name(dst)} --recipe {recipe_path}"
    if isinstance(src, ObjectSource):
        command += "".join(f" --storage-option {k}={v}" for k, v in result.options.storage_options
                           if not re.search("key|secret|token|password", k, re.I))
    return command


def plot(result: AdviseResult, out: Path) -> Path:
    """Predicted seconds per candidate and pattern, best first (``advise.png``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ranked = result.ranked
    patterns = list(result.weights)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(ranked) + 1.6))
    y = np.arange(len(ranked))
    height = 0.8 / (len(patterns) + 1)
    for i, p in enumerate([*patterns, "weighted"]):
        values = [t.weighted_seconds if p == "weighted" else t.patterns[p].prediction.seconds for t in ranked]
        ax.barh(y + i * height, values, height, label=p, hatch="//" if p == "weighted" else None)
    ax.set_yticks(y + height * len(patterns) / 2, [t.name for t in ranked])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("predicted seconds at full size (log)")
    ax.set_title(
        f"advise: {Path(result.source).name}, {result.options.latency * 1e3:g} ms latency, "
        f"{result.options.workers} workers; best first",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "advise.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(result: AdviseResult, out: Path) -> list[Path]:
    """``results.json``, ``recommended.toml`` and ``advise.png`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.json"
    results.write_text(json.dumps(to_json(result), indent=1, default=str))
    recipe = out / "recommended.toml"
    recipe.write_text(recommended_toml(result))
    return [results, recipe, plot(result, out)]


__all__ = [
    "AdviseOptions",
    "AdviseResult",
    "BudgetTooSmallError",
    "Trial",
    "advise",
    "parse_budget",
    "parse_weights",
    "recommended_toml",
    "rewrite_verdict",
    "to_json",
    "weighted_counts",
    "write_command",
    "write_outputs",
]
