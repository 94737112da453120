"""Where a command's output is staged and published: the storage seam of the pipeline.

A destination is checked before any work (:meth:`LocalDestination.check`), written in a
staging area (:meth:`~LocalDestination.stage`), then published whole
(:meth:`~LocalDestination.publish`) or thrown away (:meth:`~LocalDestination.discard`).
Locally the staging area is a hidden sibling of the destination and publication is a
rename, so a reader never sees a half-written store or file. A run killed with SIGKILL
cannot clean up after itself: its staging area names the host and process that made it,
and the next run to the same destination removes it once that process is gone.

Object storage will be a second implementation of the same three calls (chunks first,
metadata last; or a transaction), so the layouts never learn where their bytes go.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from layoutkit.errors import OutputExistsError, OutputNotWritableError

_STAGING = re.compile(r"^\.(?P<name>.+)\.layoutkit-(?P<kind>tmp|old)-(?P<host>[^-]+)-(?P<pid>\d+)-[0-9a-f]{8}$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, it is someone else's
        return True
    return True


class Destination(Protocol):
    """Where a command's output goes: check it, stage the output, publish or discard it."""

    def check(self, overwrite: bool) -> None: ...
    def stage(self) -> Path: ...
    def publish(self, staged: Path) -> None: ...
    def discard(self, staged: Path) -> None: ...
    def size(self) -> int: ...


def remove_path(path: Path) -> None:
    """Remove a file or a directory tree, if it is there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def disk_usage(path: Path) -> int:
    """Bytes of a file, or of every file under a directory."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class LocalDestination:
    """A destination path on a local or shared file system.

    Parameters
    ----------
    path
        The store directory or file to write.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"LocalDestination({str(self.path)!r})"

    def __str__(self) -> str:
        return str(self.path)

    def _sibling(self, kind: str) -> Path:
        return self.path.with_name(f".{self.path.name}.layoutkit-{kind}-{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")

    def check(self, overwrite: bool) -> None:
        """Refuse, before any work, a destination that exists (unless ``overwrite``) or
        whose folder is missing or not writable.

        Raises
        ------
        OutputExistsError, OutputNotWritableError
        """
        dst = self.path
        if (dst.exists() or dst.is_symlink()) and not overwrite:
            raise OutputExistsError(f"Destination {str(dst)!r} exists; pass --overwrite to replace it.")
        parent = dst.parent if str(dst.parent) else Path(".")
        if not parent.exists():
            raise OutputNotWritableError(f"Destination folder {str(parent)!r} does not exist.")
        if not parent.is_dir():
            raise OutputNotWritableError(f"Destination parent {str(parent)!r} is not a folder.")
        if not os.access(parent, os.W_OK):
            raise OutputNotWritableError(f"Destination folder {str(parent)!r} is not writable.")

    def stale(self) -> list[Path]:
        """Staging areas of this destination left by runs on this host whose process is gone."""
        found = []
        host = _host()
        parent = self.path.parent if str(self.path.parent) else Path(".")
        for entry in parent.glob(f".{glob_escape(self.path.name)}.layoutkit-*"):
            m = _STAGING.match(entry.name)
            if m and m.group("name") == self.path.name and m.group("host") == host and not _process_alive(int(m.group("pid"))):
                found.append(entry)
        return found

    def stage(self) -> Path:
        """Remove stale staging areas of this destination; return a fresh one (not created)."""
        for entry in self.stale():
            remove_path(entry)
        return self._sibling("tmp")

    def publish(self, staged: Path) -> None:
        """Move the complete ``staged`` output to the destination; an existing destination
        (``--overwrite``) is removed only once the new one is in place."""
        old = None
        if self.path.exists() or self.path.is_symlink():
            old = self._sibling("old")
            os.rename(self.path, old)
        os.rename(staged, self.path)
        if old is not None:
            remove_path(old)

    def discard(self, staged: Path) -> None:
        """Remove a staging area after a failure or an interruption."""
        remove_path(staged)

    def size(self) -> int:
        """Bytes written at the destination."""
        return disk_usage(self.path)


def glob_escape(name: str) -> str:
    """``name`` with glob's special characters taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", name)




# -- object storage ---------------------------------------------------------------------

METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})
UPLOAD_THREADS = 8
_ALIASES = {  # fsspec/boto3 spellings people know -> obstore's S3 configuration keys
    "endpoint_url": "endpoint",
    "key": "access_key_id",
    "secret": "secret_access_key",
    "aws_access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "region_name": "region",
    "anonymous": "skip_signature",
}
_CLIENT_KEYS = frozenset({"allow_http", "timeout", "connect_timeout"})


def parse_storage_options(items: list[str] | tuple[str, ...] | None) -> dict[str, str]:
    """``KEY=VALUE`` texts (``--storage-option``) as a dict.

    Raises
    ------
    InvalidOptionError
        An item without ``=``.
    """
    from layoutkit.errors import InvalidOptionError

    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"Expected --storage-option KEY=VALUE, e.g. endpoint_url=http://127.0.0.1:9000. Got {item!r}.")
        out[key.strip()] = value.strip()
    return out


def is_url(text: str | os.PathLike) -> bool:
    """Whether ``text`` names an object-store location (``s3://``, ``gs://``, ``az://``...)."""
    return isinstance(text, str) and "://" in text and not text.startswith("file://")


def destination(
    text: str | os.PathLike, storage_options: dict[str, str] | None = None, tmpdir: str | os.PathLike | None = None
) -> LocalDestination | ObjectDestination:
    """Parse a destination once, at the edge: a bucket URL (staged under ``tmpdir``) or a
    local path (``file://`` too)."""
    if is_url(text):
        return ObjectDestination(str(text), storage_options or {}, tmpdir)
    return LocalDestination(str(text).removeprefix("file://"))


def object_store(url: str, storage_options: dict[str, str]) -> tuple[Any, str]:
    """An obstore store for the bucket of ``url`` and the key ``url`` names inside it.

    obstore (the Rust object_store crate behind zarr's ``ObjectStore``) speaks S3, GCS and
    Azure with one API, reads credentials from the usual environment variables, and does
    ranged and multipart requests itself. Aliases such as ``endpoint_url`` are accepted;
    an ``http://`` endpoint (a local test server) is allowed.
    """
    scheme, _, rest = url.partition("://")
    bucket, _, key = rest.partition("/")
    return store_at(f"{scheme}://{bucket}", storage_options), key.strip("/")


def store_at(url: str, storage_options: dict[str, str]) -> Any:
    """An obstore store rooted at ``url`` (a bucket, or a prefix inside one): keys are
    relative to it, as zarr's ``ObjectStore`` wants for a store in a bucket."""
    from datetime import timedelta

    from obstore.store import from_url

    config: dict[str, Any] = {}
    client: dict[str, Any] = {"connect_timeout": "10s", "timeout": "120s"}
    for k, v in storage_options.items():
        k = _ALIASES.get(k, k)
        if k in _CLIENT_KEYS:
            client[k] = v.lower() == "true" if k == "allow_http" else v
        elif k == "skip_signature":
            config[k] = v.lower() in ("1", "true", "yes")
        else:
            config[k] = v
    if str(config.get("endpoint", "")).startswith("http://"):
        client.setdefault("allow_http", True)
    retry = {"max_retries": 2, "retry_timeout": timedelta(seconds=30), "backoff": {}}
    return from_url(url.rstrip("/"), config=config or None, client_options=client, retry_config=retry)


def describe_store_error(url: str, exc: BaseException) -> str:
    """One sentence for what an object store answered."""
    from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

    text = str(exc)
    if "NoSuchBucket" in text:
        return f"{url}: the bucket does not exist."
    if isinstance(exc, (PermissionDeniedError, UnauthenticatedError)) or "AccessDenied" in text or "403" in text:
        return f"{url}: access denied (check the credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or --storage-option)."
    if "onnect" in text or "timed out" in text.lower() or "dns" in text.lower():
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return f"{url}: the endpoint cannot be reached ({first[:160]})."
    return f"{url}: the object store refused the request ({(text.strip().splitlines() or [type(exc).__name__])[0][:200]})."


class ObjectDestination:
    """A destination in a bucket (``s3://bucket/key``), behind the same seam as
    :class:`LocalDestination`.

    The output is written to a local staging area (a temporary directory under
    ``tmpdir``, ``--tmpdir``; by default ``TMPDIR``), then published: data objects first, then metadata documents from the
    deepest to the root, whose ``zarr.json`` (or the single HDF5 object) appears last, so
    a reader finds the store only when every object under it exists. A failed or
    interrupted run deletes what it uploaded. Uploads run on threads; obstore splits
    large objects into multipart uploads, which become visible only when complete.
    """

    def __init__(self, url: str, storage_options: dict[str, str], tmpdir: str | os.PathLike | None = None) -> None:
        self.tmpdir = tmpdir
        self.url = url.rstrip("/")
        self.storage_options = storage_options
        self.store, self.key = object_store(self.url, storage_options)
        if not self.key:
            from layoutkit.errors import OutputNotWritableError

            raise OutputNotWritableError(f"Destination {url!r} names a bucket, not an object: add a key, e.g. {url.rstrip('/')}/out.zarr.")
        self.path = Path(self.key)  # the name, for messages and summaries
        self._uploaded: list[str] = []
        self._bytes = 0

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"ObjectDestination({self.url!r})"

    def _existing(self, limit: int | None = None) -> list[str]:
        import obstore

        found = []
        for batch in obstore.list(self.store, prefix=self.key, chunk_size=1000):
            for meta in batch:
                path = meta["path"]
                if path == self.key or path.startswith(self.key + "/"):
                    found.append(path)
                    if limit and len(found) >= limit:
                        return found
        return found

    def _published(self) -> bool:
        """Whether a reader would find something at the destination: the object itself (a
        file) or a root metadata document (a store). Objects under the key without one are
        what a killed upload left; the next publication removes them."""
        import obstore

        for key in (self.key, *(f"{self.key}/{name}" for name in (".zgroup", ".zarray", "zarr.json"))):
            try:
                obstore.head(self.store, key)
                return True
            except FileNotFoundError:
                continue
        return False

    def check(self, overwrite: bool) -> None:
        """Refuse an existing destination (unless ``overwrite``), a missing bucket, denied
        access, an endpoint that does not answer, or a ``tmpdir`` that is not a writable
        folder, before any work."""
        if self.tmpdir is not None and not (Path(self.tmpdir).is_dir() and os.access(self.tmpdir, os.W_OK)):
            raise OutputNotWritableError(f"--tmpdir {str(self.tmpdir)!r} is not a writable folder.")
        try:
            self._existing(limit=1)  # a LIST answers for the bucket and the access (a HEAD's 404 does not)
            exists = self._published()
        except Exception as exc:  # obstore raises builtins and its own errors: name what it said
            raise _store_error(self.url, exc) from None
        if exists and not overwrite:
            raise OutputExistsError(f"Destination {self.url!r} exists; pass --overwrite to replace it.")

    def stage(self) -> Path:
        import tempfile

        self._root = Path(tempfile.mkdtemp(prefix="layoutkit-upload-", dir=self.tmpdir))
        return self._root / self.path.name

    def publish(self, staged: Path) -> None:
        """Upload ``staged`` (a file, or a directory tree), the metadata last; then remove
        what an overwritten destination had that the new one does not."""
        import obstore

        old = set(self._existing())
        if staged.is_file():
            order = [[(staged, self.key)]]
        else:
            files = [p for p in staged.rglob("*") if p.is_file()]
            data = [p for p in files if p.name not in METADATA_NAMES]
            meta = sorted((p for p in files if p.name in METADATA_NAMES), key=lambda p: -len(p.relative_to(staged).parts))
            root = [p for p in meta if p.parent == staged]
            order = [[(p, f"{self.key}/{p.relative_to(staged).as_posix()}") for p in group]
                     for group in (data, [p for p in meta if p.parent != staged], root)]
        try:
            for group in order:
                self._upload(group)
        except Exception as exc:
            raise _store_error(self.url, exc) from None
        for stale in sorted(old - set(self._uploaded)):
            obstore.delete(self.store, stale)
        self._uploaded = []  # published: nothing to take back
        remove_path(self._root)

    def _upload(self, items: list[tuple[Path, str]]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        import obstore

        def put(item: tuple[Path, str]) -> int:
            local, key = item
            with open(local, "rb") as fh:
                obstore.put(self.store, key, fh)
            self._uploaded.append(key)
            return local.stat().st_size

        with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
            self._bytes += sum(pool.map(put, items))

    def discard(self, staged: Path) -> None:
        """Remove the local staging area and every object this run uploaded."""
        import obstore

        for key in self._uploaded:
            try:
                obstore.delete(self.store, key)
            except Exception:  # noqa: BLE001 - best effort while failing already
                pass
        self._uploaded = []
        remove_path(getattr(self, "_root", staged))

    def size(self) -> int:
        """Bytes uploaded."""
        return self._bytes


def _store_error(url: str, exc: BaseException) -> Exception:
    from layoutkit.errors import OutputNotWritableError

    return OutputNotWritableError(describe_store_error(url, exc))



# -- sources in a bucket ----------------------------------------------------------------

READ_BLOCK_BYTES = 4 * 1024**2  # what one metadata read fetches (h5py asks for a few bytes at a time)
READ_CACHE_BLOCKS = 64  # 256 MiB at most


@dataclass(frozen=True)
class ObjectSource:
    """An HDF5 file in a bucket (``s3://bucket/key.h5``): what the walk and the readers
    need of a source, over ranged GETs. Picklable (workers open it themselves).

    h5py reads the metadata through :meth:`open_file`, a file object with a read-ahead
    block cache; chunk bytes never go through h5py: the inventory knows each chunk's
    offset and size, and :meth:`read_range` fetches exactly those bytes.
    """

    url: str
    options: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.url

    @property
    def _store(self) -> tuple[Any, str]:
        cached = _STORES.get(self)
        if cached is None:
            cached = _STORES[self] = object_store(self.url, dict(self.options))
        return cached

    def size(self) -> int:
        import obstore

        store, key = self._store
        return int(obstore.head(store, key)["size"])

    def stat(self) -> Any:
        """The one ``os.stat_result`` field the commands use (``st_size``), as a Path has it."""
        from types import SimpleNamespace

        return SimpleNamespace(st_size=self.size())

    def resolve(self) -> ObjectSource:
        return self

    def read_range(self, offset: int, size: int) -> bytes:
        import obstore

        store, key = self._store
        return bytes(obstore.get_range(store, key, start=offset, length=size)) if size else b""

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Several ``(offset, size)`` ranges at once: obstore fetches them concurrently and
        merges neighbours (gaps under 1 MiB) into one GET."""
        import obstore

        if not ranges:
            return []
        store, key = self._store
        parts = obstore.get_ranges(store, key, starts=[o for o, _ in ranges], lengths=[n for _, n in ranges])
        return [bytes(p) for p in parts]

    def open_file(self, on_get: Any = None) -> RangeFile:
        """A file object over the source; ``on_get(nbytes)`` is told of every GET."""
        return RangeFile(self, self.size(), on_get)


_STORES: dict[ObjectSource, tuple[Any, str]] = {}


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over :meth:`ObjectSource.read_range`, fetching whole
    blocks of :data:`READ_BLOCK_BYTES` and keeping the last :data:`READ_CACHE_BLOCKS`
    (h5py reads metadata a few bytes at a time). ``requests`` counts the GETs."""

    def __init__(self, source: ObjectSource, size: int, on_get: Any = None) -> None:
        self.source, self._size, self._pos, self._on_get = source, size, 0, on_get
        self._blocks: dict[int, bytes] = {}
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _block(self, index: int) -> bytes:
        block = self._blocks.pop(index, None)
        if block is None:
            start = index * READ_BLOCK_BYTES
            block = self.source.read_range(start, min(READ_BLOCK_BYTES, self._size - start))
            self.requests += 1
            if self._on_get is not None:
                self._on_get(len(block))
            if len(self._blocks) >= READ_CACHE_BLOCKS:
                self._blocks.pop(next(iter(self._blocks)))
        self._blocks[index] = block  # most recently used last
        return block

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), max(0, self._size - self._pos))
        done = 0
        while done < want:
            index, inner = divmod(self._pos + done, READ_BLOCK_BYTES)
            piece = self._block(index)[inner : inner + want - done]
            view[done : done + len(piece)] = piece
            done += len(piece)
        self._pos += done
        return done


def as_source(text: str | os.PathLike | ObjectSource, storage_options: dict[str, str] | None = None) -> Path | ObjectSource:
    """Parse a source once, at the edge: a bucket URL or a local path (``file://`` too)."""
    if isinstance(text, (ObjectSource, Path)):
        return text
    if is_url(text):
        return ObjectSource(str(text), tuple(sorted((storage_options or {}).items())))
    return Path(str(text).removeprefix("file://"))


def portable(source: Path | ObjectSource) -> str | ObjectSource:
    """The source as a task ships it to a worker: an absolute path, or the bucket source."""
    return source if isinstance(source, ObjectSource) else str(Path(source).resolve())


def read_head(source: str | os.PathLike | ObjectSource, size: int) -> bytes:
    """The first ``size`` bytes of a source (its user block)."""
    if isinstance(source, ObjectSource):
        return source.read_range(0, size)
    with open(source, "rb") as fh:
        return fh.read(size)


__all__ = ["Destination", "LocalDestination", "ObjectDestination", "ObjectSource", "RangeFile", "as_source", "destination",
           "disk_usage", "is_url", "object_store", "parse_storage_options", "portable", "read_head", "remove_path",
           "store_at"]
