"""Helpers shared by the benchmarks: a sample archive, timed child processes, sizes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from layoutkit.storage import disk_usage as du

HERE = Path(__file__).resolve().parent
PY = sys.executable


def parse_args(doc: str, extra=None):  # noqa: ANN001, ANN201 - argparse.Namespace
    """The options every benchmark takes: sample size, working folder, workers."""
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shots", type=int, default=250)
    parser.add_argument("--signals", type=int, default=70)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/layoutkit-bench"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate-factor", type=int, default=1,
                        help="layoutkit sample --rate-factor: 10 gives signals of about 1-10 MB")
    if extra is not None:
        extra(parser)
    args = parser.parse_args()
    compile_layoutkit()
    return args


def compile_layoutkit() -> None:
    """Byte-compile layoutkit, as an installed copy is: an editable checkout run where
    PYTHONDONTWRITEBYTECODE is set (this project's machines) compiles its modules again
    in every process the benchmark times (0.1 s each, and a large convert runs three)."""
    import compileall

    import layoutkit

    compileall.compile_dir(Path(layoutkit.__file__).parent, quiet=1)


def sample(work: Path, shots: int, signals: int, rate_factor: int = 1) -> tuple[Path, int]:
    """The sample archive (written once per size), read once so that every method
    starts with it in the page cache; returns its path and logical bytes."""
    from layoutkit.sample import estimate_logical_bytes

    work.mkdir(parents=True, exist_ok=True)
    src = work / f"sample-{shots}x{signals}{suffix(rate_factor)}.h5"
    if not src.exists():
        print(f"writing {src} ...", flush=True)
        subprocess.run([PY, "-m", "layoutkit", "-q", "sample", str(src), "--shots", str(shots),
                        "--signals", str(signals), "--rate-factor", str(rate_factor)], check=True)
    with open(src, "rb") as fh:
        while fh.read(64 << 20):
            pass
    return src, estimate_logical_bytes(shots, signals, rate_factor=rate_factor)


def ref_tree(work: Path, ref: str) -> tuple[str, Path]:
    """An earlier commit checked out in a git worktree under ``work`` (once), for A/B
    runs: its short hash and the tree, whose layoutkit comes first with PYTHONPATH."""
    root = HERE.parent
    short = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", ref], capture_output=True, text=True,
                           check=True).stdout.strip()
    tree = work / f"layoutkit-{short}"
    if not tree.exists():
        subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(tree), short], check=True)
    return short, tree


def suffix(rate_factor: int) -> str:
    """What a sample's file name and a benchmark's output names carry for its rate factor."""
    return f"-r{rate_factor}" if rate_factor != 1 else ""


def measure(cmd: list[str], target: Path, logical: int) -> dict:
    """Run ``cmd`` in a fresh process (after removing ``target``); wall time, peak RSS
    of its process tree, output size and MB/s of logical data."""
    if target.is_dir():
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    result = timed(cmd)
    result["out_bytes"] = du(target)
    result["mb_per_s"] = logical / result["seconds"] / 1e6
    return result


def timed(cmd: list[str]) -> dict:
    """Run ``cmd`` in a fresh process (benchmarks/measure.py): wall time, peak RSS of its
    process tree, and layoutkit's ``--timings`` lines when it printed them. A failed
    command ends the benchmark with its error."""
    out = subprocess.run([PY, str(HERE / "measure.py"), "--", *cmd], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["returncode"] != 0:
        raise SystemExit(f"{' '.join(map(str, cmd[:4]))} failed: {result['stderr']}")
    result["timings"] = timings_of(result.pop("stdout", ""))
    return result


LAYOUTKIT = [PY, "-m", "layoutkit", "-q", "--timings"]
"""How the benchmarks run layoutkit: quiet, but printing where its time went."""


def timings_of(stdout: str) -> list[str]:
    """The lines of layoutkit's ``--timings`` table in a run's output ([] without it)."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("where the time went"):
            return lines[i:]
    return []


def run_all(runs: dict[str, tuple[list[str], Path]], logical: int, before=None) -> dict[str, dict]:  # noqa: ANN001
    """Measure every ``method: (command, output)`` in turn, each in a fresh process
    (``before()``, untimed, before each: e.g. evict the source from the page cache)."""
    results = {}
    for method, (cmd, target) in runs.items():
        print(f"running {method} ...", flush=True)
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        if before is not None:
            before()
        results[method] = measure(cmd, target, logical)
    return results


def print_timings(results: dict[str, dict]) -> None:
    """Where each layoutkit run's time went, by step and kind of work (``--timings``)."""
    for method, r in results.items():
        if r.get("timings"):
            print(f"\n{method}: " + "\n".join(r["timings"]))


def report(title: str, results: dict[str, dict], reference: str, logical: int, name: str) -> None:
    """Print a markdown table (ratios against ``reference``), write JSON and a PNG."""
    base = results[reference]
    print(f"\n{title}\n")
    print(f"| method | seconds | MB/s | stored MB/s | speed vs {reference} | peak RSS | output |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for method, r in results.items():
        print(f"| {method} | {r['seconds']:.1f} | {r['mb_per_s']:.0f} | {r['out_bytes'] / r['seconds'] / 1e6:.0f} | "
              f"{base['seconds'] / r['seconds']:.2f}x | {r['peak_rss'] / 2**20:.0f} MiB | {r['out_bytes'] / 1e6:.0f} MB |")
    print_timings(results)
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps({"title": title, "logical_bytes": logical, "results": results}, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.2))
    methods = list(results)
    ax1.barh(methods, [results[m]["mb_per_s"] for m in methods], color="tab:blue")
    ax1.set_xlabel("MB/s of logical data (higher is better)")
    ax2.barh(methods, [results[m]["peak_rss"] / 2**20 for m in methods], color="tab:orange")
    ax2.set_xlabel("peak RSS, MiB")
    ax2.set_yticks([])
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=120)
    print(f"\nwrote {out / (name + '.json')} and {out / (name + '.png')}")
