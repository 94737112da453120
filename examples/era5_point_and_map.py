"""A climate analysis as it is written: a time series at one grid point through monthly
ERA5-like netCDF files, then one month's map, with xarray and dask; to be traced, not
changed:

    python examples/era5_point_and_map.py --make 3 era5      # three monthly files, era5/2010-01.nc ...
    layoutkit trace --out workload.json -- python examples/era5_point_and_map.py era5/*.nc
    layoutkit advise era5/2010-01.nc --workload workload.json --latency 10ms

``advise`` takes the reads of the file it is given (here January's). The same analysis
of any layout layoutkit writes, through ``layoutkit.open`` and xarray's ``layoutkit``
engine, at a simulated latency a request (how ``benchmarks/bench_workload.py --era5``
runs it against each candidate)::

    python examples/era5_point_and_map.py 2010-01.zarr --latency 0.01
"""

import argparse
import time
from pathlib import Path

import numpy as np
import xarray as xr

CHUNKS = {"time": 24}  # a day of hourly maps per dask chunk, as the files are chunked


def make(folder: Path, months: int, lat: int = 91, lon: int = 180) -> list[Path]:
    """``months`` hourly files of 2 m temperature, chunked a day at a time (as ERA5's
    netCDF downloads are), written with h5netcdf."""
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for month in range(1, months + 1):
        time_ = pd.date_range(f"2010-{month:02d}-01", periods=24 * 28, freq="h")
        values = 280 + 10 * np.random.default_rng(month).standard_normal((time_.size, lat, lon)).astype("f4")
        ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), values, {"units": "K"})},
                        coords={"time": time_, "latitude": np.linspace(90, -90, lat), "longitude": np.linspace(0, 358, lon)})
        out.append(folder / f"2010-{month:02d}.nc")
        ds.to_netcdf(out[-1], engine="h5netcdf", encoding={"t2m": {"chunksizes": (24, lat, lon), "zlib": True}})
    return out


def analysis(datasets: list[xr.Dataset]) -> tuple[int, int]:
    """The point through the months, then the first month's map: the values loaded."""
    ds = xr.combine_by_coords(datasets) if len(datasets) > 1 else datasets[0]
    t2m = ds["t2m"]
    point = t2m.isel(latitude=t2m.latitude.size // 2, longitude=t2m.longitude.size // 3).load()
    first_map = datasets[0]["t2m"].isel(time=0).load()
    return point.size, first_map.size


def main(paths: list[str]) -> tuple[int, int]:
    return analysis([xr.open_dataset(p, engine="h5netcdf", chunks=CHUNKS) for p in paths])


def through_layoutkit(paths: list[str], latency: float, page_buffer: int = 64 << 20) -> tuple[int, float]:
    """The same analysis of any layout, each through ``layoutkit.open`` with ``latency``
    seconds a request simulated, read by xarray's ``layoutkit`` engine: the requests made
    and the seconds from opening to the last value (imports left out)."""
    import layoutkit
    from layoutkit.storage.counting import LatencyModel

    start = time.perf_counter()
    archives = [layoutkit.open(p, model=LatencyModel(latency), page_buffer=page_buffer) for p in paths]
    try:
        analysis([xr.open_dataset(a, engine="layoutkit", chunks=CHUNKS) for a in archives])
        return sum(a.counter.requests for a in archives), time.perf_counter() - start
    finally:
        for a in archives:
            a.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--make", type=int, default=0, help="Write this many monthly files into the one folder given.")
    parser.add_argument("--latency", type=float, default=None, help="Seconds a request (read through layoutkit.open).")
    args = parser.parse_args()
    if args.make:
        print(" ".join(str(p) for p in make(Path(args.paths[0]), args.make)))
    elif args.latency is None:
        print("loaded %d points and a map of %d" % main(args.paths))
    else:
        requests, seconds = through_layoutkit(args.paths, args.latency)
        print(f"{requests} requests, {seconds:.3f} s")
