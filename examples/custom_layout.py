"""A new layout in about 30 lines: every numeric dataset as a .npy file, through the pipeline.

The pipeline checks the source and the destination, stages the output, runs the tasks on
the engine (threads, processes or a dask cluster), stamps the provenance and publishes,
or removes everything on an error or Ctrl-C. A layout only plans and writes. Register it
with one line, ``LAYOUTS[NpyFolder.name] = NpyFolder()`` in ``layoutkit/layouts/__init__.py``.

    python examples/custom_layout.py SRC.h5 OUT_FOLDER
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np

from layoutkit import pipeline
from layoutkit.pipeline import Layout, Work

MAX_BYTES = 64 * 2**20  # a .npy file is read whole: larger datasets are left out


@dataclass(frozen=True)
class NpyOptions:
    workers: int = 2
    overwrite: bool = False


@dataclass(frozen=True)
class NpyPlan:
    arrays: tuple[str, ...]
    nbytes: int


def npy_name(path: str) -> str:
    return path.strip("/").replace("/", "__") + ".npy"


def save_one(job: tuple[str, str], path: str) -> int:  # the task function: module level, for dask
    source, out = job
    with h5py.File(source, "r") as f:
        data = f[path][()]
    np.save(Path(out) / npy_name(path), data)
    return data.nbytes


class NpyFolder(Layout):
    name, command, target = "npy-folder", "export", "npy-folder"
    options_class, recipe_keys = NpyOptions, ()

    def plan(self, inventory, options, scale_digests, dest=""):
        keep = [a for a in inventory.arrays if a.dtype.kind in "biufc" and a.shape and not a.null_space
                and a.nbytes <= MAX_BYTES]
        return NpyPlan(tuple(a.path for a in keep), sum(a.nbytes for a in keep))

    def begin(self, staged, source, inventory, plan, attrs):
        staged.mkdir()
        (staged / "attrs.json").write_text(json.dumps(attrs))
        return Work(save_one, (str(source), str(staged)), plan.arrays)

    def summarize(self, source, dest, inventory, plan, work, seconds):
        return SimpleNamespace(arrays=len(plan.arrays), logical_bytes=plan.nbytes, dest_bytes=dest.size())


if __name__ == "__main__":
    print(pipeline.run(NpyFolder(), sys.argv[1], sys.argv[2], NpyOptions()))
