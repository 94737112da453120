"""Simulated storage: count (and later delay) every read a reader makes.

:class:`CountingFile` is a file object that h5py can open (``h5py.File(fileobj)``), so
every read HDF5 makes, metadata or data, with or without its page buffer, is one
request here, the way each would be one ranged GET on object storage.
"""

from __future__ import annotations

import io
import os
from typing import Any


class CountingFile(io.RawIOBase):
    """A read-only file that counts requests and bytes.

    Parameters
    ----------
    path
        The file to read.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self._fh = open(path, "rb", buffering=0)  # noqa: SIM115 - closed in close()
        self.requests = 0
        self.bytes = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._fh.seek(offset, whence)

    def tell(self) -> int:
        return self._fh.tell()

    def readinto(self, buffer: Any) -> int:
        n = self._fh.readinto(buffer)
        self.requests += 1
        self.bytes += n or 0
        return n or 0

    def close(self) -> None:
        self._fh.close()
        super().close()

    def reset(self) -> None:
        self.requests = 0
        self.bytes = 0
