"""What to do about a layout: plain findings, each naming the command or recipe that applies."""

from __future__ import annotations

from types import SimpleNamespace

from layoutkit.formats import RULES
from layoutkit.inspect.report import InspectReport, Recommendation
from layoutkit.layouts import find_layout
from layoutkit.options import format_size, plural

STORED_AS = {
    RULES["array"]: "an array type's elements as trailing axes",
    RULES["region"]: "a region reference as the JSON text of its selection",
    RULES["reference"]: "an object reference as the path it points at",
    RULES["enum"]: "an enum as its integers",
    RULES["long double"]: "a long double as its decimal text",
    RULES["sequence"]: "a ragged array's values as bytes",
    RULES["compound"]: "a compound's text as UTF-8 bytes, its array members a field an element",
}
"""What a reader of the Zarr store alone gets, by type rule (:data:`~layoutkit.formats.RULES`)."""


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "0%"

# long: a list of independent findings, each an `if` and its advice; read top to bottom as a checklist.
def recommend(r: InspectReport) -> list[Recommendation]:
    """Plain recommendations tied to what the report found; each names a command or recipe."""
    out: list[Recommendation] = []
    zarr_store = r.format.startswith("zarr")

    def add(finding: str, action: str) -> None:
        out.append(Recommendation(finding, action))

    if r.missing_filters:
        add(f"{len(r.missing_filters)} dataset(s) use a filter with no plugin installed, e.g. {r.missing_filters[0]}.",
            "pip install hdf5plugin (or set HDF5_PLUGIN_PATH) before `layoutkit convert` or `reorder`.")
    recipe = (r.written_by or {}).get("recipe", {})
    if r.chunks and r.small_chunks >= 10 and r.small_chunks * 4 >= r.chunks:
        small = (f"{r.small_chunks:,} of {r.chunks:,} chunks ({pct(r.small_chunks, r.chunks)}) are under 16 KiB: "
                 "each costs a request, mostly latency, on object storage")
        if recipe.get("layout") in ("shot-packed", "signal-major"):
            pass  # packed already: what is small is the archive (never advise a store what it already is)
        elif recipe.get("chunks") == "auto":  # chunks as large as the arrays allow: the arrays are that small
            add(f"{small}, and it was written with --chunks auto: the arrays themselves are that small.",
                "Pack them: `layoutkit convert --recipe shot-packed` puts a shot's signals in one object, "
                "`--recipe signal-major` a signal of every shot in one series.")
        else:
            add(f"{small}.",
                "`layoutkit convert --chunks auto` grows them to ~4 MiB (recipes shot-major, cloud-netcdf)"
                + ("; re-convert from the HDF5 source." if zarr_store else "; for HDF5, `layoutkit reorder --chunks auto`."))
    if r.large_chunks:
        add(f"{r.large_chunks:,} chunk(s) are 16 MiB or larger: reading one value reads the whole chunk.",
            "`layoutkit convert --chunks auto --chunk-size 4MiB`" + ("" if zarr_store else " or `layoutkit reorder --chunks auto`."))
    fs = r.file_space
    if fs is not None:
        paged = fs.strategy.endswith("_PAGE")
        spread = fs.header_regions > max(2, 2 * fs.min_header_regions)
        if spread or (not paged and r.total_bytes >= 16 * 1024**2):
            what = []
            if spread:
                what.append(f"metadata is spread through the file (object headers spread over {fs.header_regions:,} "
                            f"stretches of 8 MiB; together they would fill {fs.min_header_regions})")
            if not paged:
                what.append(f"file space is {fs.strategy.removeprefix('H5F_FSPACE_STRATEGY_')}, not paged, so "
                            "HDF5's page buffer cannot turn small reads into few large ones")
            finding = "; ".join(what)
            add(finding[0].upper() + finding[1:] + ".",
                "`layoutkit reorder` with paged aggregation puts all metadata in the first pages "
                "(recipes cmod-shot, cmod-signal).")
    if r.shot_duplicate_scales:
        extra = (r.duplicate_scales or 0) - r.shot_duplicate_scales
        add(f"{r.shot_duplicate_scales:,} dimension scale(s) repeat another of the same shot byte for byte"
            + (f" (and {extra:,} repeat one of another shot)" if extra > 0 else "") + ".",
            "`layoutkit reorder` stores them once per shot (--dedupe, on by default; recipes cmod-shot, cmod-signal).")
    layout = find_layout(recipe.get("layout", recipe.get("order")))  # "order": an earlier layoutkit's key
    # the recorded recipe's keys are the options' fields: the layout says whether they order shots
    ordered = layout is not None and layout.needs_shot_archive(SimpleNamespace(**recipe))
    if r.written_by:
        written = f", layout {layout.name}" if layout is not None else ""
        written += f", ordered by {recipe['by']}" if recipe.get("by") else ""
        described = f" ({layout.description})" if layout is not None and layout.format == "zarr" else ""
        add(f"Written by `layoutkit {r.written_by.get('command')}` (layoutkit {r.written_by.get('version')}, "
            f"target {recipe.get('target')}{written}){described}.",
            f"`layoutkit recipes from {r.path}` prints its recipe; `--recipe` with it writes the same layout again.")
    if r.shots >= 2 and not ordered:
        add(f"A shot archive: {r.shots:,} shots x {r.signals:,} signals under {r.template}.",
            "Order the bytes for how they are read: `layoutkit reorder --recipe cmod-shot` (a shot at a time) or "
            "`--recipe cmod-signal` (a signal across shots); as Zarr, `layoutkit convert --recipe signal-major` or "
            "`--recipe shot-packed`.")
    if r.type_rules:
        held = sum(r.type_rules.values())
        kinds = ", ".join(f"{kind} {n:,}" for kind, n in r.type_rules.items())
        if zarr_store:
            stored = "; ".join(STORED_AS[kind] for kind in r.type_rules)
            add(f"{plural(held, 'array')} {'is' if held == 1 else 'are'} stored by the type rules ({kinds}): zarr "
                f"alone reads what is stored ({stored}).",
                f"Read them as HDF5 reads the source: `layoutkit.open({r.path!r})`, or "
                f"`xr.open_dataset({r.path!r}, engine=\"layoutkit\")`; the rules are in docs/formats/index.md.")
        else:
            add(f"{plural(held, 'array')} {'holds' if held == 1 else 'hold'} a type Zarr has no spelling for ({kinds}).",
                "`layoutkit convert` stores each by the type rules (docs/formats/index.md), read back as HDF5 reads "
                f"them; `layoutkit convert {r.path} DST --dry-run --detail` shows each array's stored type and rule "
                "attributes.")
    none = next((c for c in r.codecs if c.pipeline == "none"), None)
    if none and none.stored_bytes >= 16 * 1024**2 and none.stored_bytes * 2 >= r.stored_bytes:
        add(f"{format_size(none.stored_bytes)} ({pct(none.stored_bytes, r.stored_bytes)} of the data) is stored uncompressed.",
            "Compress it: `layoutkit convert --compressor zstd:3` (recipe shot-major) or `layoutkit reorder "
            "--compressor gzip:4` (recipe cmod-shot); recipe local-fast for LZ4 on a fast local disk.")
    if zarr_store:
        if r.chunks >= 10_000 and not r.layouts.get("sharded"):
            add(f"{r.chunks:,} chunk files and no shards: listing and copying the store costs one request per file.",
                "`layoutkit convert --shards auto` packs chunks into ~64 MiB shards (recipes signal-major, cloud-netcdf).")
        if not r.consolidated and r.arrays >= 100:
            add(f"{r.arrays:,} arrays and no consolidated metadata: opening the store reads one document per array.",
                "`layoutkit convert` consolidates by default (every recipe has consolidate = true).")
    elif r.format == "netcdf4":
        add("A netCDF-4 file.",
            "For object storage, `layoutkit convert --recipe cloud-netcdf`: xarray opens the store as it opens this file.")
    if not out:
        add("Nothing stands out: chunks, metadata and compression are in a reasonable shape.", "No command needed.")
    return out


__all__ = ["recommend"]
