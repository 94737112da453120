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
from typing import Any

from layoutkit.errors import InvalidOptionError, OutputExistsError, OutputNotWritableError
from layoutkit.storage.buckets import describe_store_error, is_url

PREFIX = "icechunk:"
BRANCH = "main"
_QUIET = False


def is_icechunk(text: str | os.PathLike) -> bool:
    """Whether ``text`` names an Icechunk repository (``icechunk:LOCATION[@REF]``)."""
    return isinstance(text, str) and text.startswith(PREFIX)


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


def storage_for(location: str, storage_options: dict[str, str]) -> Any:
    """The icechunk ``Storage`` of a local folder or an ``s3://bucket/prefix``."""
    icechunk = _require()
    if not is_url(location):
        return icechunk.local_filesystem_storage(os.path.abspath(location.removeprefix("file://")))
    scheme, _, rest = location.partition("://")
    if scheme != "s3":
        raise InvalidOptionError(f"Expected an Icechunk repository in a folder or under s3://. Got {location!r}.")
    bucket, _, prefix = rest.partition("/")
    opts = dict(storage_options)
    endpoint = opts.get("endpoint_url") or opts.get("endpoint")
    anonymous = str(opts.get("anonymous", opts.get("skip_signature", ""))).lower() in ("1", "true", "yes")
    return icechunk.s3_storage(
        bucket=bucket, prefix=prefix.strip("/") or None, region=opts.get("region") or opts.get("region_name"),
        endpoint_url=endpoint, allow_http=bool(endpoint and endpoint.startswith("http://")),
        access_key_id=opts.get("key") or opts.get("access_key_id") or opts.get("aws_access_key_id"),
        secret_access_key=opts.get("secret") or opts.get("secret_access_key") or opts.get("aws_secret_access_key"),
        anonymous=anonymous or None, from_env=None if (endpoint or anonymous) else True,
        force_path_style=bool(endpoint),
    )


def open_repository(location: str, storage_options: dict[str, str], create: bool) -> Any:
    icechunk = _require()
    storage = storage_for(location, storage_options)
    try:
        if create:
            return icechunk.Repository.open_or_create(storage)
        return icechunk.Repository.open(storage)
    except Exception as exc:  # icechunk's own errors: one sentence
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if is_url(location):
            raise OutputNotWritableError(describe_store_error(location, exc)) from None
        raise OutputNotWritableError(f"{location}: not an Icechunk repository ({first[:200]}).") from None


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
    return session.store


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
        self._sidecar: dict[str, Any] | None = None
        self.log_entry: dict[str, Any] | None = None  # the run's log entry: its commit's metadata

    def __str__(self) -> str:
        return f"{PREFIX}{self.location}"

    def commit_metadata(self) -> dict[str, Any] | None:
        """The metadata of the run's commit: its log entry (:mod:`layoutkit.storage.log`)."""
        from layoutkit.storage.log import METADATA_KEY

        return {METADATA_KEY: self.log_entry} if self.log_entry is not None else None

    def create(self) -> None:
        pass

    def put(self, key: str, data: bytes) -> None:
        import json

        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        from layoutkit.storage.log import is_log_key

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
        sync(self.session.store.set(key, default_buffer_prototype().buffer.from_bytes(bytes(data))))

    def get(self, key: str) -> bytes | None:
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        buf = sync(self.session.store.get(key, default_buffer_prototype()))
        return None if buf is None else buf.to_bytes()

    def zarr_store(self) -> Any:
        return self.session.store


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
        try:
            self.snapshot = staged.session.commit(note or "layoutkit", metadata=staged.commit_metadata())
        except Exception as exc:
            raise OutputNotWritableError(f"{self}: the commit failed ({str(exc).splitlines()[0][:200]}).") from None

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
        """Take back a run of several commits (:mod:`layoutkit.archiving.batches`): the branch reset to
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


__all__ = ["IcechunkDestination", "IcechunkKV", "PREFIX", "SIDECAR_KEY", "is_icechunk", "parse", "readonly_store", "sidecar_in"]
