"""The reference a user would write by hand: one zarr array per HDF5 dataset, filled
with ``a[...] = ds[...]`` (same Zarr format and compressor as layoutkit's default).

    python benchmarks/plain_loop.py SRC.h5 DST.zarr
"""

import sys

import h5py
import zarr
from zarr.codecs import ZstdCodec


def copy(src: str, dst: str) -> None:
    copy_file(src, dst)


def copy_file(src, dst: str) -> None:  # noqa: ANN001 - a path or a file object (fsspec)
    """The copy, from whatever ``h5py.File`` accepts."""
    root = zarr.open_group(dst, mode="w-")
    with h5py.File(src, "r") as f:

        def visit(name, obj):
            if isinstance(obj, h5py.Group):
                root.require_group(name).attrs.update({k: _plain(v) for k, v in obj.attrs.items()})
            elif isinstance(obj, h5py.Dataset):
                a = zarr.create_array(
                    root.store, name=name, shape=obj.shape, dtype=obj.dtype, compressors=ZstdCodec(level=3),
                    attributes={k: _plain(v) for k, v in obj.attrs.items() if k not in ("DIMENSION_LIST", "REFERENCE_LIST")},
                )
                a[...] = obj[...]

        f.visititems(visit)


def _plain(v):
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    return v.tolist() if hasattr(v, "tolist") else v


if __name__ == "__main__":
    copy(sys.argv[1], sys.argv[2])
