"""The readers users already have, reading what ``layoutkit.open`` returns (bench_readers).

Each reads one signal of every shot (``signal``) or every signal of one shot (``shot``):
the signal arrays and the time bases they are on, with their attributes (what
``layoutkit.open`` returns), as a user of that reader would write it.

- HDF5: h5py over s3fs, an 8 MiB ``blockcache`` and, on paged files, a 64 MiB page buffer
  (NSIDC's recommendation for cloud-optimised HDF5); the time bases through ``ds.dims``.
- Zarr: zarr-python over obstore (``zarr.storage.ObjectStore``), one array after another,
  as the layout's spec says to find them: the mirrored store's arrays and the time bases
  its ``dimension_names`` name; a signal-major series' ``shot``/``start``/``length`` index
  and ``data`` (examples/read_signal_major_with_zarr.py); a shot-packed shot's
  ``_packed`` index and bytes (examples/read_shot_with_zarr.py). Shot-packed has no
  reader of one signal of every shot but layoutkit's.
- A virtual store: zarr-python over icechunk, the bucket of the sources authorised as its
  virtual chunk container (reached at the run's endpoint), read as the mirrored store is
  (docs/formats/virtual.md): Icechunk fetches each referenced chunk with a GET of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MiB = 1024**2
CREDENTIALS = {"key": "test", "secret": "test"}


def hdf5(url: str, endpoint: str, pattern: str, item: str, paged: bool) -> None:
    import h5py
    import s3fs

    fs = s3fs.S3FileSystem(**CREDENTIALS, client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"})
    with fs.open(url.removeprefix("s3://"), "rb", block_size=8 * MiB, cache_type="blockcache") as fh, \
            h5py.File(fh, "r", **({"page_buf_size": 64 * MiB} if paged else {})) as f:

        def read(ds: Any) -> None:  # the signal and its time bases, with their attributes
            ds[()], dict(ds.attrs)
            for dim in ds.dims:
                for scale in dim.values():
                    scale[()], dict(scale.attrs)

        if pattern == "signal":
            for shot in f["shots"]:
                if item in f[f"shots/{shot}/signals"]:
                    read(f[f"shots/{shot}/signals/{item}"])
        else:
            for ds in f[f"shots/{item}/signals"].values():
                read(ds)


def _root(url: str, endpoint: str) -> Any:
    import zarr
    from obstore.store import S3Store

    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    store = S3Store(bucket, prefix=prefix, endpoint=endpoint, access_key_id="test", secret_access_key="test",
                    region="us-east-1", client_options={"allow_http": True})
    return zarr.open_group(zarr.storage.ObjectStore(store, read_only=True), mode="r")


def zarr_store(url: str, endpoint: str, pattern: str, item: str) -> bool:
    """Read with zarr-python; False when the layout has no such reader for the pattern."""
    root = _root(url, endpoint)
    layout = (root.attrs.get("layoutkit_layout") or {}).get("name", "shot-major")
    if layout == "shot-major":
        _mirror(root, pattern, item)
    elif layout == "signal-major":
        _signal_major(root, pattern, item)
    elif layout == "shot-packed" and pattern == "shot":
        _packed_shot(root, item)
    else:
        return False
    return True


def icechunk_store(url: str, endpoint: str, pattern: str, item: str) -> bool:
    """Read a virtual store (``icechunk:s3://bucket/prefix``) with zarr-python + icechunk."""
    import icechunk
    import zarr

    bucket, _, prefix = url.removeprefix("icechunk:s3://").partition("/")
    s3 = {"endpoint_url": endpoint, "allow_http": True, "region": "us-east-1", "force_path_style": True}
    keys = {"access_key_id": "test", "secret_access_key": "test"}
    storage = icechunk.s3_storage(bucket=bucket, prefix=prefix, **s3, **keys)
    config = icechunk.Repository.fetch_config(storage) or icechunk.RepositoryConfig.default()
    containers = {}
    for name in list(config.virtual_chunk_containers or {}):  # reached at this run's endpoint (the proxy)
        config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(name, icechunk.s3_store(**s3)))
        containers[name] = icechunk.s3_credentials(**keys)
    containers = icechunk.containers_credentials(containers)
    repo = icechunk.Repository.open(storage, config=config, authorize_virtual_chunk_access=containers)
    _mirror(zarr.open_group(repo.readonly_session("main").store, mode="r", zarr_format=3), pattern, item)
    return True


def _mirror(root: Any, pattern: str, item: str) -> None:
    def read(shot: Any, array: Any) -> None:
        array[...]
        for dim in array.metadata.dimension_names or ():
            if dim is not None:
                shot[f"timebases/{dim}"][...]

    if pattern == "signal":
        for name in root["shots"].group_keys():
            shot = root[f"shots/{name}"]
            if item in shot["signals"]:
                read(shot, shot[f"signals/{item}"])
    else:
        shot = root[f"shots/{item}"]
        for _, array in shot["signals"].arrays():
            read(shot, array)


def _series(root: Any, group: Any, shot: str | None, seen: set[str]) -> None:
    """One series (a signal or a time base) of every shot, or its rows of one shot; the
    time bases not in ``seen`` (read once, however many signals are on them). A time base
    that repeats another in some shots (``same_as``) is read from that other's rows."""
    series = group.attrs["layoutkit_series"]
    if series["parts"]:
        shots, starts, lengths = group["shot"][:], group["start"][:], group["length"][:]
        rows = np.flatnonzero(shots.astype(str) == shot) if shot is not None else None
        if rows is None:
            group["data"][:]
        elif rows.size:
            a, n = int(starts[rows[0]]), int(lengths[rows[0]])
            group["data"][a : a + n]
        for dims in series["parts"][0]["dims"]:
            for scale in dims:
                if scale not in seen:
                    seen.add(scale)
                    _series(root, root[f"scales/{scale}"], shot, seen)
    if series["same_as"]["shots"]:
        same_shots, same_as = group["same_as_shot"][:], group["same_as"][:]
        wanted = same_as if shot is None else same_as[same_shots.astype(str) == shot]
        for other in dict.fromkeys(str(x) for x in wanted):
            if other not in seen:
                seen.add(other)
                _series(root, root[f"scales/{other}"], shot, seen)


def _signal_major(root: Any, pattern: str, item: str) -> None:
    if pattern == "signal":
        _series(root, root[f"signals/{item}"], None, set())
    else:
        seen: set[str] = set()
        for name in root.attrs["layoutkit_layout"]["signal_names"]:
            _series(root, root[f"signals/{name}"], item, seen)


def _packed_shot(root: Any, shot: str) -> None:
    packed = root[f"shots/{shot}/_packed"]
    packed.attrs["layoutkit_shot_packed"]
    packed[:]
