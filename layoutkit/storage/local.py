"""Destinations on a local or shared file system: staged beside, published by a rename.

A destination is checked before any work (:meth:`LocalDestination.check`), written in a
staging area (:meth:`~LocalDestination.stage`), then published whole
(:meth:`~LocalDestination.publish`) or thrown away (:meth:`~LocalDestination.discard`).
The staging area is a hidden sibling of the destination and publication is a rename, so
a reader never sees a half-written store or file. A run killed with SIGKILL cannot clean
up after itself: its staging area names the host and process that made it, and the next
run to the same destination removes it once that process is gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import socket
import tempfile
import uuid
from pathlib import Path
from typing import Any, Protocol

from layoutkit.errors import OutputExistsError, OutputNotWritableError

_STAGING = re.compile(r"^\.(?P<name>.+)\.layoutkit-(?P<kind>tmp|old)-(?P<host>[^-]+)-(?P<pid>\d+)-[0-9a-f]{8}$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, it is someone else's
        return True
    return True


class Destination(Protocol):
    """Where a command's output goes: check it, stage the output, publish or discard it.

    ``stage(output)`` hands the layout where to write: ``output`` is ``"file"`` (one HDF5
    file: a local path) or ``"store"`` (a Zarr store: a local folder, or a
    :class:`~layoutkit.storage.kv.KeyValue` target that writes elsewhere).
    ``publish(staged, note)`` makes it visible; ``note`` says what wrote it (a
    transactional destination uses it as its commit message).
    """

    def check(self, overwrite: bool) -> None: ...
    def stage(self, output: str = "file") -> Any: ...
    def publish(self, staged: Any, note: str = "") -> None: ...
    def discard(self, staged: Any) -> None: ...
    def size(self) -> int: ...


def remove_path(path: Path) -> None:
    """Remove a file or a directory tree, if it is there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def check_report_folder(path: str | os.PathLike[str], option: str = "--out", what: str = "the report") -> None:
    """Refuse, before any work, a folder a command's report cannot be written to: a file
    where the folder should be (or on its way), or a folder (the nearest that exists)
    that is read-only, to this user or as a file system.

    Raises
    ------
    OutputNotWritableError
    """
    folder = Path(path)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "is a file" if existing == folder else f"lies under the file {str(existing)!r}"
        raise OutputNotWritableError(f"{option} {str(folder)!r} {where}; name a folder for {what}.")
    read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    why = "is on a read-only file system" if read_only else unwritable(existing)
    if why:
        raise OutputNotWritableError(f"{option} {str(folder)!r} cannot be written: {str(existing)!r} {why}.")


def unwritable(folder: Path) -> str | None:
    """Why no file can be made in the existing ``folder``, found by making one (and
    writing a byte to it), or None. ``os.access`` answers from permission bits: root
    passes it on a folder of /proc, a quota or a full disk passes it too.
    """
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".layoutkit-probe-")
    except OSError as exc:
        return _because(exc)
    try:
        os.write(fd, b"\0")
    except OSError as exc:
        return _because(exc)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
    return None


def _because(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "cannot be written by this user"
    return f"refuses a new file ({(exc.strerror or str(exc)).lower()})"


def disk_usage(path: Path) -> int:
    """Bytes of a file, or of every file under a directory."""
    if path.is_file():
        return path.stat().st_size
    if not path.is_dir():
        return 0
    total, folders = 0, [str(path)]
    while folders:  # scandir: file types come with the listing (2.4x faster than rglob)
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total


class LocalDestination:
    """A destination path on a local or shared file system.

    Parameters
    ----------
    path
        The store directory or file to write.
    """

    kind = "local"  # what Layout.destinations names it

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
        self._overwrite = overwrite
        if (dst.exists() or dst.is_symlink()) and not overwrite:
            raise OutputExistsError(f"Destination {str(dst)!r} exists; pass --overwrite to replace it.")
        parent = dst.parent if str(dst.parent) else Path(".")
        if not parent.exists():
            raise OutputNotWritableError(f"Destination folder {str(parent)!r} does not exist.")
        if not parent.is_dir():
            raise OutputNotWritableError(f"Destination parent {str(parent)!r} is not a folder.")
        why = "is on a read-only file system" if os.statvfs(parent).f_flag & os.ST_RDONLY else unwritable(parent)
        if why:
            raise OutputNotWritableError(f"Destination {str(dst)!r} cannot be written: its folder {str(parent)!r} {why}.")

    def stale(self) -> list[Path]:
        """Staging areas of this destination left by runs on this host whose process is gone."""
        found = []
        host = _host()
        parent = self.path.parent if str(self.path.parent) else Path(".")
        for entry in parent.glob(f".{glob_escape(self.path.name)}.layoutkit-*"):
            m = _STAGING.match(entry.name)
            if m and m.group("name") == self.path.name and m.group("host") == host and not process_alive(int(m.group("pid"))):
                found.append(entry)
        return found

    def stage(self, output: str = "file") -> Path:
        """Remove stale staging areas of this destination; return a fresh one (not created),
        for a file or a store folder alike."""
        for entry in self.stale():
            remove_path(entry)
        return self._sibling("tmp")

    def publish(self, staged: Path, note: str = "") -> None:
        """Move the complete ``staged`` output to the destination; an existing destination
        (``--overwrite``) is removed only once the new one is in place."""
        if not getattr(self, "_overwrite", False):
            self._publish_new(staged)
            return
        old = None
        if self.path.exists() or self.path.is_symlink():
            old = self._sibling("old")
            os.rename(self.path, old)
        os.rename(staged, self.path)
        if old is not None:
            remove_path(old)

    def _publish_new(self, staged: Path) -> None:
        """Publish where nothing may be replaced: a destination that appeared during the
        run (another run to the same path) wins, and this run refuses. Atomic: a directory
        is renamed (which fails onto a store, never empty), a file hard-linked (which fails
        onto anything)."""
        try:
            if staged.is_dir():
                if self.path.is_symlink() or (self.path.exists() and not self.path.is_dir()):
                    raise FileExistsError(self.path)
                os.rename(staged, self.path)
            else:
                try:
                    os.link(staged, self.path)
                except OSError as exc:
                    if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                        raise
                    if self.path.exists() or self.path.is_symlink():  # no hard links here
                        raise FileExistsError(self.path) from None
                    os.rename(staged, self.path)
                    return
                os.unlink(staged)
        except OSError as exc:
            if isinstance(exc, FileExistsError) or exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR):
                raise OutputExistsError(
                    f"Destination {str(self.path)!r} exists: another run wrote it while this one was writing; "
                    "it is left as that run wrote it."
                ) from None
            raise

    def discard(self, staged: Path) -> None:
        """Remove a staging area after a failure or an interruption."""
        remove_path(staged)

    def size(self) -> int:
        """Bytes written at the destination."""
        return disk_usage(self.path)


class StagingDestination(LocalDestination):
    """The folder an append writes the new shots to before they join the store
    (:mod:`layoutkit.appending.append`): a local folder whatever the store's destination,
    so a layout that appends writes there even when it writes nowhere else locally
    (the virtual layout's staged references, which its merge sets in the repository)."""

    kind = "staging"


def glob_escape(name: str) -> str:
    """``name`` with glob's special characters taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", name)


__all__ = ["StagingDestination", "Destination", "LocalDestination", "check_report_folder", "disk_usage", "glob_escape", "remove_path",
           "unwritable"]
