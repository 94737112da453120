"""How the commands keep freed memory from piling up in glibc's heaps."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.memory import MMAP_THRESHOLD

FREE_BETWEEN_SURVIVORS = """
import sys
import psutil
from layoutkit.memory import return_large_blocks

if sys.argv[1] == "fixed":
    return_large_blocks()
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
    result = CliRunner().invoke(app, ["recipes"])
    assert result.exit_code == 0, result.output
    assert os.environ["MALLOC_MMAP_THRESHOLD_"] == str(MMAP_THRESHOLD)  # inherited by spawned workers
