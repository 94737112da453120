"""Icechunk repositories: transactional Zarr output, one commit per run.

``convert SRC icechunk:LOCATION`` (or ``convert SRC LOCATION --icechunk``) writes the
store into an Icechunk repository at ``LOCATION``, a local folder or an ``s3://`` prefix,
created when missing. The whole run is one commit on ``main`` whose message is the
command and its recipe; a failed or interrupted run commits nothing, so the repository
stays at its previous snapshot, and readers of a bucket never see a partial store. With
``--overwrite`` the old store is replaced inside the same commit.

Readers name a version after ``@``: ``icechunk:LOCATION@main`` (a branch, the default),
``@v1`` (a tag) or ``@<snapshot id>``; ``layoutkit.open`` and ``verify`` read any of them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layoutkit.errors import InvalidOptionError, OutputExistsError, OutputNotWritableError
from layoutkit.formats import HDF5_SUFFIXES
from layoutkit.storage.buckets import describe_store_error, is_url

PREFIX = "icechunk:"
BRANCH = "main"
_QUIET = False


def is_icechunk(text: str | os.PathLike) -> bool:
    """Whether ``text`` names an Icechunk repository (``icechunk:LOCATION[@REF]``)."""
    return isinstance(text, str) and text.startswith(PREFIX)


def holds_repository(path: str | os.PathLike) -> bool:
    """Whether the local folder ``path`` holds an Icechunk repository (by what Icechunk
    writes there: its ``repo`` file, or a format-1 repository's ``refs``, beside
    ``snapshots``)."""
    folder = Path(path)
    return (folder / "snapshots").is_dir() and ((folder / "repo").is_file() or (folder / "refs").is_dir())


FILE_NAMES = (*HDF5_SUFFIXES, ".zarr")
"""Names that say a file or a Zarr store: a bucket prefix named so is not asked whether it
holds a repository (a request saved at every such name)."""


def named(text: str | os.PathLike[str], storage_options: dict[str, str] | None = None) -> str | os.PathLike[str]:
    """``text`` as every command reads it: a location that holds an Icechunk repository,
    named without ``icechunk:`` (as ``convert --layout virtual`` writes and prints it), is
    ``icechunk:LOCATION``; anything else is itself. A local folder is told by its files; a
    bucket prefix by its ``repo`` object (one HEAD, not asked of names that end like a file
    or a Zarr store, :data:`FILE_NAMES`)."""
    if is_icechunk(text):
        return text
    if is_url(str(text)):
        return PREFIX + str(text) if _bucket_holds_repository(str(text), storage_options or {}) else text
    local = str(text).removeprefix("file://")
    return PREFIX + local if holds_repository(local) else text


def _bucket_holds_repository(url: str, storage_options: dict[str, str]) -> bool:
    """Whether the bucket prefix ``url`` holds an Icechunk repository (its ``repo``
    object). Any failure is a no: what the name is then is said by the command that
    opens it, in its own words."""
    if url.rstrip("/").lower().endswith(FILE_NAMES):
        return False
    import obstore

    from layoutkit.storage.buckets import store_at
    from layoutkit.storage.retry import retrying

    try:
        store = store_at(url.rstrip("/"), storage_options)
        retrying(lambda: obstore.head(store, "repo"))
    except Exception:  # noqa: BLE001 - absent, refused, or unreachable: not told to be a repository
        return False
    return True


def parse(text: str) -> tuple[str, str | None]:
    """``icechunk:LOCATION[@REF]`` -> (location, ref or None)."""
    rest = text[len(PREFIX):].removeprefix("//")
    location, sep, ref = rest.rpartition("@") if "@" in rest.rsplit("/", 1)[-1] else (rest, "", "")
    if not location:
        raise InvalidOptionError(f"Expected icechunk:LOCATION, a folder or an s3:// prefix. Got {text!r}.")
    return location, (ref or None) if sep else None


def _require() -> Any:
    try:
        import icechunk
    except ImportError:
        raise InvalidOptionError(
            "Icechunk destinations need the icechunk package: pip install icechunk (or layoutkit[icechunk])."
        ) from None
    global _QUIET
    if not _QUIET:  # its warnings (e.g. about local storage and concurrent commits) are not the user's business
        icechunk.set_logs_filter(os.environ.get("ICECHUNK_LOG", "error"))
        _QUIET = True
    return icechunk


def s3_options(storage_options: dict[str, str]) -> dict[str, Any]:
    """The S3 settings ``--storage-option`` names, in each of the spellings it takes:
    endpoint, region, key, secret, anonymous."""
    opts = dict(storage_options)
    return {
        "endpoint": opts.get("endpoint_url") or opts.get("endpoint"),
        "region": opts.get("region") or opts.get("region_name"),
        "key": opts.get("key") or opts.get("access_key_id") or opts.get("aws_access_key_id"),
        "secret": opts.get("secret") or opts.get("secret_access_key") or opts.get("aws_secret_access_key"),
        "anonymous": str(opts.get("anonymous", opts.get("skip_signature", ""))).lower() in ("1", "true", "yes"),
    }


def storage_for(location: str, storage_options: dict[str, str]) -> Any:
    """The icechunk ``Storage`` of a local folder or an ``s3://bucket/prefix``."""
    icechunk = _require()
    if not is_url(location):
        return icechunk.local_filesystem_storage(os.path.abspath(location.removeprefix("file://")))
    scheme, _, rest = location.partition("://")
    if scheme != "s3":
        raise InvalidOptionError(f"Expected an Icechunk repository in a folder or under s3://. Got {location!r}.")
    bucket, _, prefix = rest.partition("/")
    s3 = s3_options(storage_options)
    endpoint, anonymous = s3["endpoint"], s3["anonymous"]
    return icechunk.s3_storage(
        bucket=bucket, prefix=prefix.strip("/") or None, region=s3["region"],
        endpoint_url=endpoint, allow_http=bool(endpoint and endpoint.startswith("http://")),
        access_key_id=s3["key"], secret_access_key=s3["secret"],
        anonymous=anonymous or None, from_env=None if (endpoint or anonymous) else True,
        force_path_style=bool(endpoint),
    )


def open_repository(location: str, storage_options: dict[str, str], create: bool) -> Any:
    """The repository at ``location`` (created when missing, with ``create``), with the
    virtual chunk containers its config names authorised (:func:`authorisation`)."""
    icechunk = _require()
    storage = storage_for(location, storage_options)
    try:
        repo = icechunk.Repository.open_or_create(storage) if create else icechunk.Repository.open(storage)
        granted = authorisation(repo.config, storage_options)
        if not granted:
            return repo
        return repo.reopen(config=reached(repo.config, storage_options), authorize_virtual_chunk_access=granted)
    except Exception as exc:  # icechunk's own errors: one sentence
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if is_url(location):
            raise OutputNotWritableError(describe_store_error(location, exc)) from None
        raise OutputNotWritableError(f"{location}: not an Icechunk repository ({first[:200]}).") from None


# -- virtual references ----------------------------------------------------------------
#
# A virtual store's chunks are references into its source files (layoutkit.layouts.virtual).
# Icechunk reads them through the repository's virtual chunk containers: one per URL prefix
# (``file:///`` for local files, ``s3://BUCKET/`` for a bucket's), each with the object
# store that serves it; and a reader must authorise each one when it opens the repository.


def source_url(source: Any) -> str:
    """The URL a reference names its source by: ``file:///abs/path`` or the bucket URL."""
    url = getattr(source, "url", None)
    if url is not None:
        return str(url)
    from pathlib import Path

    return Path(source).resolve().as_uri()


def local_path(url: str) -> str:
    """The path of a ``file://`` URL made by :func:`source_url` (``Path.as_uri`` escapes
    characters such as ``=`` and spaces: ``%3D``, ``%20``)."""
    from urllib.parse import unquote

    return unquote(url.removeprefix("file://"))


def container_prefix(url: str) -> str:
    """The virtual chunk container that holds ``url``: its top folder for a local file
    (``file:///data/``: Icechunk wants a path in the prefix), or ``s3://BUCKET/``."""
    scheme, _, rest = url.partition("://")
    if scheme == "file":
        top = rest.lstrip("/").split("/", 1)[0]
        return f"file:///{top}/"
    return f"{scheme}://{rest.split('/', 1)[0]}/"


def _container(prefix: str, storage_options: dict[str, str]) -> Any:
    icechunk = _require()
    if prefix.startswith("file:///"):
        return icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(prefix.removeprefix("file://")))
    if not prefix.startswith("s3://"):
        raise InvalidOptionError(f"Expected sources in local files or under s3:// for virtual references. Got {prefix}.")
    s3 = s3_options(storage_options)
    endpoint = s3["endpoint"]
    return icechunk.VirtualChunkContainer(prefix, icechunk.s3_store(
        region=s3["region"] or os.environ.get("AWS_REGION"), endpoint_url=endpoint,
        allow_http=bool(endpoint and endpoint.startswith("http://")), s3_compatible=bool(endpoint),
        force_path_style=bool(endpoint)))


def add_containers(repo: Any, prefixes: set[str], storage_options: dict[str, str]) -> Any:
    """``repo`` with a virtual chunk container for each of ``prefixes`` (its config saved
    when one was missing), authorised; returns the repository to use from now on."""
    config = repo.config
    missing = sorted(p for p in prefixes if p not in (config.virtual_chunk_containers or {}))
    if not missing:
        return repo
    for prefix in missing:
        config.set_virtual_chunk_container(_container(prefix, storage_options))
    repo = repo.reopen(config=config)
    repo.save_config()
    return repo.reopen(authorize_virtual_chunk_access=authorisation(repo.config, storage_options))


def reached(config: Any, storage_options: dict[str, str]) -> Any:
    """``config`` with each bucket's virtual chunk container reached at the endpoint the
    run's storage options name, when they name one (a bucket's endpoint is where this
    reader finds it: another host, a proxy), for this session only: the saved config
    keeps the one it was written with."""
    if not s3_options(storage_options)["endpoint"]:
        return config
    for prefix in list(config.virtual_chunk_containers or {}):
        if prefix.startswith("s3://"):
            config.set_virtual_chunk_container(_container(prefix, storage_options))
    return config


def authorisation(config: Any, storage_options: dict[str, str]) -> dict[str, Any]:
    """The credentials that let a reader follow references into each virtual chunk
    container ``config`` names: local files as they are; a bucket's with the run's
    storage options (keys, or anonymous), else from the environment."""
    icechunk = _require()
    s3 = s3_options(storage_options)
    out: dict[str, Any] = {}
    for prefix in config.virtual_chunk_containers or {}:
        if prefix.startswith("file://"):
            out[prefix] = icechunk.credentials.LocalFileSystemAccess
        elif prefix.startswith("s3://"):
            out[prefix] = icechunk.Credentials.S3(
                icechunk.s3_credentials(access_key_id=s3["key"], secret_access_key=s3["secret"])
                if s3["key"] and s3["secret"]
                else icechunk.s3_credentials(anonymous=True) if s3["anonymous"]
                else icechunk.s3_credentials(from_env=True))
    return out


def set_refs(store: Any, path: str, chunks: list[list[Any]], versions: dict[str, dict[str, Any]]) -> None:
    """Set virtual references in an Icechunk store (:meth:`IcechunkKV.set_refs`).

    The references of each file go in as flat arrays over the box of the chunk grid
    they cover (``set_virtual_refs_arr``, Icechunk >= 2.3: no Python object per chunk;
    a file of 14,000 small chunks spent 0.2 s building a ``VirtualChunkSpec`` a chunk), or as
    one spec per chunk where that box would be mostly empty or Icechunk is older."""
    import numpy as np

    icechunk = _require()
    by_url: dict[str, list[list[Any]]] = {}
    for chunk in chunks:
        by_url.setdefault(chunk[1], []).append(chunk)
    failed: list[Any] = []
    for url, group in by_url.items():
        check = _checksum(versions.get(url, {}))
        index = np.array([c[0] for c in group], dtype=np.int64).reshape(len(group), -1)
        low = index.min(axis=0)
        grid = index.max(axis=0) - low + 1
        cells = int(np.prod(grid, dtype=np.int64))
        if hasattr(store, "set_virtual_refs_arr") and index.shape[1] and cells <= 4 * len(group) + 64:
            flat = np.ravel_multi_index(tuple((index - low).T), tuple(int(g) for g in grid))
            locations = [""] * cells
            for i in flat.tolist():
                locations[i] = url
            offsets, lengths = np.zeros(cells, np.uint64), np.zeros(cells, np.uint64)
            offsets[flat] = [c[2] for c in group]
            lengths[flat] = [c[3] for c in group]
            failed += store.set_virtual_refs_arr(path.strip("/"), tuple(int(g) for g in grid), locations, offsets,
                                                 lengths, validate_containers=False,
                                                 arr_offset=tuple(int(v) for v in low), checksum=check) or []
            continue
        keyword = {} if check is None else (
            {"etag_checksum": check} if isinstance(check, str) else {"last_updated_at_checksum": check})
        specs = [icechunk.VirtualChunkSpec(index=list(i), location=url, offset=int(offset), length=int(length),
                                           **keyword) for i, _, offset, length in group]
        failed += store.set_virtual_refs(path.strip("/"), specs, validate_containers=False) or []
    if failed:
        raise OutputNotWritableError(f"{path}: Icechunk refused the references of {len(failed)} chunks.")


def _checksum(version: dict[str, Any]) -> Any:
    """What Icechunk checks a reference's file against when reading it: its ETag, or its
    modification time; None when neither is known."""
    import datetime

    if version.get("etag"):
        return str(version["etag"])
    if version.get("mtime") is not None:
        return datetime.datetime.fromtimestamp(version["mtime"], tz=datetime.UTC)
    return None


def changed_source(exc: BaseException) -> str | None:
    """The URL of the source a failed read of a virtual chunk found changed since it was
    referenced (Icechunk checks each reference's recorded modification time or ETag), or
    None when ``exc`` is another error."""
    text = str(exc)
    marker = "the object owning the virtual chunk has changed ("
    if marker not in text:
        return None
    return text.split(marker, 1)[1].split(")", 1)[0]


def readonly_store(text: str, storage_options: dict[str, str]) -> Any:
    """The zarr store of ``icechunk:LOCATION[@REF]`` at that version, read-only."""
    location, ref = parse(text)
    repo = open_repository(location, storage_options, create=False)
    try:
        if ref is None or ref in repo.list_branches():
            session = repo.readonly_session(branch=ref or BRANCH)
        elif ref in repo.list_tags():
            session = repo.readonly_session(tag=ref)
        else:
            session = repo.readonly_session(snapshot_id=ref)
    except Exception as exc:
        raise InvalidOptionError(f"{text}: no branch, tag or snapshot {ref!r} in the repository ({exc}).") from None
    from layoutkit.storage.nodeindex import indexed

    store = session.store
    if repo.config.virtual_chunk_containers:
        store = guarded(session.store)
        store.virtual = VirtualSource(repo, session.snapshot_id, location, storage_options)
    return indexed(store, location, storage_options, session.snapshot_id)  # a shot without the snapshot


def index_nodes(repo: Any, snapshot: str, location: str, storage_options: dict[str, str],
                references: Callable[..., Any] | None = None) -> None:
    """After a commit: layoutkit's index of its nodes (:mod:`layoutkit.storage.nodeindex`).
    The commit stands whatever happens here: without an index, readers read through
    Icechunk; a failure is said on stderr, not raised."""
    from layoutkit.storage.nodeindex import build

    try:
        build(repo, snapshot, location, storage_options, references)
    except Exception as exc:  # noqa: BLE001 - the commit is done; the index only speeds reading
        import sys

        print(f"layoutkit: {PREFIX}{location}: the index of its nodes was not written ({exc}); "
              "it reads through Icechunk.", file=sys.stderr)


@dataclass(frozen=True)
class VirtualSource:
    """A version of a repository of virtual references, as its reader needs it to read
    the references itself (the virtual layout's copy of them)."""

    repo: Any
    snapshot: str
    location: str
    storage_options: dict[str, str]

    def commits(self) -> Any:
        """The metadata of this snapshot's commits, newest first (its ancestry)."""
        return (s.metadata for s in self.repo.ancestry(snapshot_id=self.snapshot))


def virtual_source(store: Any) -> VirtualSource | None:
    """The :class:`VirtualSource` under ``store`` (wrapped by any number of zarr
    ``WrapperStore``s), or None for a store of no repository of references."""
    from layoutkit.storage.counting import layer_attribute

    return layer_attribute(store, "virtual", VirtualSource)


def guarded(store: Any) -> Any:
    """``store`` (an Icechunk store with virtual references) whose reads of a chunk in a
    source that changed since it was referenced raise
    :class:`~layoutkit.errors.SourceChangedError`, naming the source, in one sentence."""
    from zarr.storage import WrapperStore

    class SourceGuard(WrapperStore[Any]):
        async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
            try:
                return await self._store.get(key, prototype, byte_range)
            except Exception as exc:
                if changed_source(exc):
                    raise _refusal(exc) from None
                raise

        async def get_partial_values(self, prototype: Any, key_ranges: Any) -> list[Any]:
            try:
                return await self._store.get_partial_values(prototype, key_ranges)
            except Exception as exc:
                if changed_source(exc):
                    raise _refusal(exc) from None
                raise

    return SourceGuard(store)


def _refusal(exc: BaseException) -> Exception:
    return source_changed(changed_source(exc) or "?")


def source_changed(url: str) -> Exception:
    """The error of a read that found the source ``url`` changed since it was referenced."""
    from layoutkit.errors import SourceChangedError

    where = local_path(url) if url.startswith("file://") else url
    return SourceChangedError(f"{where} changed since it was referenced (a virtual store reads its chunks where "
                              "they lie); re-run convert --layout virtual on it.")


SIDECAR_KEY = "sidecar"
"""Icechunk holds Zarr keys only, so ``layoutkit.json`` travels inside the root's
provenance attribute (``layoutkit``) as this key: :func:`sidecar_in`."""


def sidecar_in(provenance: Any) -> dict[str, Any]:
    """The sidecar document carried by a provenance attribute value ({} when none)."""
    import json

    try:
        doc = json.loads(provenance.decode() if isinstance(provenance, bytes) else provenance)
    except (TypeError, ValueError, AttributeError):
        return {}
    found = doc.get(SIDECAR_KEY) if isinstance(doc, dict) else None
    return found if isinstance(found, dict) else {}


class IcechunkKV:
    """The writable session of a run: the key-value target the Zarr writers use.

    Threads of one process share it (an Icechunk session is not shipped to other
    processes here: ``--scheduler threads``). ``layoutkit.json`` is not a Zarr key: it is
    folded into the root document's provenance attribute (:data:`SIDECAR_KEY`); nor is a
    log entry (:mod:`layoutkit.storage.log`): it becomes the commit's metadata."""

    def __init__(self, session: Any, location: str) -> None:
        self.session = session
        self.location = location
        self.needed: set[str] = set()  # the container prefixes of the references set
        self._sidecar: dict[str, Any] | None = None
        self.log_entry: dict[str, Any] | None = None  # the run's log entry: its commit's metadata
        # what a layout adds to a run (the virtual layout's copy of its references):
        self.refs: Any = None
        self.ref_hooks: list[Callable[[str, list[list[Any]], dict[str, dict[str, Any]]], None]] = []
        """Called with each :meth:`set_refs`."""
        self.commit_hooks: list[Callable[[dict[str, str]], None]] = []
        """Called with the run's storage options before the commit (:meth:`before_commit`)."""
        self.index_references: Callable[..., Any] | None = None
        """``(repo, snapshot, provenance, storage_options)`` -> the snapshot's references,
        for the index of its nodes (:func:`index_nodes`); None: the index holds none."""

    def __str__(self) -> str:
        return f"{PREFIX}{self.location}"

    def commit_metadata(self) -> dict[str, Any] | None:
        """The metadata of the run's commit: its log entry (:mod:`layoutkit.storage.log`)."""
        from layoutkit.storage.log import METADATA_KEY

        return {METADATA_KEY: self.log_entry} if self.log_entry is not None else None

    def create(self) -> None:
        pass

    def put(self, key: str, data: bytes | Sequence[bytes]) -> None:
        import json

        from layoutkit.storage.kv import joined
        from layoutkit.storage.log import is_log_key

        data = joined(data)

        if is_log_key(key):  # not a Zarr key: the log entry rides on the commit
            self.log_entry = json.loads(data)
            return
        if key == "layoutkit.json":
            self._sidecar = json.loads(data)
            root = self.get("zarr.json")
            if root is None:
                return
            key, data = "zarr.json", root
        if key == "zarr.json" and self._sidecar is not None:
            doc = json.loads(data)
            attrs = doc.setdefault("attributes", {})
            provenance = json.loads(attrs.get("layoutkit") or "{}")
            provenance[SIDECAR_KEY] = self._sidecar
            attrs["layoutkit"] = json.dumps(provenance)
            data = json.dumps(doc, allow_nan=False).encode()
        self._set([(key, data)])

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Several documents in one call to the session (what :meth:`put` does one at a
        time: a call through zarr's event loop costs ~1 ms, and a NeXus-like file has
        hundreds of nodes)."""
        from layoutkit.storage.log import is_log_key

        special = {"layoutkit.json", "zarr.json"}
        for key, data in items:
            if is_log_key(key) or key in special:
                self.put(key, data)
        self._set([(key, data) for key, data in items if not is_log_key(key) and key not in special])

    def _set(self, items: Sequence[tuple[str, bytes | Sequence[bytes]]]) -> None:
        """Zarr keys set in the session, in one call through zarr's event loop."""
        import asyncio

        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        from layoutkit.storage.kv import joined

        async def set_all() -> None:
            await asyncio.gather(*(self.session.store.set(key, default_buffer_prototype().buffer.from_bytes(
                bytes(joined(data)))) for key, data in items))

        if items:
            sync(set_all())

    def get(self, key: str) -> bytes | None:
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        buf = sync(self.session.store.get(key, default_buffer_prototype()))
        return None if buf is None else buf.to_bytes()

    def zarr_store(self) -> Any:
        return self.session.store

    def set_refs(self, path: str, chunks: list[list[Any]], versions: dict[str, dict[str, Any]]) -> None:
        """Make the chunks of array ``path`` references: ``[[chunk index, url, offset,
        length], ...]``, each checked on reading against its file's version in
        ``versions`` (modification time, or ETag)."""
        self.needed.update(container_prefix(url) for _, url, _, _ in chunks)
        set_refs(self.session.store, path, chunks, versions)
        for hook in self.ref_hooks:
            hook(path, chunks, versions)

    def before_commit(self, storage_options: dict[str, str]) -> None:
        """What the run's layout does before the commit (:attr:`commit_hooks`)."""
        for hook in self.commit_hooks:
            hook(storage_options)


class IcechunkDestination:
    """A Zarr store as one commit of an Icechunk repository (see the module)."""

    kind = "icechunk"  # what Layout.destinations names it

    threads_only = True  # the session is shared by threads, not shipped to processes

    def __init__(self, text: str, storage_options: dict[str, str]) -> None:
        location, ref = parse(text if is_icechunk(text) else PREFIX + text)
        self.location, self.branch = location, ref or BRANCH
        self.storage_options = storage_options
        self.path = self  # summaries name the destination
        self.snapshot: str | None = None
        self._repo: Any = None
        self._created = False  # by this run: a failed run removes the repository again
        self._bytes = 0

    def __str__(self) -> str:  # after the commit, the exact version that holds the output
        return f"{PREFIX}{self.location}" + (f"@{self.snapshot}" if self.snapshot else "")

    @property
    def name(self) -> str:
        return self.location.rstrip("/").rsplit("/", 1)[-1]

    def check(self, overwrite: bool) -> None:
        """Open or create the repository (refusing what is not one) and refuse a branch
        that already holds a store, unless ``overwrite``."""
        from zarr.core.sync import sync

        icechunk = _require()
        if not is_url(self.location):
            parent = os.path.dirname(os.path.abspath(self.location)) or "."
            if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
                raise OutputNotWritableError(f"Destination folder {parent!r} does not exist or is not writable.")
        try:
            exists = icechunk.Repository.exists(storage_for(self.location, self.storage_options))
        except Exception as exc:  # the store's own errors: one sentence
            raise OutputNotWritableError(describe_store_error(self.location, exc)) from None
        if not exists:
            return  # created by stage(), when the work begins
        self._repo = open_repository(self.location, self.storage_options, create=False)
        if self.branch not in self._repo.list_branches():
            raise OutputNotWritableError(f"{self}: the repository has no branch {self.branch!r}.")
        store = self._repo.readonly_session(branch=self.branch).store
        if sync(store.exists("zarr.json")) and not overwrite:
            raise OutputExistsError(f"Destination {str(self)!r} holds a store on {self.branch}; pass --overwrite to "
                                    "replace it (in one new commit; earlier snapshots stay readable).")

    def stage(self, output: str = "file") -> IcechunkKV:
        from zarr.core.sync import sync

        if output != "store":
            raise InvalidOptionError("An Icechunk repository holds Zarr stores: write paged HDF5 to a file or a bucket key.")
        if self._repo is None:
            self._repo = open_repository(self.location, self.storage_options, create=True)
            self._created = True
        session = self._repo.writable_session(self.branch)
        sync(session.store.delete_dir(""))  # --overwrite: the old store goes in the same commit
        return IcechunkKV(session, self.location)

    def publish(self, staged: IcechunkKV, note: str = "") -> None:
        """Commit the run (``note`` is the message): the new snapshot appears at once."""
        from zarr.core.sync import sync

        try:
            self._bytes = sync(staged.session.store.getsize_prefix(""))
        except Exception:  # noqa: BLE001 - a size is a nicety
            self._bytes = 0
        needed = staged.needed
        if needed:  # the references' containers, in the repository's config, before the commit names them
            self._repo = add_containers(self._repo, needed, self.storage_options)
        staged.before_commit(self.storage_options)
        try:
            self.snapshot = staged.session.commit(note or "layoutkit", metadata=staged.commit_metadata())
        except Exception as exc:
            raise OutputNotWritableError(f"{self}: the commit failed ({str(exc).splitlines()[0][:200]}).") from None
        index_nodes(self._repo, self.snapshot, self.location, self.storage_options, staged.index_references)

    def discard(self, staged: Any) -> None:
        """Nothing was committed: the repository stays at its previous snapshot."""
        session = getattr(staged, "session", None)
        if session is not None:
            try:
                session.discard_changes()
            except Exception:  # noqa: BLE001 - dropping the session discards it anyway
                pass
        if self._created:  # nothing was there before this run: leave nothing
            self._remove_repository()

    @property
    def branch_text(self) -> str:
        """``icechunk:LOCATION@BRANCH``: the branch a later commit of the run goes to."""
        return f"{PREFIX}{self.location}@{self.branch}"

    def head(self) -> str | None:
        """The branch's snapshot before the run (None: no repository yet); after
        :meth:`check`."""
        return None if self._repo is None else self._repo.lookup_branch(self.branch)

    def rewind(self, snapshot: str | None) -> None:
        """Take back a run of several commits (:mod:`layoutkit.appending.batches`): the branch reset to
        ``snapshot``, the one it had before the run, or, when this run created the
        repository, the repository removed. Best effort, as the run is failing already."""
        if self._created:
            self._remove_repository()
            return
        with contextlib.suppress(Exception):
            open_repository(self.location, self.storage_options, create=False).reset_branch(self.branch, snapshot)

    def _remove_repository(self) -> None:
        try:
            if is_url(self.location):
                from layoutkit.storage.buckets import delete_keys, list_keys, object_store

                store, key = object_store(self.location, self.storage_options)
                delete_keys(store, [k for k, _ in list_keys(store, key)])
            else:
                import shutil

                shutil.rmtree(self.location, ignore_errors=True)
        except Exception:  # noqa: BLE001 - best effort while failing already
            pass

    def size(self) -> int:
        return self._bytes

    def repository_bytes(self) -> int:
        """:func:`repository_bytes` of this destination (0 when it cannot be listed)."""
        try:
            return repository_bytes(self.location, self.storage_options)
        except Exception:  # noqa: BLE001 - a size is a nicety
            return 0


def repository_bytes(location: str, storage_options: dict[str, str]) -> int:
    """A repository's own bytes at ``location`` (a folder, or a prefix in a bucket): its
    snapshots, manifests and chunks, every version kept; what a store of references costs,
    apart from the files it points into."""
    if is_url(location):
        from layoutkit.storage.buckets import list_keys, object_store

        store, key = object_store(location, storage_options)
        return sum(size for _, size in list_keys(store, key))
    from pathlib import Path

    from layoutkit.storage.local import disk_usage

    return disk_usage(Path(location))


__all__ = ["IcechunkDestination", "IcechunkKV", "PREFIX", "SIDECAR_KEY", "add_containers", "authorisation", "reached", "set_refs",
           "VirtualSource", "changed_source", "source_changed", "virtual_source", "container_prefix", "is_icechunk", "local_path", "parse", "readonly_store", "repository_bytes", "sidecar_in", "source_url"]
