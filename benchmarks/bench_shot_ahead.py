"""Shot reads from a bucket, with and without fetching the next shots ahead (iter_shots): an A/B in one run.

    python benchmarks/bench_shot_ahead.py [--shots 100] [--repeat 7] [--latency 10ms]

Needs the ``bench`` extra (SeaweedFS). The sample and its shot-packed copy (written
locally) are uploaded to SeaweedFS on 127.0.0.1, behind the proxy that adds the latency
to every request (layoutkit/testing/s3.py). Each cell reads the same K=8 random shots as
verify's ``shot`` pattern does, opening included, with 1 and 2 thread workers: the
source HDF5 (layoutkit's ranged reader), shot-packed Zarr with ``iter_shots`` fetching
ahead, and the same with fetching ahead switched off. Cells alternate, ``--repeat``
rounds after one warm-up round; it prints the median and every run, the CPU seconds of
this process and of the server and proxy, and the ratios against the source.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import PY, parse_args, sample

from layoutkit.testing.s3 import DelayProxy, SeaweedFS, storage_options

BUCKET = "bench"


def extra(parser) -> None:  # noqa: ANN001
    parser.set_defaults(shots=100)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--latency", default="10ms")
    parser.add_argument("--sample-k", type=int, default=8)


def main() -> None:
    args = parse_args(__doc__, extra)
    import obstore
    import psutil
    from obstore.store import S3Store

    from layoutkit.memory import tune_allocator

    tune_allocator()  # as every layoutkit command does
    from layoutkit.archive import open_archive
    from layoutkit.options import parse_durations
    from layoutkit.readers.zarr_ import ZarrArchive
    from layoutkit.verify.patterns import run_reads, split

    src, _ = sample(args.workdir, args.shots, args.signals)
    packed = args.workdir / f"{src.stem}-shot-packed.zarr"
    if not packed.exists():
        subprocess.run([PY, "-m", "layoutkit", "-q", "convert", str(src), str(packed), "--layout", "shot-packed"],
                       check=True)
    with SeaweedFS() as server, DelayProxy(server.port) as proxy:
        server.create_bucket(BUCKET)
        store = S3Store(BUCKET, endpoint=server.endpoint, access_key_id="test", secret_access_key="test",
                        region="us-east-1", client_options={"allow_http": True})
        with open(src, "rb") as fh:
            obstore.put(store, "source.h5", fh, chunk_size=16 << 20, max_concurrency=8)
        for p in sorted(Path(packed).rglob("*")):
            if p.is_file():
                obstore.put(store, "packed.zarr/" + p.relative_to(packed).as_posix(), p.read_bytes())
        proxy.latency = parse_durations(args.latency)[0]
        opts = storage_options(proxy.endpoint)
        with open_archive(src) as archive:
            shots = random.Random(0).sample(archive.shots, args.sample_k)
        others = psutil.Process().children(recursive=True)  # the server and the proxy
        fetch_ahead = ZarrArchive._fetch_ahead

        def cell(url: str, workers: int, ahead: bool) -> tuple[float, float, float]:
            ZarrArchive._fetch_ahead = fetch_ahead if ahead else (lambda self, reads: None)

            def share(items: list[str]) -> int:
                with open_archive(url, storage_options=opts) as archive:
                    return run_reads(archive, "shot", items)

            cpu0 = sum(os.times()[:2]), sum(sum(p.cpu_times()[:2]) for p in others)
            t0 = time.perf_counter()
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(share, split(shots, workers)))
            seconds = time.perf_counter() - t0
            cpu1 = sum(os.times()[:2]), sum(sum(p.cpu_times()[:2]) for p in others)
            return seconds, cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]

        variants = [("source.h5", f"s3://{BUCKET}/source.h5", False),
                    ("shot-packed, one by one", f"s3://{BUCKET}/packed.zarr", False),
                    ("shot-packed, shots fetched ahead", f"s3://{BUCKET}/packed.zarr", True)]
        runs: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
        for round_ in range(args.repeat + 1):
            for workers in (1, 2):
                for name, url, ahead in variants:
                    got = cell(url, workers, ahead)
                    if round_:  # the first round warms the connections and the page cache
                        runs.setdefault((name, workers), []).append(got)
        ZarrArchive._fetch_ahead = fetch_ahead
    print(f"\n{args.sample_k} shots of {src.name}, {args.latency} per request, median of {args.repeat}:\n")
    print("| layout | workers | seconds | vs source | CPU s (this process / server and proxy) | every run |")
    print("|---|---:|---:|---:|---:|---|")
    for (name, workers), got in runs.items():
        median = statistics.median(s for s, _, _ in got)
        source = statistics.median(s for s, _, _ in runs[("source.h5", workers)])
        own = statistics.median(c for _, c, _ in got)
        theirs = statistics.median(c for _, _, c in got)
        print(f"| {name} | {workers} | {median:.3f} | {source / median:.1f}x | {own:.2f} / {theirs:.2f} | "
              + " ".join(f"{s:.2f}" for s, _, _ in got) + " |")


if __name__ == "__main__":
    main()
