"""How the commands keep freed memory from piling up in glibc's heaps."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.memory import MMAP_THRESHOLD, TRIM_THRESHOLD

FREE_BETWEEN_SURVIVORS = """
import sys
import psutil
from layoutkit.memory import tune_allocator

if sys.argv[1] == "fixed":
    tune_allocator()
first = bytearray(16 << 20)  # mapped, then freed: glibc's own threshold rises to 16 MiB
del first

def touched(n):
    b = bytearray(n)
    b[:: 4096] = b"x" * len(range(0, n, 4096))  # every page resident
    return b

big, keep = [], []
for _ in range(24):
    big.append(touched(8 << 20))  # a chunk-sized block, as a bucket read fetches and decodes
    keep.append(touched(64 << 10))  # a survivor after each: the heap cannot shrink past it
before = psutil.Process().memory_info().rss
del big
print(before - psutil.Process().memory_info().rss)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_large_blocks_go_back_to_the_system_with_the_threshold_fixed() -> None:
    """With glibc's threshold risen, 192 MB of 8 MiB blocks freed between survivors stay
    in the process; with the threshold fixed at MMAP_THRESHOLD they go back at once."""
    # no MALLOC_* settings at all: any of them (dask's nanny sets MALLOC_TRIM_THRESHOLD_ for
    # its workers) turns glibc's rising threshold off
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}

    def freed(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", FREE_BETWEEN_SURVIVORS, mode], capture_output=True, text=True,
                              check=True, env=env)
        return int(done.stdout)

    assert freed("fixed") > 150 * 2**20
    assert freed("rising") < 50 * 2**20  # what the commands did before


def test_every_command_fixes_the_threshold_for_itself_and_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    result = CliRunner().invoke(app, ["recipes"])
    assert result.exit_code == 0, result.output
    assert os.environ["MALLOC_MMAP_THRESHOLD_"] == str(MMAP_THRESHOLD)  # inherited by spawned workers
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == str(TRIM_THRESHOLD)


CHURN = """
import ctypes, resource, sys

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "tuned":
    from layoutkit.memory import tune_allocator

    tune_allocator()
else:  # the mmap threshold fixed, as the commands did before, the trim threshold glibc's
    libc.mallopt(-3, int(sys.argv[2]))

def churn(n):  # a chunk-sized block, decoded or encoded (every page written), then freed
    block = libc.malloc(n)
    ctypes.memset(block, 1, n)
    libc.free(block)

# malloc and free themselves: through Python objects, whatever else the interpreter allocated
# in between decided whether the freed block lay at the heap's top (48,000 faults in one
# run, 2,912 in the next, on the same code)
churn(2 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(100):
    churn(2 << 20)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_freed_chunk_is_reused_not_faulted_in_again() -> None:
    """100 blocks of 2 MiB, each freed before the next: with glibc's trim threshold each
    one's 512 pages go back to the system and are faulted in again (the kernel zeroes
    every one); with the commands' threshold the heap keeps them for the next block."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}

    def faults(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", CHURN, mode, str(MMAP_THRESHOLD)], capture_output=True, text=True,
                              check=True, env=env)
        return int(done.stdout)

    assert faults("tuned") < 2_000
    assert faults("glibc") > 25_000  # about 100 x 512


def test_the_runs_long_lived_objects_are_left_out_of_the_collectors_passes() -> None:
    import gc

    from layoutkit.memory import settled_heap

    kept = [[i] for i in range(1000)]
    before = gc.get_freeze_count()
    with settled_heap():
        assert gc.get_freeze_count() >= before + len(kept)
    assert gc.get_freeze_count() == before
