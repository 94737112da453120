"""Read one shot of a shot-packed store with plain zarr and numpy: no layoutkit needed.

    python examples/read_shot_with_zarr.py STORE.zarr [SHOT]
    python examples/read_shot_with_zarr.py            # writes a small one first

The layout (docs/formats/shot-packed.md, version 3): ``/shots/<SHOT>/_packed`` holds the
bytes of every signal and time base of the shot, end to end; its own ``zarr.json``
carries the shot's index (``layoutkit_shot_packed``): per dataset its path in the shot,
first byte, dtype, shape, attributes and dimension scales. So one shot is two reads,
whatever the number of shots in the store: that document, then the shot's bytes.
"""

import sys
import tempfile
from pathlib import Path

import numpy as np
import zarr


def read_shot(store: Path, shot: str) -> dict[str, tuple[np.ndarray, dict, list]]:
    """Every packed dataset of one shot: path in the shot -> (values, attributes, scales)."""
    packed = zarr.open_array(store, path=f"shots/{shot}/_packed", mode="r")  # its zarr.json: the index
    index = packed.attrs["layoutkit_shot_packed"]
    raw = packed[:]  # the shot's bytes: one object (a shard)
    out = {}
    for name, start, dtype, shape, attrs, scales in zip(index["names"], index["start"], index["dtype"],
                                                         index["shape"], index["attrs"], index["scales"]):
        dt = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        out[name] = (raw[start : start + size].view(dt).reshape(shape), attrs, scales)
    return out


def main(store: Path, shot: str | None) -> None:
    root = zarr.open_group(store, mode="r")
    layout = root.attrs["layoutkit_layout"]
    assert layout["name"] == "shot-packed" and layout["version"] >= 3, layout
    shots = [str(s) for s in root[layout["shots"]][:]]  # the shot list: one read
    shot = shot or shots[0]
    datasets = read_shot(store, shot)
    print(f"{store.name}: {len(shots)} shots; shot {shot} holds {len(datasets)} packed datasets:")
    for name, (values, attrs, scales) in list(datasets.items())[:6]:
        on = ", ".join(axis[0] for axis in scales if axis) or "-"
        print(f"  {name}: {values.shape} {values.dtype}, mean {values.mean():.4g}, on {on}, attrs {sorted(attrs)}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
    else:
        from layoutkit.convert import ConvertOptions, convert
        from layoutkit.sample import write_sample

        with tempfile.TemporaryDirectory() as tmp:
            src = write_sample(Path(tmp) / "shots.h5", shots=3, signals=10).path
            convert(src, Path(tmp) / "packed.zarr", ConvertOptions(layout="shot-packed"))
            main(Path(tmp) / "packed.zarr", None)
