"""Three signals of every shot: the analysis a shot archive's users run most, written
as they write it (h5py, shot after shot), to be traced, not changed:

    layoutkit sample shots.h5 --shots 20 --signals 30
    layoutkit trace --out workload.json -- python examples/three_signals.py shots.h5
    layoutkit advise shots.h5 --workload workload.json --latency 10ms
    layoutkit verify shots.h5 signal-major.zarr by-signal.h5 --workload workload.json --latency 10ms

``layoutkit trace`` records what it reads; ``advise --workload`` tries candidate layouts
on those reads and recommends one; ``verify --workload`` makes the same reads on each
layout (docs/commands/trace.md shows the results).

The same reads of any layout layoutkit writes, through ``layoutkit.open`` at a simulated
latency a request (how ``benchmarks/bench_workload.py`` runs this script against each
candidate advise tried)::

    python examples/three_signals.py by-signal.h5 --latency 10ms
"""

import argparse
import time

import h5py

SIGNALS = ("ip", "ne_bar", "te_ece_01")


def main(path: str) -> int:
    """Read each of ``SIGNALS`` of every shot; the number of signals read."""
    read = 0
    with h5py.File(path) as f:
        for shot in f["shots"]:
            for signal in SIGNALS:
                name = f"shots/{shot}/signals/{signal}"
                if name in f:
                    values = f[name][...]
                    read += 1
                    print(f"{shot} {signal}: {values.size} samples, peak {abs(values).max():.3g}")
    return read


def through_layoutkit(path: str, latency: float, page_buffer: int = 64 << 20) -> tuple[int, int, float]:
    """The same reads of any layout, through ``layoutkit.open`` with ``latency`` seconds a
    request simulated (a paged HDF5 file read through a page buffer of ``page_buffer``
    bytes, as advise measures it): the signals read, the requests made and the seconds
    from opening to the last read (imports left out)."""
    import layoutkit
    from layoutkit.storage.counting import LatencyModel

    read = 0
    start = time.perf_counter()
    with layoutkit.open(path, model=LatencyModel(latency), page_buffer=page_buffer) as archive:
        for shot in archive.shots:
            for signal in SIGNALS:
                try:
                    archive.get(f"/shots/{shot}/signals/{signal}")
                except KeyError:  # a shot without this signal
                    continue
                read += 1
        return read, archive.counter.requests, time.perf_counter() - start


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", nargs="?", default="shots.h5")
    parser.add_argument("--latency", type=float, default=None, help="Seconds a request (read through layoutkit.open).")
    args = parser.parse_args()
    if args.latency is None:
        main(args.path)
    else:
        signals, requests, seconds = through_layoutkit(args.path, args.latency)
        print(f"{signals} signals in {requests} requests, {seconds:.3f} s")
