"""Planning paged HDF5 (pure): each dataset's storage, the order of the bytes, the page size.

The hierarchy stays exactly as in the source; only where bytes sit changes: every object
is created first (metadata pages at the front), then raw data is written in the chosen
order, chunks read and encoded in parallel (the task function, :func:`make_piece`) and
handed to HDF5 in order on one thread (h5py holds one lock, and the byte order in the
file is the order of the writes). Dimension scales that repeat another of the same shot
are stored once (:mod:`layoutkit.hdf5.scales`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from layoutkit.errors import InvalidOptionError, MissingFilterError, UnsupportedFeatureError
from layoutkit.hdf5.filters import Filter, can_read_raw, pipeline_levels
from layoutkit.hdf5.model import ArrayInfo, Inventory, carried_nowhere
from layoutkit.hdf5.scales import ScaleDigest, duplicate_scales
from layoutkit.layouts.hdf5_paged.options import ReorderOptions
from layoutkit.options import (
    CompressorSpec,
    parse_compressor,
)
from layoutkit.plan import plan_chunks
from layoutkit.templates import DEFAULT_TEMPLATE, compile_template, match_template, natural_key

COMPACT_MAX_BYTES = 512
DEFAULT_PAGE_BYTES = 8 * 1024**2

MIN_PAGE_BYTES = 4096  # HDF5 accepts 512; below a file-system block a page saves nothing
PAGES_PER_SMALL_FILE = 16


def plan_page_size(largest_chunk_bytes: int, file_bytes: int | None = None, default: int = DEFAULT_PAGE_BYTES) -> int:
    """``auto`` page size: 8 MiB, or the next power of two above the largest chunk when
    that is larger (a chunk must fit in a page); for a file of under 128 MiB
    (``file_bytes``, as estimated), the power of two near a sixteenth of it, at least
    4 KiB, so the half-empty last metadata and raw-data pages cost at most about 1/8 of
    the file (a 584 KiB file with 8 MiB pages grew to 24 MiB).

    The metadata is not a reason for larger pages: it spans several pages, which the
    page buffer serves, while every raw read through the buffer costs a whole page. With
    32 MiB pages (a rule that once made a page hold all of a 16.6 MB metadata) and a
    64 MiB buffer, reading one signal of 125 shots fetched 8 GiB.
    """
    if file_bytes is not None:
        small = max(MIN_PAGE_BYTES, 1 << max(0, (file_bytes // PAGES_PER_SMALL_FILE)).bit_length())
        if small < default:
            return small
    need = largest_chunk_bytes
    if need <= default:
        return default
    return 1 << need.bit_length()  # the next power of two strictly above



@dataclass(frozen=True)
class StoragePlan:
    """How one dataset is stored in the output file."""

    path: str
    layout: str  # "chunked" | "contiguous" | "compact" | "none" (no raw data)
    chunks: tuple[int, ...] | None
    compressor: CompressorSpec
    raw_copy: bool  # chunks and filters as in the source: copy chunk bytes undecoded
    direct: bool  # chunks encoded by layoutkit and written with write_direct_chunk


def target_filter_ids(spec: CompressorSpec) -> tuple[tuple[int, int | None], ...]:
    """The (filter id, level) pipeline a compressor gives, for comparing with a source."""
    shuffle = ((Filter.SHUFFLE, None),) if spec.shuffle and spec.name != "blosc" else ()
    if spec.name == "gzip":
        return (*shuffle, (Filter.GZIP, spec.level))
    if spec.name == "zstd":
        return (*shuffle, (Filter.ZSTD, spec.level))
    if spec.name == "none":
        return ()
    return ((-1, None),)  # never equal to a source pipeline: always re-encode


def source_filter_ids(info: ArrayInfo) -> tuple[tuple[int, int | None], ...]:
    return pipeline_levels((f.id, f.options) for f in info.filters)


def can_encode_directly(spec: CompressorSpec) -> bool:
    """Compressors layoutkit encodes itself, byte-compatible with the HDF5 filters."""
    return spec.name in ("gzip", "zstd", "none")


@dataclass(frozen=True)
class ReorderPlan:
    source: str
    dest: str
    options: ReorderOptions
    order: tuple[str, ...]
    storage: dict[str, StoragePlan]
    dedupe: dict[str, str]
    page_size: int
    shots: int
    signals: int
    nbytes: int
    skipped: tuple[tuple[str, str], ...] = ()  # --skip-unsupported: datasets left out, and why


@dataclass(frozen=True)
class ReorderSummary:
    source: str
    dest: str
    by: str
    arrays: int
    merged_scales: int
    raw_copied: int
    page_size: int
    logical_bytes: int
    source_bytes: int
    dest_bytes: int
    seconds: float
    skipped: tuple[tuple[str, str], ...] = ()

    def lines(self) -> list[str]:
        """What ``layoutkit reorder`` prints of the run, a line each."""
        from layoutkit.options import SOURCE_SIZE, format_size, plural, size_relative

        return [*(f"skipped {path}: {reason}" for path, reason in self.skipped),
                f"reordered {self.source} -> {self.dest} by {self.by}: {plural(self.arrays, 'dataset')}, "
                f"{plural(self.merged_scales, 'duplicate dimension scale')} merged, "
                f"{plural(self.raw_copied, 'chunk')} copied without re-encoding, page size {format_size(self.page_size)}, {format_size(self.logical_bytes)} of data, "
                f"{size_relative(self.dest_bytes, self.source_bytes, SOURCE_SIZE)}, {self.seconds:.1f} s"]


def plan_storage(info: ArrayInfo, options: ReorderOptions) -> StoragePlan:
    """Compression policy: compress datasets above the threshold (chunked), store the
    rest uncompressed, contiguous, or compact when tiny."""
    for f in info.filters:
        if not f.available:
            raise MissingFilterError(info.path, f.id, f.name)
    if info.external and info.unmapped:  # else read through HDF5, from its files
        raise UnsupportedFeatureError(info.path, f"external raw storage ({info.unmapped})")
    if info.layout == "virtual" and info.unmapped:  # else read through HDF5, from the files it maps
        raise UnsupportedFeatureError(info.path, f"a virtual dataset ({info.unmapped})")
    if (feature := carried_nowhere(info)) is not None:
        raise UnsupportedFeatureError(info.path, feature)
    none = parse_compressor("none")
    size = math.prod(info.shape) if info.shape else 1
    if info.null_space or size == 0:
        return StoragePlan(info.path, "none", None, none, False, False)
    if info.nbytes > options.compress_threshold and info.shape:
        chunks = plan_chunks(info.shape, info.dtype.itemsize, info.chunks, options.chunks, options.chunk_bytes)
        raw = (
            can_read_raw(info)
            and info.layout == "chunked"
            and chunks == info.chunks
            and source_filter_ids(info) == target_filter_ids(options.compressor)
        )
        direct = can_read_raw(info) and can_encode_directly(options.compressor)
        return StoragePlan(info.path, "chunked", chunks, options.compressor, raw, direct)
    if info.extendible:
        # an unlimited axis needs chunks: one, no larger than the data (the source's chunks
        # of a few bytes of data are often kilobytes, stored whole: a 584 KiB file grew 4x)
        chunks = tuple(max(1, min(c, n)) for c, n in zip(info.chunks or info.shape, info.shape))
        return StoragePlan(info.path, "chunked", chunks, none, False, False)
    if info.nbytes <= COMPACT_MAX_BYTES and info.kind in ("numeric", "bool"):
        return StoragePlan(info.path, "compact", None, none, False, False)
    return StoragePlan(info.path, "contiguous", None, none, False, False)


def plan_reorder(
    inventory: Inventory, options: ReorderOptions, scale_digests: dict[str, ScaleDigest], dest: str = ""
) -> ReorderPlan:
    """Plan the whole reorder from the inventory and the scales' fingerprints (pure)."""
    storage, skipped = _plan_storages(inventory, options)
    inventory = without_arrays(inventory, {p for p, _ in skipped})
    src = inventory.path
    paths = [a.path for a in inventory.arrays]
    matches = match_template(paths, options.template)
    if options.by in ("shot", "signal") and not matches:
        examples = ", ".join(paths[:5]) or "(no datasets)"
        raise InvalidOptionError(
            f"The template {options.template!r} matches no dataset in {str(src)!r} "
            f"(it has e.g. {examples}); pass --template, or --by group to order any file."
        )
    dedupe = duplicate_scales(inventory.arrays, scale_digests, options.template) if options.dedupe else {}
    scales_of: dict[str, Sequence[str]] = {
        a.path: [dedupe.get(s, s) for axis in a.dim_scales for s in axis] for a in inventory.arrays if a.dim_scales
    }
    infos = {a.path: a for a in inventory.arrays}
    sizes = {a.path: a.storage_bytes for a in inventory.arrays}
    order = [p for p in write_order(paths, options.by, options.template, scales_of, sizes) if p not in dedupe]
    largest = max(
        (math.prod(s.chunks) * infos[p].dtype.itemsize for p, s in storage.items() if s.chunks), default=0
    )
    # the file to be: the source's raw data (no smaller for the policy's threshold) and ~2 KiB per object
    estimate = sum(a.storage_bytes for a in inventory.arrays) + 2048 * (len(inventory.arrays) + len(inventory.groups))
    page = options.page_size or plan_page_size(largest, estimate)
    return ReorderPlan(
        source=str(src),
        dest=dest,
        options=options,
        order=tuple(order),
        storage=storage,
        dedupe=dedupe,
        page_size=page,
        shots=len({s for s, _ in matches.values()}),
        signals=len({g for _, g in matches.values()}),
        nbytes=sum(infos[p].nbytes for p in order),
        skipped=tuple(skipped),
    )


def _plan_storages(inventory: Inventory, options: ReorderOptions) -> tuple[dict[str, StoragePlan], list[tuple[str, str]]]:
    """Each dataset's storage, or (``--skip-unsupported``) the datasets left out, and why."""
    storage: dict[str, StoragePlan] = {}
    skipped: list[tuple[str, str]] = []
    for a in inventory.arrays:
        try:
            storage[a.path] = plan_storage(a, options)
        except (UnsupportedFeatureError, MissingFilterError) as exc:
            if not options.skip_unsupported:
                raise
            skipped.append((a.path, str(exc)))
    return storage, skipped


def without_arrays(inventory: Inventory, left_out: set[str]) -> Inventory:
    """``inventory`` without the datasets ``left_out``: nor the scales attached from
    them, nor the hard links to them."""
    if not left_out:
        return inventory
    arrays = tuple(
        replace(a, dim_scales=tuple(tuple(s for s in axis if s not in left_out) for axis in a.dim_scales))
        for a in inventory.arrays if a.path not in left_out)
    links = tuple(link for link in inventory.links if not (link.kind == "hard" and link.target in left_out))
    return replace(inventory, arrays=arrays, links=links)


def plan(inventory: Inventory, options: ReorderOptions, scale_digests: dict[str, ScaleDigest],
         dest: str = "") -> ReorderPlan:
    if options.compressor.name == "source":
        raise InvalidOptionError(
            "Expected a compressor for reorder such as gzip:4 (a chunk whose filters already match "
            "is copied without re-encoding); --compressor source is convert's. Got --compressor source."
        )
    return plan_reorder(inventory, options, scale_digests, dest)


__all__ = ["COMPACT_MAX_BYTES", "ReorderPlan", "ReorderSummary", "StoragePlan", "can_encode_directly", "plan",
           "plan_reorder", "plan_storage", "source_filter_ids", "target_filter_ids", "without_arrays"]


def write_order(
    paths: Sequence[str],
    by: str,
    template: str = DEFAULT_TEMPLATE,
    scales_of: dict[str, Sequence[str]] | None = None,
    sizes: dict[str, int] | None = None,
) -> list[str]:
    """The order in which to write the arrays' data, which is the order of their bytes.

    ``group``: the hierarchy, depth-first (``paths`` as given). ``shot``: shot after shot
    (numerically when shots are numbers), and within a shot each signal's dimension
    scales before the first signal that uses them, then the signals, then anything else
    under the shot. ``signal``: signal after signal, and within a signal shot after
    shot, each preceded by scales not written yet; then what remains of each shot.
    Arrays outside every shot come last, in hierarchy order.

    With ``sizes`` (stored bytes per path), each shot's run (``shot``) is written largest
    first. Order inside a shot is free, and HDF5's page allocator fills the gap a piece
    leaves at the end of a page with the next small allocation: largest first, those are
    pieces of the same shot, not of the next one. (Measured on the sample: every shot
    then stays within ceil(bytes/page)+1 pages. Signal runs, whose pieces are alike in
    size, measured better in shot order.)
    """
    if by == "group":
        return list(paths)
    if by not in ("shot", "signal"):
        raise InvalidOptionError(f"Expected --by shot, signal or group. Got {by!r}.")
    scales_of = scales_of or {}
    signals = match_template(paths, template)
    _, prefix = compile_template(template)
    by_shot: dict[str, list[str]] = {}
    outside: list[str] = []
    for p in paths:
        m = prefix.match(p)
        (by_shot.setdefault(m.group("shot"), []) if m else outside).append(p)
    shots = sorted(by_shot, key=natural_key)
    placed: set[str] = set()
    order: list[str] = []

    def place(p: str) -> None:
        if p not in placed:
            placed.add(p)
            order.append(p)

    def place_signal(p: str) -> None:
        for scale in scales_of.get(p, ()):
            if scale in by_shot_set:
                place(scale)
        place(p)

    by_shot_set = set(paths)

    def largest_first(start: int) -> None:
        if sizes:
            order[start:] = sorted(order[start:], key=lambda p: -sizes.get(p, 0))

    if by == "shot":
        for shot in shots:
            start = len(order)
            members = sorted((p for p in by_shot[shot] if p in signals), key=lambda p: natural_key(signals[p][1]))
            for p in members:
                place_signal(p)
            for p in by_shot[shot]:
                place(p)
            largest_first(start)
    else:
        cells: dict[tuple[str, str], str] = {(s, sig): p for p, (s, sig) in signals.items()}
        names = sorted({sig for _, sig in signals.values()}, key=natural_key)
        for name in names:
            members = [cells[(shot, name)] for shot in shots if (shot, name) in cells]
            for p in members:  # the scales this signal needs, for every shot, as one run
                for scale in scales_of.get(p, ()):
                    if scale in by_shot_set:
                        place(scale)
            for p in members:
                place(p)
        for shot in shots:
            for p in by_shot[shot]:
                place(p)
    for p in outside:
        place(p)
    return order
