"""An existing Zarr store changed in place: what ``convert --append`` writes through.

A run that writes a new store stages it and publishes it whole (:mod:`layoutkit.storage.local`,
:mod:`~layoutkit.storage.objects`, :mod:`~layoutkit.storage.icechunk_repo`). An append
cannot: the store is there, readers may have it open, and only the new shots' objects
are to be written. A :class:`StoreEditor` is the store seen that way, one
implementation per place a store lives:

- :class:`FolderEditor`: a folder. Every object is written to a temporary sibling and
  renamed over its key (a reader never sees half a document); the lock is a file
  created exclusively (``O_EXCL``).
- :class:`BucketEditor`: a bucket prefix. Objects are PUT whole; the lock is an object
  created with a conditional write (``If-None-Match: *``, obstore's ``mode="create"``),
  which S3, GCS and Azure refuse when the object exists.
- :class:`IcechunkEditor`: a branch of an Icechunk repository, in one writable session:
  the whole append is one commit or nothing, and two appends that race are told apart by
  the commit itself (the second one's commit conflicts), so it needs no lock or journal.

The lock holds who took it (host, process, time), so a lock left by a killed append on
this host is recognised as stale and taken over (:func:`layoutkit.appending.append.append` then
cleans up what that run left).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from layoutkit.errors import OutputNotWritableError
from layoutkit.storage.log import Log, read_log
from layoutkit.storage.retry import retrying

LOCK = "layoutkit.lock"
"""The key of an append's lock, beside the store's root document."""
JOURNAL = "layoutkit-append.json"
"""What an append is about to write, recorded before it writes (see :mod:`layoutkit.appending.append`)."""


class AppendRunningError(OutputNotWritableError):
    """Another append holds the store's lock."""


class StoreEditor(Protocol):
    """A store changed in place, key by key (keys relative to its root)."""

    transactional: bool  # True: the changes appear together at commit(), or not at all

    def get(self, key: str) -> bytes | None: ...
    def put(self, key: str, data: bytes) -> None: ...
    def put_file(self, key: str, path: Path) -> None: ...
    def delete(self, keys: list[str]) -> None: ...
    def lock(self) -> contextlib.AbstractContextManager[None]: ...
    def zarr_store(self) -> Any: ...
    def commit(self, message: str) -> None: ...
    def read_log(self, provenance: dict[str, Any]) -> Log: ...
    def discard(self) -> None: ...


def _holder() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _stale(text: bytes | None) -> bool:
    """Whether a lock was left by a process of this host that is gone (killed)."""
    from layoutkit.storage.local import process_alive

    try:
        holder = json.loads(text or b"")
        return holder["host"] == socket.gethostname() and not process_alive(int(holder["pid"]))
    except (ValueError, KeyError, TypeError):
        return False


def _refuse(where: str, text: bytes | None) -> AppendRunningError:
    try:
        holder = json.loads(text or b"")
        who = f"process {holder['pid']} on {holder['host']} since {holder['since']}"
    except (ValueError, KeyError, TypeError):
        who = "another run"
    return AppendRunningError(
        f"Another append to {where} is running ({who} holds {LOCK}); nothing was written: run this one again "
        f"when it is done (if that run is gone from another machine, delete {where}/{LOCK})."
    )


@contextlib.contextmanager
def _locked(create: Callable[[], bool], editor: Any, where: str) -> Iterator[None]:
    """Hold the store's lock: ``create()`` makes the lock object only if there is none
    (False: there is one). A lock left by a killed run of this host is taken over once."""
    for _ in range(2):
        if create():
            break
        held = editor.get(LOCK)
        if not _stale(held):
            raise _refuse(where, held)
        editor.delete([LOCK])  # a killed append's: taken over
    else:
        raise _refuse(where, editor.get(LOCK))
    try:
        yield
    finally:
        editor.delete([LOCK])


class FolderEditor:
    """A store folder on a local or shared file system."""

    transactional = False

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    def get(self, key: str) -> bytes | None:
        try:
            return (self.path / key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def put(self, key: str, data: bytes) -> None:
        target = self.path / key
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)

    def put_file(self, key: str, path: Path) -> None:
        """Move a staged file to ``key`` (a rename on the same file system, else a copy)."""
        target = self.path / key
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(path, target)
        except OSError:
            self.put(key, path.read_bytes())

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                (self.path / key).unlink()
        for key in keys:  # folders the deleted objects leave empty
            parent = (self.path / key).parent
            while parent != self.path and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent

    def lock(self) -> contextlib.AbstractContextManager[None]:
        def create() -> bool:
            try:
                fd = os.open(self.path / LOCK, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w") as fh:
                json.dump(_holder(), fh)
            return True

        return _locked(create, self, str(self.path))

    def zarr_store(self) -> Any:
        import zarr.storage

        return zarr.storage.LocalStore(str(self.path))  # writes each object to a temporary file, then renames it

    def commit(self, message: str) -> None:
        pass

    def discard(self) -> None:
        pass

    def read_log(self, provenance: dict[str, Any]) -> Log:
        """The store's committed log of sources (:mod:`layoutkit.storage.log`): its entries' documents."""
        return read_log(provenance, get=self.get, where=str(self))


class BucketEditor:
    """A store under a bucket prefix."""

    transactional = False

    def __init__(self, url: str, storage_options: dict[str, str]) -> None:
        from layoutkit.storage.buckets import store_at

        self.url = url.rstrip("/")
        self.storage_options = storage_options
        self.store = store_at(self.url, storage_options)

    def __str__(self) -> str:
        return self.url

    def get(self, key: str) -> bytes | None:
        import obstore

        try:
            return retrying(lambda: bytes(obstore.get(self.store, key).bytes()))
        except FileNotFoundError:
            return None

    def put(self, key: str, data: bytes) -> None:
        import obstore

        from layoutkit.storage.buckets import store_error
        from layoutkit.storage.kv import SINGLE_PUT_MAX

        try:
            retrying(lambda: obstore.put(self.store, key, data, use_multipart=len(data) > SINGLE_PUT_MAX))
        except Exception as exc:  # obstore's errors: one sentence naming the store
            raise store_error(self.url, exc) from None

    def put_file(self, key: str, path: Path) -> None:
        self.put(key, path.read_bytes())

    def copy_object(self, url: str, key: str) -> None:
        """Copy the object at ``url``, in this store's bucket, to ``key`` (by the bucket:
        its bytes do not pass through this process)."""
        import obstore

        from layoutkit.storage.buckets import store_at, store_error

        bucket = self.url.split("/", 3)[:3]  # scheme:, '', bucket
        root = "/".join(bucket)
        if not url.startswith(root + "/"):
            raise ValueError(f"{url} is not in the bucket of {self.url}")
        prefix = self.url[len(root) + 1:]
        try:
            retrying(lambda: obstore.copy(store_at(root, self.storage_options), url[len(root) + 1:],
                                          f"{prefix}/{key}" if prefix else key))
        except Exception as exc:  # obstore's errors: one sentence naming the store
            raise store_error(self.url, exc) from None

    def delete(self, keys: list[str]) -> None:
        from layoutkit.storage.buckets import delete_keys

        if keys:
            delete_keys(self.store, keys)

    def lock(self) -> contextlib.AbstractContextManager[None]:
        import obstore

        def create() -> bool:
            mine = json.dumps(_holder()).encode()
            try:  # If-None-Match: *
                retrying(lambda: obstore.put(self.store, LOCK, mine, mode="create"))
            except obstore.exceptions.AlreadyExistsError:
                # a try whose answer was lost may have created it: then the lock is ours
                return self.get(LOCK) == mine
            return True

        return _locked(create, self, self.url)

    def zarr_store(self) -> Any:
        from layoutkit.storage.kv import single_put_store

        return single_put_store()(self.store)

    def commit(self, message: str) -> None:
        pass

    def discard(self) -> None:
        pass

    def read_log(self, provenance: dict[str, Any]) -> Log:
        """The store's committed log of sources (:mod:`layoutkit.storage.log`): its entries' documents."""
        return read_log(provenance, get=self.get, where=str(self))


class IcechunkEditor:
    """A branch of an Icechunk repository: one writable session, one commit."""

    transactional = True

    def __init__(self, text: str, storage_options: dict[str, str]) -> None:
        from layoutkit.storage.icechunk_repo import BRANCH, PREFIX, IcechunkKV, open_repository, parse

        location, ref = parse(text)
        self.name = f"{PREFIX}{location}"
        self.location = location
        self.branch = ref or BRANCH
        self.repo = open_repository(location, storage_options, create=False)
        self.storage_options = storage_options
        self.session = self.repo.writable_session(self.branch)
        self.snapshot: str | None = None
        self._kv = IcechunkKV(self.session, location)  # folds layoutkit.json into the root's provenance

    def __str__(self) -> str:
        return self.name

    def get(self, key: str) -> bytes | None:
        if key in (LOCK, JOURNAL):  # not Zarr keys: an Icechunk commit needs neither
            return None
        if key == "layoutkit.json":  # folded into the root's provenance
            from layoutkit.storage.icechunk_repo import sidecar_in

            root = self.get("zarr.json")
            found = sidecar_in(json.loads(root).get("attributes", {}).get("layoutkit")) if root else {}
            return json.dumps(found).encode() if found else None
        return self._kv.get(key)

    def put(self, key: str, data: bytes) -> None:
        self._kv.put(key, data)

    def put_file(self, key: str, path: Path) -> None:
        self.put(key, path.read_bytes())

    def delete(self, keys: list[str]) -> None:
        from zarr.core.sync import sync

        for key in keys:
            sync(self.session.store.delete(key))

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        yield  # the commit is the lock: of two racing appends, the second's commit conflicts

    def zarr_store(self) -> Any:
        return self.session.store

    @property
    def kv(self) -> Any:
        """The session as the writers see it (:class:`~layoutkit.storage.icechunk_repo.IcechunkKV`)."""
        return self._kv

    def set_refs(self, path: str, chunks: list[list[Any]], versions: dict[str, dict[str, Any]]) -> None:
        """Make chunks of array ``path`` references (:meth:`IcechunkKV.set_refs`)."""
        self._kv.set_refs(path, chunks, versions)

    def commit(self, message: str) -> None:
        from layoutkit.storage.icechunk_repo import add_containers, index_nodes

        # the containers of the references this append set, in the config before the commit names them
        if self._kv.needed:
            self.repo = add_containers(self.repo, self._kv.needed, self.storage_options)
        self._kv.before_commit(self.storage_options)
        try:
            self.snapshot = self.session.commit(message, metadata=self._kv.commit_metadata())
        except Exception as exc:  # icechunk's ConflictError among them
            conflict = "onflict" in type(exc).__name__ or "conflict" in str(exc).lower()
            raise (AppendRunningError if conflict else OutputNotWritableError)(
                f"{self}: the append's commit failed ({str(exc).splitlines()[0][:200]}); nothing was written"
                + (": another append committed first, run this one again." if conflict else ".")
            ) from None
        index_nodes(self.repo, self.snapshot, self.location, self.storage_options, self._kv.index_references)

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self.session.discard_changes()

    def read_log(self, provenance: dict[str, Any]) -> Log:
        """The branch's committed log of sources: its commits' metadata, newest first."""
        return read_log(provenance, commits=(s.metadata for s in self.repo.ancestry(branch=self.branch)),
                        where=str(self))


def store_log(text: str, storage_options: dict[str, str] | None = None) -> Log:
    """The log of sources of the store ``text`` names (empty for a store without one)."""
    from layoutkit.formats import PROVENANCE_ATTR

    editor = editor_for(text, storage_options)
    try:
        root = json.loads(editor.get("zarr.json") or b"{}")
        provenance = json.loads((root.get("attributes") or {}).get(PROVENANCE_ATTR) or "{}")
        return editor.read_log(provenance if isinstance(provenance, dict) else {})
    finally:
        editor.discard()


def editor_for(text: str, storage_options: dict[str, str] | None = None) -> StoreEditor:
    """The editor of the store ``text`` names: a folder, ``s3://...``, or ``icechunk:...``."""
    from layoutkit.storage.buckets import is_url
    from layoutkit.storage.icechunk_repo import is_icechunk, named

    text = str(named(text, storage_options))  # an Icechunk repository named without icechunk:
    if is_icechunk(text):
        return IcechunkEditor(text, storage_options or {})
    if is_url(text):
        return BucketEditor(text, storage_options or {})
    return FolderEditor(text)


__all__ = ["JOURNAL", "LOCK", "AppendRunningError", "store_log", "BucketEditor", "FolderEditor", "IcechunkEditor", "StoreEditor",
           "editor_for"]
