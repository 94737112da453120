"""The process's memory: how glibc hands freed memory back, and the peak RSS.

glibc serves an allocation of at least its mmap threshold with a mapping of its own,
returned to the system when freed; smaller ones come from per-thread heaps ("arenas"),
which keep what is freed for the next allocation. The threshold starts at 128 KiB and
rises to the size of any mapped block freed (up to 32 MiB), so a run whose threads
allocate and free blocks of several MiB (chunks fetched from a bucket, decoded, encoded)
soon serves them all from the heaps, and each thread's heap keeps its high-water mark.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

MMAP_THRESHOLD = 4 * 1024**2
"""Blocks of at least this many bytes get a mapping of their own (and go back to the
system when freed): a convert from a bucket to signal-major Zarr (16 reading threads)
peaked at 1,142 MiB with glibc's rising threshold, 565 MiB with this one."""
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


@functools.cache
def _libc() -> Any:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to tune or trim
        return None


def return_large_blocks(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` for this process and the processes it
    starts from now on (``MALLOC_MMAP_THRESHOLD_``, unless the user set it), so that freed
    large blocks go back to the system instead of staying in the threads' heaps. False
    where the C library is not glibc."""
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(threshold))
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    try:
        chosen = int(os.environ["MALLOC_MMAP_THRESHOLD_"])
    except ValueError:  # the user's own value, which glibc read (or ignored) at start
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, chosen))


def release_freed_memory() -> None:
    """Hand the memory the last condition freed back to the system. glibc keeps freed
    memory in per-thread arenas, so a sweep of page buffers (8 workers x 256 MiB each,
    then the next condition) peaked at about the sum of its conditions rather than the
    largest one (measured: 3.98 GB for a local sweep whose largest cell takes 2.59 GB)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def reset_peak_rss() -> bool:
    """Start this process's peak RSS (VmHWM) over from its current RSS; False where the
    system cannot (not Linux, or a kernel without ``clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def peak_rss() -> int | None:
    """This process's peak RSS in bytes since :func:`reset_peak_rss` (None if unknown)."""
    try:
        with open("/proc/self/status") as fh:
            return next((int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:")), None)
    except OSError:
        return None


__all__ = ["MMAP_THRESHOLD", "peak_rss", "release_freed_memory", "reset_peak_rss", "return_large_blocks"]
