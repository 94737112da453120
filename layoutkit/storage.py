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

import os
import re
import shutil
import socket
import uuid
from pathlib import Path

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


__all__ = ["LocalDestination", "disk_usage", "remove_path"]
