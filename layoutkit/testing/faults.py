"""A misbehaving bucket, for the tests and the benchmarks: an HTTP proxy on loopback in
front of a test S3 endpoint that, on chosen requests, answers as real object stores
sometimes do (issue 41).

Faults (:data:`FAULTS`):

- ``500``: ``500 InternalError``, the request not passed on;
- ``503``: ``503 SlowDown`` (S3's "reduce your request rate"), not passed on;
- ``reset``: the connection reset (RST) without an answer;
- ``stall``: no answer for ``stall`` seconds, then the connection closed;
- ``truncate``: the endpoint's answer with its full ``Content-Length`` but half the body,
  then the connection closed;
- ``etag``: the endpoint's answer with a wrong ``ETag``.

``when(n, method, path)`` chooses the requests (``n`` counts from 1 in arrival order);
:func:`nth` and :func:`every` are the usual choices. Every request is recorded, and
every fault injected.
"""

from __future__ import annotations

import http.client
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

FAULTS = ("500", "503", "reset", "stall", "truncate", "etag")

_ERRORS = {
    "500": (500, "Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
    "503": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
}


def _counted(method: str | None, chosen: Callable[[int], bool]) -> Callable[[int, str, str], bool]:
    """A choice of requests by their count (of ``method`` only, counted among those, when given)."""
    seen = [0]
    lock = threading.Lock()

    def when(n: int, m: str, path: str) -> bool:
        if method is not None and m != method:
            return False
        with lock:
            seen[0] += 1
            return chosen(seen[0])

    return when


def nth(*which: int, method: str | None = None) -> Callable[[int, str, str], bool]:
    """The requests numbered ``which`` (of ``method`` only, counted among those, when given)."""
    return _counted(method, lambda k: k in which)


def every(start: int = 1, method: str | None = None) -> Callable[[int, str, str], bool]:
    """Every request from the ``start``-th on (of ``method`` only, when given)."""
    return _counted(method, lambda k: k >= start)


class FaultyBucket:
    """The proxy (a context manager): ``url`` is its endpoint."""

    def __init__(self, endpoint: str, fault: str, when: Callable[[int, str, str], bool], stall: float = 3.0) -> None:
        assert fault in FAULTS, fault
        target = urlparse(endpoint)
        self.backend = (target.hostname or "127.0.0.1", target.port)
        self.fault, self.when, self.stall = fault, when, stall
        self.requests: list[tuple[str, str]] = []
        self.injected: list[tuple[int, str, str]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.connection, self.rfile)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FaultyBucket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- one client connection: requests one after another (keep-alive) --------------------

    def _serve(self, conn: socket.socket, rfile: Any) -> None:
        backend = http.client.HTTPConnection(*self.backend, timeout=60)
        try:
            while True:
                request = _read_request(rfile)
                if request is None:
                    return
                method, path, headers, body = request
                with self._lock:
                    self.requests.append((method, path))
                    n = len(self.requests)
                    # (a HEAD has no body to cut short)
                    faulty = self.when(n, method, path) and not (self.fault == "truncate" and method == "HEAD")
                    if faulty:
                        self.injected.append((n, method, path))
                if faulty and self.fault in _ERRORS:
                    conn.sendall(_error(*_ERRORS[self.fault]))
                    continue
                if faulty and self.fault == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                if faulty and self.fault == "stall":
                    time.sleep(self.stall)
                    return
                status, reason, answer, data = _forward(backend, method, path, headers, body)
                if faulty and self.fault == "etag":
                    answer = [(k, '"00000000000000000000000000000bad"' if k.lower() == "etag" else v)
                              for k, v in answer]
                head = _head(status, reason, answer, len(data))
                if faulty and self.fault == "truncate" and len(data) > 1:
                    conn.sendall(head + data[: len(data) // 2])
                    return
                conn.sendall(head + (b"" if method == "HEAD" else data))
        except OSError:
            return
        finally:
            backend.close()


def _read_request(rfile: Any) -> tuple[str, str, list[tuple[str, str]], bytes] | None:
    line = rfile.readline(65537)
    if not line.strip():
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: list[tuple[str, str]] = []
    while (h := rfile.readline(65537)) not in (b"\r\n", b"\n", b""):
        k, v = h.decode("latin-1").split(":", 1)
        headers.append((k.strip(), v.strip()))
    lower = {k.lower(): v for k, v in headers}
    if lower.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while (size := int(rfile.readline().split(b";")[0], 16)) > 0:
            body += rfile.read(size)
            rfile.readline()
        rfile.readline()
        headers = [(k, v) for k, v in headers if k.lower() != "transfer-encoding"] + [("Content-Length", str(len(body)))]
    else:
        body = rfile.read(int(lower.get("content-length", "0") or 0))
    return method, path, headers, body


def _forward(backend: http.client.HTTPConnection, method: str, path: str, headers: list[tuple[str, str]],
             body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
    backend.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for k, v in headers:
        backend.putheader(k, v)
    backend.endheaders(body or None)
    response = backend.getresponse()
    data = response.read()
    answer = [(k, v) for k, v in response.getheaders() if k.lower() not in ("transfer-encoding", "content-length",
                                                                               "connection")]
    if method == "HEAD":  # its Content-Length is the object's, not of a body
        answer += [(k, v) for k, v in response.getheaders() if k.lower() == "content-length"]
    return response.status, response.reason, answer, data


def _head(status: int, reason: str, headers: list[tuple[str, str]], length: int) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
    if not any(k.lower() == "content-length" for k, _ in headers):
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _error(status: int, reason: str, code: str, message: str) -> bytes:
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<RequestId>layoutkit-test</RequestId></Error>").encode()
    return _head(status, reason, [("Content-Type", "application/xml")], len(body)) + body


__all__ = ["FAULTS", "FaultyBucket", "every", "nth"]
