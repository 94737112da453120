"""Every command against a misbehaving bucket (issue 41): a fault on some requests is
retried and the result is right; a fault on every request is one sentence, exit 2, and
nothing is published.

The bucket is the test S3 endpoint (moto, on loopback) behind
:class:`layoutkit.testing.faults.FaultyBucket`, which answers 500, 503 SlowDown, resets the
connection, stalls, cuts the body short or sends a wrong ETag on the requests chosen.
Results are checked against the endpoint directly, not through the proxy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
from typer.testing import CliRunner

import layoutkit
from layoutkit.cli import app
from layoutkit.errors import LayoutkitError
from layoutkit.sample import write_sample
from layoutkit.storage.retry import RETRIES
from layoutkit.testing import S3Endpoint
from layoutkit.testing.faults import FAULTS, FaultyBucket, every, nth
from layoutkit.verify.equality import compare_variant

BUCKET = "faulty"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}
runner = CliRunner()


@pytest.fixture(scope="module")
def bucket(tmp_path_factory) -> dict[str, Any]:
    """The endpoint, a sample source in it (and here), and a Zarr store made from it."""
    work = tmp_path_factory.mktemp("faulty")
    local = Path(write_sample(work / "in.h5", shots=3, signals=3, seed=4).path)
    with S3Endpoint(buckets=(BUCKET,)) as server:
        s3 = boto3.client("s3", endpoint_url=server.url, aws_access_key_id="test", aws_secret_access_key="test",
                          region_name="us-east-1")
        s3.upload_file(str(local), BUCKET, "in.h5")
        opts = {"endpoint_url": server.url, "access_key_id": "test", "secret_access_key": "test",
                "region": "us-east-1"}
        made = runner.invoke(app, ["--quiet", "convert", str(local), f"s3://{BUCKET}/in.zarr", "--storage-option",
                                   f"endpoint_url={server.url}"], env=CREDENTIALS)
        assert made.exit_code == 0, made.output
        yield {"endpoint": server.url, "local": local, "s3": s3, "opts": opts}


def keys(bucket: dict[str, Any], prefix: str) -> list[str]:
    pages = bucket["s3"].get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def run(proxy: FaultyBucket, *args: str | Path):  # noqa: ANN201 - click Result
    return runner.invoke(app, ["--quiet", *map(str, args), "--storage-option", f"endpoint_url={proxy.url}",
                               "--storage-option", "timeout=1s"], env=CREDENTIALS)


def read_signal(url: str, opts: dict[str, str]) -> list[np.ndarray]:
    with layoutkit.open(url, storage_options=opts) as archive:
        signal = archive.signals[0]
        return [archive.read(shot, signal).values for shot in archive.shots]


# what each command does against the bucket, and how its result is checked (against the endpoint itself)
def _convert(proxy: FaultyBucket, bucket: dict[str, Any], tmp: Path, name: str) -> Any:
    dst = f"s3://{BUCKET}/{name}.zarr"
    result = run(proxy, "convert", f"s3://{BUCKET}/in.h5", dst)
    if result.exit_code == 0:
        assert compare_variant(bucket["local"], dst, storage_options=bucket["opts"]) == []
    return result, f"{name}.zarr/"


def _reorder(proxy: FaultyBucket, bucket: dict[str, Any], tmp: Path, name: str) -> Any:
    dst = f"s3://{BUCKET}/{name}.h5"
    result = run(proxy, "reorder", f"s3://{BUCKET}/in.h5", dst, "--tmpdir", tmp)
    if result.exit_code == 0:
        assert compare_variant(bucket["local"], dst, storage_options=bucket["opts"]) == []
    return result, f"{name}.h5"


def _verify(proxy: FaultyBucket, bucket: dict[str, Any], tmp: Path, name: str) -> Any:
    result = run(proxy, "verify", f"s3://{BUCKET}/in.h5", f"s3://{BUCKET}/in.zarr", "--repeat", "1", "--sample", "2",
                 "--patterns", "open,shot")
    if result.exit_code == 0:
        assert "the 1 variant holds exactly the data of in.h5" in " ".join(result.output.split())
    return result, None


def _inspect(proxy: FaultyBucket, bucket: dict[str, Any], tmp: Path, name: str) -> Any:
    expected = json.loads(runner.invoke(app, ["inspect", str(bucket["local"]), "--json"]).stdout)["arrays"]
    RETRIES.reset()  # (that run's count is not this one's)
    result = run(proxy, "inspect", f"s3://{BUCKET}/in.h5", "--json")
    if result.exit_code == 0:
        assert json.loads(result.stdout)["arrays"] == expected
    return result, None


def _advise(proxy: FaultyBucket, bucket: dict[str, Any], tmp: Path, name: str) -> Any:
    out = tmp / "advice"
    result = run(proxy, "advise", f"s3://{BUCKET}/in.h5", "--out", out, "--sample-shots", "2", "--candidates",
                 "zarr-shot")
    if result.exit_code == 0:
        assert list(out.glob("*.toml"))
    else:
        assert not out.exists()
    return result, None


def _open(proxy: FaultyBucket, bucket: dict[str, Any], tmp: Path, name: str) -> Any:
    opts = {**bucket["opts"], "endpoint_url": proxy.url, "timeout": "1s"}
    expected = read_signal(f"s3://{BUCKET}/in.zarr", bucket["opts"])
    try:
        got = read_signal(f"s3://{BUCKET}/in.zarr", opts)
    except LayoutkitError as exc:
        return _Failed(str(exc)), None
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_array_equal(a, b)
    return _Failed(None), None


class _Failed:
    """layoutkit.open's outcome, as a CLI result reads."""

    def __init__(self, message: str | None) -> None:
        self.exit_code = 0 if message is None else 2
        self.output = "" if message is None else f"error: {message}"
        self.exception = None


COMMANDS = {"convert": _convert, "reorder": _reorder, "verify": _verify, "inspect": _inspect, "advise": _advise,
            "open": _open}


def some_requests(fault: str):  # noqa: ANN201 - the proxy's choice of requests
    """Two of the requests, after the first few (the store's root, the source's head); a
    body is cut short only in a GET (a HEAD has none)."""
    return nth(2, 4, method="GET") if fault == "truncate" else (lambda n, method, path: n in (3, 6))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_fault_on_some_requests_is_retried_and_the_result_is_right(bucket, tmp_path, command, fault):
    """Each fault layoutkit retries is counted, and the command says how many (a wrong
    ETag is no failure: nothing to retry, and the result is still right)."""
    name = f"some-{command}-{fault}"
    RETRIES.reset()
    with FaultyBucket(bucket["endpoint"], fault, some_requests(fault), stall=2.0) as proxy:
        result, _ = COMMANDS[command](proxy, bucket, tmp_path, name)
    assert proxy.injected, "no fault was injected"
    assert result.exit_code == 0, (result.output[-2000:], result.exception)
    assert "Traceback" not in result.output
    retried = RETRIES.snapshot()
    n = sum(retried.values())
    # every fault retried (a request slowed past the timeout on a loaded machine is one more)
    assert n >= (0 if fault == "etag" else len(proxy.injected)), (retried, proxy.injected)
    if fault in ("500", "503"):  # and these exactly: nothing else answers with them ("503 SlowDown", or a HEAD's "503")
        assert sum(k for cause, k in retried.items() if cause.startswith(fault)) == len(proxy.injected), retried
    said = " ".join(result.output.split())
    if n and command != "open":
        assert f"note: {n} request{'s' if n > 1 else ''} to the object store {'were' if n > 1 else 'was'} retried" \
            in said, said


@pytest.mark.timeout(180)
# (an endpoint that stalls on every request: every command, in test_object_storage.py)
@pytest.mark.parametrize("fault", [f for f in FAULTS if f not in ("etag", "stall")])
@pytest.mark.parametrize("command", ["convert", "reorder", "open"])
def test_a_fault_on_every_request_is_one_sentence_and_nothing_is_published(bucket, tmp_path, command, fault):
    name = f"every-{command}-{fault}"
    with FaultyBucket(bucket["endpoint"], fault, every(4), stall=2.0) as proxy:
        result, published = COMMANDS[command](proxy, bucket, tmp_path, name)
    text = " ".join(result.output.split())
    assert result.exit_code == 2, (result.exit_code, result.output[-2000:], result.exception)
    assert text.startswith("error:") and text.count("error:") == 1 and "Traceback" not in result.output, text
    if published is not None:
        assert keys(bucket, published) == []  # nothing under the destination
    assert list(tmp_path.iterdir()) == []  # nor a staged file here


@pytest.mark.parametrize("variant", ["zarr", "h5"])
def test_a_corrupted_object_in_a_bucket_variant_is_found_by_verify(bucket, tmp_path, variant):
    """One object of a variant in the bucket changed behind layoutkit's back (a chunk of
    the Zarr store; bytes in the middle of the paged file): verify says which dataset
    differs, or cannot be read, and exits 1."""
    local, s3 = bucket["local"], bucket["s3"]
    name = f"corrupt.{variant}"
    made = runner.invoke(app, ["--quiet", "convert" if variant == "zarr" else "reorder", str(local),
                               f"s3://{BUCKET}/{name}", "--storage-option", f"endpoint_url={bucket['endpoint']}",
                               *(["--compressor", "none"] if variant == "h5" else [])], env=CREDENTIALS)
    assert made.exit_code == 0, made.output
    if variant == "zarr":
        key = next(k for k in keys(bucket, name) if "/signals/" in k and "/c/" in k)
        body = bytearray(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        body[len(body) // 2] ^= 0xFF
        s3.put_object(Bucket=BUCKET, Key=key, Body=bytes(body))
        dataset = "/" + key.removeprefix(f"{name}/").split("/c/")[0]
    else:
        import h5py

        data = bytearray(s3.get_object(Bucket=BUCKET, Key=name)["Body"].read())
        copy = tmp_path / "copy.h5"
        copy.write_bytes(bytes(data))
        with h5py.File(copy) as f:  # the largest signal, and where its (first chunk's) bytes are
            ds = max((f[f"shots/{s}/signals/{g}"] for s in f["shots"] for g in f[f"shots/{s}/signals"]),
                     key=lambda d: d.size)
            dataset = ds.name
            offset = ds.id.get_offset() if ds.chunks is None else ds.id.get_chunk_info(0).byte_offset
        data[offset + 4] ^= 0xFF
        s3.put_object(Bucket=BUCKET, Key=name, Body=bytes(data))
    result = runner.invoke(app, ["verify", str(local), f"s3://{BUCKET}/{name}", "--repeat", "1", "--patterns", "open",
                                 "--storage-option", f"endpoint_url={bucket['endpoint']}"], env=CREDENTIALS)
    assert result.exit_code == 1, result.output[-2000:]
    assert f"{dataset}:" in result.output and "Traceback" not in result.output
