"""Three signals of every shot: the analysis a shot archive's users run most, written
as they write it (h5py, shot after shot), to be traced, not changed:

    layoutkit sample shots.h5 --shots 20 --signals 30
    layoutkit trace --out workload.json -- python examples/three_signals.py shots.h5
    layoutkit verify shots.h5 signal-major.zarr by-signal.h5 --workload workload.json --latency 10ms

``layoutkit trace`` records what it reads; ``verify --workload`` makes the same reads on
each layout (docs/commands/trace.md shows the result).
"""

import sys

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


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "shots.h5")
