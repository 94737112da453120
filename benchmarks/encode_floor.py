"""The CPU a re-encoding convert cannot avoid: inflate + unshuffle every stored chunk of
one netCDF-4 variable, then zstd-encode it in the store's chunks, on one thread.

    python benchmarks/encode_floor.py /tmp/layoutkit-bench/tas-400MB.nc [--var tas] [--level 3] [--steps 16]

``bench_object_store.py`` writes that file (its netCDF-4 sample, zlib + shuffle, one
chunk per time step); convert's default chunking packs 16 steps per Zarr chunk.
"""

from __future__ import annotations

import argparse
import time

import h5py
import imagecodecs
import numcodecs
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--var", default="tas")
    ap.add_argument("--level", type=int, default=3)
    ap.add_argument("--steps", type=int, default=16, help="source chunks per store chunk")
    args = ap.parse_args()
    with h5py.File(args.path, "r") as f:
        ds = f[args.var]
        chunk_bytes = int(np.prod(ds.chunks)) * ds.dtype.itemsize
        origins = [tuple(i.chunk_offset) for i in _chunks(ds)]
        raws = [ds.id.read_direct_chunk(o)[1] for o in origins]
        dtype, logical = ds.dtype, ds.size * ds.dtype.itemsize
    shuffle, zstd = numcodecs.Shuffle(elementsize=dtype.itemsize), numcodecs.Zstd(level=args.level)
    t = time.process_time()
    values = [np.frombuffer(shuffle.decode(imagecodecs.deflate_decode(r, out=chunk_bytes)), dtype) for r in raws]
    decode = time.process_time() - t
    t = time.process_time()
    for i in range(0, len(values), args.steps):
        zstd.encode(np.concatenate(values[i : i + args.steps]))
    encode = time.process_time() - t
    print(f"{len(raws)} chunks, {logical / 1e6:.0f} MB logical: inflate + unshuffle {decode:.2f} CPU-s, "
          f"assemble + zstd:{args.level} {encode:.2f} CPU-s ({logical / encode / 1e6:.0f} MB/s), "
          f"together {decode + encode:.2f} CPU-s")


def _chunks(ds: h5py.Dataset) -> list:
    found: list = []
    ds.id.chunk_iter(found.append)
    return found


if __name__ == "__main__":
    main()
