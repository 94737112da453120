"""The cost model of ``advise``: fit on two samples, predict at the source's full size.

For one candidate layout and one read pattern, the two samples (sizes ``s1 < s2``, in
shots, or stored bytes for a file that is not a shot archive) are measured without
latency, giving requests ``R``, bytes fetched ``B``, local seconds ``T0`` (decoding,
copying, Python: all but waiting for the store) and CPU seconds, and with the latency
``L`` and per-request bandwidth ``W`` given, giving ``T_L``.

Both samples make the same reads (the same K shots, signals or hyperslabs, drawn from
the smaller sample, which the larger one contains; ``scan`` reads each whole), so what
differs between them is the archive's size: opening a bigger archive, a signal over
more shots, a shot spread over more pages of a signal-ordered file.

**Counts at full size** ``S``: requests and bytes are counted, not timed, so they
extend through the two samples, never falling: along a line in ``S`` for a pattern whose
reads grow with the archive (``signal``, ``scan``, ``open``), along a line in ``log S``
for one that reads a fixed amount (``shot``, ``subset``, ``axis``): its K items spread
over more objects or pages as the archive grows, but at most one each. (Measured on the
40-shot benchmark: linear growth overshot two of three such layouts by 44%, the log
line missed one by 43%, the others within 17%.)

**Time.** ``T(S) = T0(S) + (R(S) * L + B(S) / W) / c``: local work, plus
requests x latency and bytes / bandwidth over the concurrency ``c``, where

- ``c = (R * L + B / W) / (T_L - T0)``: how many requests overlapped, on average,
  clipped to [1, 256]; fitted on each sample, and extended along the line through the
  two in ``R`` (a reader that sends its requests together overlaps more of them when
  there are more);
- ``T0(S)`` is opening plus reading: opening (every pattern opens the archive) follows
  the line of opening alone (open, read nothing), and reading grows by its local cost
  per request, per byte fetched or per byte delivered measured between the samples,
  whichever grows more, each at
  most the larger sample's average (local work cannot grow faster than the requests
  and bytes it handles), and the average itself where both samples made the same
  count.

**Paged HDF5** hides its growth from small samples, which fit the same few pages; its
requests and bytes at full size come from the file's geometry instead
(:mod:`layoutkit.advise.pages`), passed to :func:`predict` as ``counts``. So do a Zarr
store's shot reads: K shots read the same arrays' chunks however large the archive, a
shard index more where the full store shards an array the sample keeps whole, each
request fetching what it did on the larger sample (``advise.run._resharded``).

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_CONCURRENCY = 256.0


@dataclass(frozen=True)
class Observation:
    """One pattern on one candidate written from a sample of size ``scale``, without
    latency (``seconds`` is the median wall time, ``cpu`` the process CPU seconds,
    ``fastest`` and ``slowest`` the range of the runs; None: the median alone)."""

    scale: float
    requests: float
    bytes: float
    seconds: float
    cpu: float
    fastest: float | None = None
    slowest: float | None = None
    logical: float = 0.0  # bytes delivered, decoded (the same on every layout)


def separated(small: Observation, large: Observation) -> bool:
    """Whether the larger sample's runs were all slower than the smaller one's: only
    then is their difference read as growth, not noise."""
    low = large.seconds if large.fastest is None else large.fastest
    high = small.seconds if small.slowest is None else small.slowest
    return low > high


@dataclass(frozen=True)
class Prediction:
    """A pattern's predicted cost at one size."""

    requests: float
    bytes: float
    local_seconds: float
    network_seconds: float
    cpu: float
    concurrency: float

    @property
    def seconds(self) -> float:
        return self.local_seconds + self.network_seconds


def extend(x1: float, y1: float, x2: float, y2: float, x: float) -> float:
    """The line through ``(x1, y1)`` and ``(x2, y2)`` at ``x``, with its slope floored at
    zero and the result at zero."""
    return max(0.0, y2 + slope(x1, y1, x2, y2) * (x - x2))


def slope(x1: float, y1: float, x2: float, y2: float) -> float:
    """The slope between two points, floored at zero (0 when ``x1 == x2``)."""
    return max(0.0, (y2 - y1) / (x2 - x1)) if x2 != x1 else 0.0


def network_cost(requests: float, nbytes: float, latency: float, bandwidth: float) -> float:
    """Seconds of waiting one worker would spend with no overlap: ``R * L + B / W``."""
    return requests * latency + (nbytes / bandwidth if bandwidth else 0.0)


def fit_concurrency(large: Observation, seconds_at_latency: float, latency: float, bandwidth: float) -> float:
    """How many requests overlapped, on average, in the run with latency."""
    wait = network_cost(large.requests, large.bytes, latency, bandwidth)
    if wait <= 0:
        return 1.0
    spent = seconds_at_latency - large.seconds
    if spent <= 0:
        return MAX_CONCURRENCY
    return min(MAX_CONCURRENCY, max(1.0, wait / spent))


def grown_concurrency(requests_small: float, c_small: float, requests_large: float, c_large: float,
                      requests: float) -> float:
    """The concurrency at ``requests``, along the line through the two samples' (a reader
    that issues its requests together overlaps more of them when there are more; one
    that issues them one by one stays where it was). A sample with no measurable wait
    (the cap) gives no line: the larger sample's concurrency stays."""
    if MAX_CONCURRENCY in (c_small, c_large):
        return c_large
    return min(MAX_CONCURRENCY, max(1.0, extend(requests_small, c_small, requests_large, c_large, requests)))


def extend_log(x1: float, y1: float, x2: float, y2: float, x: float) -> float:
    """As :func:`extend`, along a line in ``log x``: growth that slows as ``x`` grows."""
    if x1 <= 0 or x2 <= 0 or x <= 0:
        return extend(x1, y1, x2, y2, x)
    return extend(math.log(x1), y1, math.log(x2), y2, math.log(x))


GROWING = frozenset({"signal", "scan", "list"})  # patterns whose reads grow with the archive


def grows(pattern: str, growing: bool | None = None) -> bool:
    """Whether the reads of ``pattern`` grow with the archive: :data:`GROWING`, or what the
    caller knows (``growing``: a replayed workload reads more of the larger sample, or
    the same, :mod:`layoutkit.advise.workload`)."""
    return pattern in GROWING if growing is None else growing


def samples_alike(small: Observation, large: Observation, pattern: str, growing: bool | None = None) -> bool:
    """Whether a read that grows with the archive (:data:`GROWING`) made the same
    requests and fetched the same bytes on both samples: the line through them then
    predicts no growth, which the full archive may well show (measured: a paged file's
    signal read fetched the same 14 pages of 8 MiB at 7 and at 13 shots, and 19 at 40,
    predicted 51% too fast)."""
    return (grows(pattern, growing) and small.scale < large.scale and small.requests == large.requests
            and small.bytes == large.bytes)


def full_counts(small: Observation, large: Observation, scale: float, pattern: str = "signal",
                growing: bool | None = None) -> tuple[float, float]:
    """Requests and bytes at size ``scale``: along the line through the two samples for
    a pattern whose reads grow with the archive (:data:`GROWING`); in ``log`` of the
    size for one that reads a fixed amount, which spreads over more objects or pages as
    the archive grows, but at most one per item it reads."""
    line = extend if grows(pattern, growing) else extend_log
    return (line(small.scale, small.requests, large.scale, large.requests, scale),
            line(small.scale, small.bytes, large.scale, large.bytes, scale))


def full_logical(small: Observation, large: Observation, scale: float, pattern: str = "signal",
                 growing: bool | None = None) -> float:
    """Bytes delivered at size ``scale``, along the same line as :func:`full_counts`: a
    signal read delivers the signal of every shot, a shot read the same K shots."""
    line = extend if grows(pattern, growing) else extend_log
    return line(small.scale, small.logical, large.scale, large.logical, scale)


def local_seconds(small: Observation, large: Observation, scale: float, requests: float, nbytes: float = 0.0,
                  open_small: Observation | None = None, open_large: Observation | None = None,
                  logical: float = 0.0, page_seconds: float | None = None) -> float:
    """Local seconds at size ``scale``: opening, along the line of opening alone, plus
    the reads, grown by their local cost per request or per byte measured between the
    samples (each at most the larger sample's average), whichever grows more: a
    signal-major signal read fetches the same few objects from a bigger archive, but
    each holds more shots to decode (measured: 8 GETs at 13 and at 40 shots, 3.3x the
    bytes, 2.4x the local time). Bytes are those fetched and those delivered
    (``logical``): a paged file's signal read fetched the same 14 pages at 7 and at 13
    shots, but delivered 2.8 and 5.1 MB in 0.068 and 0.107 s, and at 40 shots 16 MB in
    0.321 s. Growth by bytes counts only where the samples' runs are :func:`separated`: on samples of 2 and 4 shots, reads of 3-6 ms whose noise,
    grown 6x by bytes, ranked signal-major Zarr behind shot-major (0.071 s predicted,
    0.046 s measured).

    ``page_seconds``: the requests at full size are a paged file's pages counted from its
    geometry, each of those it adds costing this much (reading a page, measured): the
    pages a larger file adds are read for a piece of what they hold, so the larger
    sample's average per request, which is mostly decoding, charged 33 ms to each where
    the page cost 2 ms (cmod-signal's shot read at 40 shots predicted +94%)."""
    if open_small is None or open_large is None:
        open_small = open_large = Observation(0, 0, 0, 0, 0)
    opening = extend(open_small.scale, open_small.seconds, open_large.scale, open_large.seconds, scale)
    read_small = max(0.0, small.seconds - open_small.seconds)
    read_large = max(0.0, large.seconds - open_large.seconds)

    def growth(count_small: float, count_large: float, count: float) -> float:
        average = read_large / count_large if count_large else 0.0
        if count_small == count_large:  # no slope to read (the counts came from elsewhere): the average
            return average * max(0.0, count - count_large)
        per_unit = slope(count_small, read_small, count_large, read_large)
        if count_large:
            per_unit = min(per_unit, average)
        return per_unit * max(0.0, count - count_large)

    if page_seconds is not None:  # the pages the full file adds: read, each at the cost of a page
        grown = page_seconds * max(0.0, requests - large.requests)
        if separated(small, large):
            grown = max(grown, growth(small.logical, large.logical, logical))
        return opening + read_large + grown
    grown = growth(small.requests, large.requests, requests)
    if separated(small, large):  # tiny samples' few-ms reads: their noise is not growth per byte
        grown = max(grown, growth(small.bytes, large.bytes, nbytes), growth(small.logical, large.logical, logical))
    return opening + read_large + grown


def predict(
    small: Observation, large: Observation, scale: float, latency: float, bandwidth: float, concurrency: float,
    open_small: Observation | None = None, open_large: Observation | None = None, pattern: str = "signal",
    counts: tuple[float, float] | None = None, page_seconds: float | None = None, growing: bool | None = None,
) -> Prediction:
    """The pattern's cost at size ``scale`` (see the module's docstring). ``open_*``: opening
    alone (open, read nothing) on the same samples (None when the pattern is ``open``);
    ``counts``: requests and bytes at full size known otherwise (a paged file's pages,
    :mod:`layoutkit.advise.pages`), instead of :func:`full_counts`; ``page_seconds``: what
    reading one of those pages costs locally (see :func:`local_seconds`); ``growing``: see
    :func:`grows`."""
    requests, nbytes = counts or full_counts(small, large, scale, pattern, growing)
    logical = full_logical(small, large, scale, pattern, growing)
    local = local_seconds(small, large, scale, requests, nbytes, open_small, open_large, logical, page_seconds)
    cpu = large.cpu * (local / large.seconds) if large.seconds else large.cpu
    return Prediction(
        requests=requests,
        bytes=nbytes,
        local_seconds=local,
        network_seconds=network_cost(requests, nbytes, latency, bandwidth) / max(1.0, concurrency),
        cpu=cpu,
        concurrency=concurrency,
    )


def weighted(seconds: dict[str, float], weights: dict[str, float]) -> float:
    """The weighted mean of the patterns' seconds (weights need not sum to 1)."""
    total = sum(weights.values())
    return sum(seconds[p] * w for p, w in weights.items()) / total if total else 0.0


__all__ = [
    "GROWING", "Observation", "grows", "Prediction", "extend", "extend_log", "fit_concurrency", "full_counts", "full_logical", "grown_concurrency", "local_seconds",
    "network_cost", "predict", "samples_alike", "separated",
    "slope", "weighted",
]
