"""``verify``'s proof of equality: which comparator a variant needs, and what it left out.

A variant is located (a local path, a store in a bucket, an Icechunk version), its
layout found through the registry (:mod:`layoutkit.layouts`: a Zarr store by what its
root records), and that layout's comparator run; an HDF5 file of any origin is compared
by :func:`~layoutkit.equality.hdf5.compare_hdf5`. The comparators decode what the formats
document: each imports its layout's reader and spec, never its writer
(``tests/test_architecture.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import h5py
import zarr

from layoutkit.equality import Mismatch
from layoutkit.equality.expected import unwalked
from layoutkit.equality.hdf5 import compare_hdf5
from layoutkit.errors import LayoutkitError
from layoutkit.formats import LAYOUT_ATTR, PROVENANCE_ATTR, SIDECAR
from layoutkit.hdf5.combined import walk_sources
from layoutkit.hdf5.inventory import Inventory
from layoutkit.layouts import detect
from layoutkit.storage import AnySource, ObjectSource, SourceLike, as_sources, is_url, store_at
from layoutkit.storage.icechunk_repo import is_icechunk, readonly_store, sidecar_in
from layoutkit.storage.icechunk_repo import named as named_repository
from layoutkit.storage.kv import bucket_zarr_store
from layoutkit.templates import DEFAULT_TEMPLATE


def recorded_skips(variant: str | os.PathLike[str], storage_options: dict[str, str] | None = None) -> list[str]:
    """The datasets a variant leaves out on purpose (``--skip-unsupported``), as a Zarr
    store's ``layoutkit.json`` lists them (docs/formats: "What every variant carries"),
    or an HDF5 file's provenance attribute."""
    variant = named_repository(variant, storage_options)
    if not is_url(str(variant)) and Path(variant).is_file():
        from layoutkit.hdf5.files import open_h5

        try:
            with open_h5(variant) as f:
                text = f.attrs.get(PROVENANCE_ATTR)
            doc = json.loads(text.decode() if isinstance(text, bytes) else text) if text is not None else {}
        except (LayoutkitError, OSError, ValueError, TypeError):  # not a layoutkit output: nothing left out
            return []
        return _skipped_paths(doc)
    try:
        if is_icechunk(str(variant)):
            from zarr.core.buffer import default_buffer_prototype
            from zarr.core.sync import sync

            buf = sync(readonly_store(str(variant), storage_options or {}).get("zarr.json", default_buffer_prototype()))
            if buf is None:
                return []
            text = json.dumps(sidecar_in(json.loads(buf.to_bytes()).get("attributes", {}).get(PROVENANCE_ATTR)))
        elif is_url(str(variant)):
            import obstore

            from layoutkit.storage.retry import retrying

            store = store_at(str(variant), storage_options or {})
            text = retrying(lambda: bytes(obstore.get(store, SIDECAR).bytes())).decode()
        else:
            sidecar = Path(variant) / SIDECAR
            if not sidecar.is_file():
                return []
            text = sidecar.read_text()
        doc = json.loads(text)
    except (OSError, ValueError):  # FileNotFoundError from the store too: no sidecar, nothing skipped
        return []
    return _skipped_paths(doc)


def _skipped_paths(doc: Any) -> list[str]:
    skipped = doc.get("skipped", []) if isinstance(doc, dict) else []
    return [s["path"] for s in skipped if isinstance(s, dict) and isinstance(s.get("path"), str)]


def _locate_variant(variant: str | os.PathLike[str], storage_options: dict[str, str]) -> tuple[str, str, Any]:
    """(name, "zarr", "hdf5" or "other", what the comparators open): a local path, or for
    a URL a zarr ``ObjectStore`` over the bucket prefix or an :class:`ObjectSource`."""
    variant = named_repository(variant, storage_options)
    if not is_url(str(variant)):
        path = Path(variant)
        if path.is_dir():
            is_zarr = (path / "zarr.json").exists() or (path / ".zgroup").exists()
            return str(path), "zarr" if is_zarr else "other", path
        return str(path), "hdf5" if not path.exists() or h5py.is_hdf5(path) else "other", path
    from layoutkit.archive import zarr_format_at

    url = str(variant)
    if is_icechunk(url):
        return url, "zarr", readonly_store(url, storage_options)
    prefixed = store_at(url, storage_options)
    if zarr_format_at(prefixed) is not None:
        return url, "zarr", bucket_zarr_store(prefixed, read_only=True)
    return url, "hdf5", ObjectSource(url, tuple(sorted(storage_options.items())))


class DifferentSourceError(LayoutkitError):
    """A variant that does not come from the source it is compared with."""


def compare_variant(
    source: AnySource, variant: str | Path, inventory: Inventory | None = None, workers: int = 2,
    storage_options: dict[str, str] | None = None, skipped: Sequence[str] | None = None,
) -> list[Mismatch]:
    """Compare any variant layoutkit writes (a Zarr store in any layout, a paged HDF5
    file), local or in a bucket (``s3://...``, read through the store), with its source.
    ``skipped``: the datasets it left out on purpose, when the caller has read them
    (:func:`recorded_skips`) already.

    Raises
    ------
    DifferentSourceError
        When at least half of the source's arrays are missing from the variant: it was
        made from another file, and listing every array as missing would bury that.
    """
    inventory = inventory or walk_sources(source)
    skip = frozenset(recorded_skips(variant, storage_options) if skipped is None else skipped)
    name, kind, handle = _locate_variant(variant, storage_options or {})
    if kind == "hdf5":  # a reorder output, or any copy of the source (h5repack's...)
        found = compare_hdf5(source, handle, inventory=inventory, skipped=skip)
    else:
        layout = _layout_of(kind, handle, name)
        found = layout.compare(source, handle, inventory=inventory, skipped=skip, workers=workers, name=name)
    if isinstance(source, (str, Path)) and not is_url(str(source)) and inventory.path == str(source):
        found += [Mismatch(name, path, "missing", what) for path, what in unwalked(source, inventory)]
    arrays = [a for a in inventory.arrays if not a.dim_only and a.path not in skip]
    missing = [m for m in found if m.what == "missing" and m.path in {a.path for a in arrays}]
    if arrays and len(missing) * 2 >= len(arrays) and len(arrays) > 1:
        raise DifferentSourceError(
            f"{variant} does not hold the arrays of {source} ({len(missing)} of {len(arrays)} are missing, "
            f"such as {missing[0].path}): was it made from another file?"
        )
    return found




def compare_set(
    sources: Sequence[SourceLike], variant: str | Path, workers: int = 2,
    storage_options: dict[str, str] | None = None, template: str = DEFAULT_TEMPLATE,
) -> list[Mismatch]:
    """Compare one variant made from several sources (an archive of many files) with
    all of them, as one archive (:mod:`layoutkit.hdf5.combined`: the union of their
    shots): every array and group of each source in it, equal (as :func:`compare_variant`
    compares one source), and no shot in it that none of the sources holds (reported as
    ``extra``). Sources that do not combine (a shot in two with different data) are
    refused by name."""
    from layoutkit.archive import open_archive
    from layoutkit.hdf5.combined import shot_of

    combined_sources = as_sources(list(sources), template, storage_options)
    inventory = walk_sources(combined_sources)  # each source walked once, the variant read once
    found = compare_variant(combined_sources, variant, inventory=inventory, workers=workers,
                            storage_options=storage_options)
    shot = shot_of(template)
    held = {s for p in inventory.node_paths() if (s := shot(p)) is not None}
    with open_archive(variant, template=template, storage_options=storage_options) as combined:
        extra = [shot for shot in combined.shots if shot not in held]
        found += [Mismatch(str(variant), combined.shot_path(shot), "extra", "a shot none of the sources holds")
                  for shot in extra]
    return found


def _layout_of(kind: str, handle: Any, name: str) -> Any:
    """The registered layout that wrote a Zarr store (by what its root records) or
    another output (by :meth:`~layoutkit.layout.Layout.guess_can_open`).

    Raises
    ------
    LayoutkitError
        No registered layout knows it.
    """
    if kind == "zarr":
        return detect(name, zarr.open_group(handle, mode="r").attrs.get(LAYOUT_ATTR) or {})
    return detect(name, path=Path(handle))


__all__ = ["DifferentSourceError", "compare_set", "compare_variant", "recorded_skips"]
