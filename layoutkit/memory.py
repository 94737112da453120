"""The process's memory: how glibc hands freed memory back, and the peak RSS.

glibc serves an allocation of at least its mmap threshold with a mapping of its own,
returned to the system when freed; smaller ones come from per-thread heaps ("arenas"),
which keep what is freed for the next allocation. The threshold starts at 128 KiB and
rises to the size of any mapped block freed (up to 32 MiB), so a run whose threads
allocate and free blocks of several MiB (chunks fetched from a bucket, decoded, encoded)
soon serves them all from the heaps, and each thread's heap keeps its high-water mark.
A heap hands back the free memory at its top once it exceeds the trim threshold
(128 KiB unless set): then the next block the thread allocates is made of fresh pages,
each one a page fault in which the kernel zeroes it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import os
from collections.abc import Iterator
from typing import Any

MMAP_THRESHOLD = 4 * 1024**2
"""Blocks of at least this many bytes get a mapping of their own (and go back to the
system when freed): a convert from a bucket to signal-major Zarr (16 reading threads)
peaked at 1,142 MiB with glibc's rising threshold, 565 MiB with this one."""
TRIM_THRESHOLD = 32 * 1024**2
"""A thread's heap keeps up to this many free bytes at its top for its next blocks.
With glibc's 128 KiB, the heaps handed back the pages of nearly every chunk freed and
faulted them in again for the next: in a local convert re-encoding to zstd:3 (the 40 x
70 sample with 10x signals), the kernel's time was 9.5-10.2 of 32 CPU seconds, most of
it page faults (perf). With 32 MiB: 4.7 s of the kernel's, 17.1-17.6 -> 14.2 s in all,
peak RSS 201 -> 208 MiB (8 and 16 MiB gave part of that; 64-256 MiB no more)."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)


@contextlib.contextmanager
def settled_heap() -> Iterator[None]:
    """Leave the objects alive now out of the cyclic garbage collector's passes until
    the block ends (``gc.freeze``). A run's inventory, plan and metadata documents are
    hundreds of thousands of objects that live until it ends, and each full pass of the
    collector, set off by the tasks' allocations, walked them all again: about 2% of a
    copy's CPU time (perf). They are still freed by reference counting."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@functools.cache
def _libc() -> Any:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to tune or trim
        return None


def tune_allocator(threshold: int = MMAP_THRESHOLD, trim: int = TRIM_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` (freed large blocks go back to the
    system instead of staying in the threads' heaps) and its trim threshold at ``trim``
    (the heaps keep what the next chunks will reuse), for this process and the processes
    it starts from now on (``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_``,
    each unless the user set it). False where the C library is not glibc."""
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(threshold))
    os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", str(trim))
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    done = True
    for name, parameter in (("MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD), ("MALLOC_TRIM_THRESHOLD_", _M_TRIM_THRESHOLD)):
        try:
            chosen = int(os.environ[name])
        except ValueError:  # the user's own value, which glibc read (or ignored) at start
            done = False
            continue
        done = bool(libc.mallopt(parameter, chosen)) and done
    return done


def release_freed_memory() -> None:
    """Hand the memory the last condition freed back to the system. glibc keeps freed
    memory in per-thread arenas, so a sweep of page buffers (8 workers x 256 MiB each,
    then the next condition) peaked at about the sum of its conditions rather than the
    largest one (measured: 3.98 GB for a local sweep whose largest cell takes 2.59 GB)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def write_proc(path: str, text: str) -> bool:
    """Write ``text`` to the kernel's file ``path`` (under ``/proc``); False where the
    system has no such file or does not let this process write it."""
    try:
        with open(path, "w") as fh:
            fh.write(text)
    except OSError:
        return False
    return True


def reset_peak_rss() -> bool:
    """Start this process's peak RSS (VmHWM) over from its current RSS; False where the
    system cannot (not Linux, or a kernel without ``clear_refs``)."""
    return write_proc("/proc/self/clear_refs", "5")


def peak_rss() -> int | None:
    """This process's peak RSS in bytes since :func:`reset_peak_rss` (None if unknown)."""
    try:
        with open("/proc/self/status") as fh:
            return next((int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:")), None)
    except OSError:
        return None


__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "peak_rss", "release_freed_memory", "reset_peak_rss", "settled_heap", "tune_allocator",
           "write_proc"]
