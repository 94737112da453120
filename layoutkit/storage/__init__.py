"""Where a command's bytes come from and go: the storage seam of the pipeline.

A destination is checked before any work, staged, then published whole or discarded
(:class:`Destination`): a local path (:mod:`.local`: staged beside, renamed into place),
a bucket key (:mod:`.objects`: Zarr written in place with its root metadata last, HDF5
uploaded whole), or an Icechunk repository (:mod:`.icechunk_repo`: one commit per run).
The Zarr writers write through a key-value target (:mod:`.kv`), so worker processes
write straight to the destination. Sources in a bucket are read by ranged GETs
(:mod:`.sources`); :mod:`.buckets` turns URLs and ``--storage-option`` into obstore stores.
The layouts never learn where their bytes go.
"""

from __future__ import annotations

import os

from layoutkit.storage.buckets import (
    describe_store_error,
    is_url,
    object_store,
    parse_storage_options,
    store_at,
)
from layoutkit.storage.icechunk_repo import IcechunkDestination, is_icechunk
from layoutkit.storage.kv import BucketKV, FolderKV, KeyValue, as_kv, portable_target
from layoutkit.storage.local import Destination, LocalDestination, disk_usage, remove_path
from layoutkit.storage.objects import ObjectDestination
from layoutkit.storage.sources import (
    AnySource,
    ObjectSource,
    RangeFile,
    Source,
    SourceLike,
    SourceSet,
    as_source,
    as_sources,
    digests_ahead,
    portable,
    read_head,
)

DESTINATIONS = (LocalDestination, ObjectDestination, IcechunkDestination)


def destination(
    text: str | os.PathLike, storage_options: dict[str, str] | None = None, tmpdir: str | os.PathLike | None = None,
    icechunk: bool = False,
) -> LocalDestination | ObjectDestination | IcechunkDestination:
    """Parse a destination once, at the edge: an Icechunk repository (``icechunk:...``, or
    any location with ``icechunk``), a bucket URL (HDF5 staged under ``tmpdir``) or a
    local path (``file://`` too)."""
    if icechunk or is_icechunk(str(text)):
        return IcechunkDestination(str(text), storage_options or {})
    if is_url(text):
        return ObjectDestination(str(text), storage_options or {}, tmpdir)
    return LocalDestination(str(text).removeprefix("file://"))


__all__ = [
    "DESTINATIONS", "BucketKV", "Destination", "FolderKV", "IcechunkDestination", "KeyValue", "LocalDestination",
    "AnySource", "ObjectDestination", "ObjectSource", "RangeFile", "Source", "SourceLike", "SourceSet", "as_kv", "as_source", "as_sources", "describe_store_error", "destination",
    "digests_ahead",
    "disk_usage", "is_icechunk", "is_url", "object_store", "parse_storage_options", "portable", "portable_target",
    "read_head", "remove_path", "store_at",
]
