"""Read a signal-major store with plain zarr and xarray: no layoutkit needed to read.

    python examples/read_signal_major_with_zarr.py STORE.zarr [SIGNAL]
    python examples/read_signal_major_with_zarr.py            # writes a small one first

The layout (docs/formats/signal-major.md): ``/signals/<SIGNAL>/data`` holds every shot's
samples end to end; ``shot``, ``start`` and ``length`` say where each shot's rows are.
"""

import sys
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr
import zarr


def read_signal(store: Path, signal: str) -> dict[int, np.ndarray]:
    """Every shot of one signal: a few reads of the packed array, wherever the store is."""
    group = zarr.open_group(store, mode="r")[f"signals/{signal}"]
    shots, starts, lengths = group["shot"][:], group["start"][:], group["length"][:]
    data = group["data"][:]  # one signal of every shot: the read this layout is made for
    return {int(s): data[a : a + n] for s, a, n in zip(shots, starts, lengths)}


def main(store: Path, signal: str | None) -> None:
    signals = sorted(zarr.open_group(store, mode="r")["signals"].group_keys())
    signal = signal or signals[0]
    by_shot = read_signal(store, signal)
    print(f"{store.name}: {len(signals)} signals; {signal!r} in {len(by_shot)} shots:")
    for shot, values in list(by_shot.items())[:5]:
        print(f"  shot {shot}: {values.shape} {values.dtype}, mean {values.mean():.4g}")
    # xarray opens each series group as a dataset (the sample axis is a ragged array)
    ds = xr.open_zarr(store, group=f"signals/{signal}", consolidated=False)  # node by node: no root listing
    print(ds)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
    else:
        from layoutkit.convert import ConvertOptions, convert
        from layoutkit.options import parse_shards
        from layoutkit.sample import write_sample

        with tempfile.TemporaryDirectory() as tmp:
            src = write_sample(Path(tmp) / "shots.h5", shots=3, signals=10).path
            convert(src, Path(tmp) / "by-signal.zarr", ConvertOptions(layout="signal-major", shards=parse_shards("auto")))
            main(Path(tmp) / "by-signal.zarr", None)
