"""Buckets through obstore: URLs, ``--storage-option``, stores, and what a store's errors mean.

obstore (the Rust object_store crate behind zarr's ``ObjectStore``) speaks S3, GCS and
Azure with one API, reads credentials from the usual environment variables, and does
ranged, concurrent and multipart requests itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from layoutkit.storage.retry import retrying

METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})
UPLOAD_THREADS = 8
MAX_IN_FLIGHT = 128
"""At most this many GETs in flight at once, per Zarr store (its counting store) and per
HDF5 range read. One signal of 10,000 shots of a shot-major store is 20,000 objects:
sent all at once from a bucket, they opened 20,000 connections and failed with "Too
many open files" (a desktop's limit is 1,024 descriptors). At 10 ms per request, 128 in
flight still move 12,800 objects a second."""
COALESCE_GAP = 1024**2
"""Byte ranges of a bucket source closer than this are fetched by one GET (the gap is
read and thrown away): a round trip costs more than a MiB at object-store bandwidths.
``--storage-option coalesce_gap=SIZE`` changes it (0: never merge)."""
COALESCE_MAX = 16 * 1024**2
"""A merged GET grows to at most this many bytes (``--storage-option coalesce_max=SIZE``),
so several GETs still run in parallel."""
READ_KEYS = frozenset({"coalesce_gap", "coalesce_max"})  # layoutkit's own read settings, not obstore's
_ALIASES = {  # fsspec/boto3 spellings people know -> obstore's S3 configuration keys
    "endpoint_url": "endpoint",
    "key": "access_key_id",
    "secret": "secret_access_key",
    "aws_access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "region_name": "region",
    "anonymous": "skip_signature",
}
_CLIENT_KEYS = frozenset({"allow_http", "timeout", "connect_timeout"})


def parse_storage_options(items: list[str] | tuple[str, ...] | None) -> dict[str, str]:
    """``KEY=VALUE`` texts (``--storage-option``) as a dict.

    Raises
    ------
    InvalidOptionError
        An item without ``=``.
    """
    from layoutkit.errors import InvalidOptionError

    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"Expected --storage-option KEY=VALUE, e.g. endpoint_url=http://127.0.0.1:9000. Got {item!r}.")
        out[key.strip()] = value.strip()
    return out


def is_url(text: str | os.PathLike) -> bool:
    """Whether ``text`` names a location that is not a local path: an object store
    (``s3://``, ``gs://``, ``az://``...) or an Icechunk repository (``icechunk:...``)."""
    return isinstance(text, str) and ("://" in text and not text.startswith("file://") or text.startswith("icechunk:"))


def object_store(url: str, storage_options: dict[str, str]) -> tuple[Any, str]:
    """An obstore store for the bucket of ``url`` and the key ``url`` names inside it.

    obstore (the Rust object_store crate behind zarr's ``ObjectStore``) speaks S3, GCS and
    Azure with one API, reads credentials from the usual environment variables, and does
    ranged and multipart requests itself. Aliases such as ``endpoint_url`` are accepted;
    an ``http://`` endpoint (a local test server) is allowed.
    """
    scheme, _, rest = url.partition("://")
    bucket, _, key = rest.partition("/")
    return store_at(f"{scheme}://{bucket}", storage_options, named=url), key.strip("/")


def store_at(url: str, storage_options: dict[str, str], named: str | None = None) -> Any:
    """An obstore store rooted at ``url`` (a bucket, or a prefix inside one): keys are
    relative to it, as zarr's ``ObjectStore`` wants for a store in a bucket.

    Stores are kept and handed out again for the same URL, options and credentials in the
    environment, as fsspec keeps its filesystems: setting one up takes 5 ms (its HTTP
    client), and a kept one has its connections open already (a TLS handshake to a real
    endpoint is several round trips). obstore's stores are safe to share between threads.

    Raises
    ------
    InvalidOptionError
        When obstore cannot set the store up (an unknown key, a value it cannot parse),
        naming ``named`` (the URL the user gave; default ``url``).
    """
    environment = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(_CREDENTIAL_ENVIRONMENT)))
    key = (url.rstrip("/"), tuple(sorted(storage_options.items())), environment)
    make: Callable[..., Any] = _kept_store
    try:
        hash(key)
    except TypeError:  # an option's value is not a plain value: a store of its own
        make = _kept_store.__wrapped__
    try:
        return make(*key)
    except Exception as exc:  # an unknown key, a value it cannot parse, a scheme it does not know: no request yet
        from layoutkit.errors import InvalidOptionError

        said = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")
        raise InvalidOptionError(
            f"{named or url}: the store cannot be set up with these --storage-option values ({said[:200]})."
        ) from None


# what obstore reads from the environment: a change there is a new store
_CREDENTIAL_ENVIRONMENT = ("AWS_", "GOOGLE_", "AZURE_", "OBJECT_STORE_")


@lru_cache(maxsize=32)
def _kept_store(url: str, options: tuple[tuple[str, str], ...], environment: tuple[tuple[str, str], ...]) -> Any:
    """The store :func:`store_at` sets up (``environment`` is only part of the key)."""
    storage_options = dict(options)
    from datetime import timedelta

    from obstore.store import from_url

    config: dict[str, Any] = {}
    # a request that stalls is retried: its timeout is below the retries' window (a GET to
    # moto, and one to SeaweedFS through the benchmark's proxy, each once got no answer at
    # all; with 120 s per request and 30 s of retries, the whole run failed after 120 s)
    client: dict[str, Any] = {"connect_timeout": "10s", "timeout": "30s"}
    for k, v in storage_options.items():
        if k in READ_KEYS:
            continue
        k = _ALIASES.get(k, k)
        if k in _CLIENT_KEYS:
            client[k] = v.lower() == "true" if k == "allow_http" else v
        elif k == "skip_signature":
            config[k] = v.lower() in ("1", "true", "yes")
        else:
            config[k] = v
    if str(config.get("endpoint", "")).startswith("http://"):
        client.setdefault("allow_http", True)
    # layoutkit retries, and counts what it retries (layoutkit.storage.retry): obstore's own retries are off
    retry = {"max_retries": 0, "retry_timeout": timedelta(seconds=90), "backoff": {}}
    # the URL's scheme picks from_url's overload (S3, GCS, Azure...), and so which keys the config
    # may hold: obstore checks them when the store is set up (an unknown key is one sentence, above)
    set_up: Callable[..., Any] = from_url
    return set_up(url, config=config or None, client_options=client, retry_config=retry)


# a forked child sets up its own stores: its parent's clients (their runtime's threads and
# open connections) are not the child's to use
os.register_at_fork(after_in_child=_kept_store.cache_clear)


def describe_store_error(url: str, exc: BaseException) -> str:
    """One sentence for what an object store answered.

    A request that failed without an answer is told by what the HTTP client saw (obstore
    writes its error chain into the text: ``HttpError { kind: Timeout | Connect | ... }``
    and the operating system's message): a request that got no answer in time, an
    endpoint that refused the connection, or one that closed it mid-request are three
    different faults for the user to look into.
    """
    from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

    text = str(exc)
    if "NoSuchBucket" in text:
        return f"{url}: the bucket does not exist."
    # the status as a status, not any "403" in the text: a port such as :40317 in the URL
    # once made a server that never answered read as "access denied"
    forbidden = re.search(r"\b403 Forbidden\b|status(?: code)?[:= ]+403\b", text, re.IGNORECASE)
    if isinstance(exc, (PermissionDeniedError, UnauthenticatedError)) or "AccessDenied" in text or forbidden:
        return f"{url}: access denied (check the credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or --storage-option)."
    first = (text.strip().splitlines() or [type(exc).__name__])[0]
    retried = re.search(r"in [0-9.]+m?s, after (\d+) retries", text)
    said = _retried_cause(url, exc)
    if said:
        return said
    status = re.search(r"non-2xx status code: (5\d\d) ([A-Za-z ]+)", text)
    if status is not None:  # a server error on every try (S3 says which in its XML: SlowDown, InternalError)
        code = re.search(r"<Code>(\w+)</Code>", text)
        tries = f" on every one of {int(retried.group(1)) + 1} tries" if retried else ""
        return (f"{url}: the object store answered {status.group(1)} {status.group(2).strip()}"
                f"{f' ({code.group(1)})' if code else ''}{tries}; try again later.")
    kind = re.search(r"HttpError \{\s*kind: (\w+)", text)
    said = _innermost_cause(text)
    if kind is not None and kind.group(1) == "Connect" or said in _REFUSED:
        return f"{url}: the endpoint cannot be reached ({said or first[:160]})."
    if kind is not None and kind.group(1) == "Timeout" or retried and kind is None and not re.search(r"\b[45]\d\d\b", text):
        return (f"{url}: the endpoint did not answer in time, even after retries (--storage-option timeout=... "
                "sets the limit per request; 30s by default).")
    if "IncompleteBody" in text:  # obstore retries a body cut short; this one was cut short on every try
        return (f"{url}: the endpoint's answers ended before the length they announced (a body cut short), on "
                "every try; try again later.")
    if kind is not None:  # an answer cut off, a body that could not be read...
        again = f" after {retried.group(1)} retries" if retried else ""
        return f"{url}: the request to the endpoint failed{again} ({said or kind.group(1)})."
    if "onnect" in text or "timed out" in text.lower() or "dns" in text.lower():
        return f"{url}: the endpoint cannot be reached ({first[:160]})."
    return f"{url}: the object store refused the request ({first[:200]})."


def _retried_cause(url: str, exc: BaseException) -> str:
    """The sentence for a request layoutkit tried again and again
    (:class:`~layoutkit.storage.retry.RetriesExhaustedError`) by what failed it, or ''
    (server errors and answers cut short: told below by the status and the body)."""
    from layoutkit.storage.retry import RetriesExhaustedError, transient

    if not isinstance(exc, RetriesExhaustedError):
        return ""
    cause, tries = transient(exc.last), exc.retries + 1
    if cause == "no answer in time":
        return (f"{url}: the endpoint did not answer in time, on every one of {tries} tries (--storage-option "
                "timeout=... sets the limit per request; 30s by default).")
    if cause == "connection reset":
        return f"{url}: the endpoint closed or reset the connection on every one of {tries} tries; try again later."
    if cause == "request not sent":
        said = _innermost_cause(str(exc.last)) or str(exc.last).splitlines()[0][:160]
        if said in _REFUSED:
            return f"{url}: the endpoint cannot be reached ({said}), on every one of {tries} tries."
        return f"{url}: the request could not be sent on every one of {tries} tries ({said})."
    return ""


_REFUSED = frozenset({"Connection refused", "Network is unreachable", "No route to host",
                      "Cannot assign requested address"})


def _innermost_cause(text: str) -> str:
    """The deepest cause obstore's error chain names: the operating system's message
    (``message: "Connection refused"``) or hyper's error kind (``IncompleteMessage``),
    else ''."""
    said = re.findall(r'message: "([^"]+)"', text)
    if said:
        return said[-1]
    hyper = re.findall(r"hyper::Error\(\s*(\w+)", text)
    if hyper:
        return {"IncompleteMessage": "the connection closed before the answer was complete"}.get(hyper[-1], hyper[-1])
    return ""


def store_error(url: str, exc: BaseException) -> Exception:
    """The one-sentence error for what a store answered to a write."""
    from layoutkit.errors import OutputNotWritableError

    return OutputNotWritableError(describe_store_error(url, exc))


def list_keys(store: Any, prefix: str) -> list[tuple[str, int]]:
    """``(key, size)`` of every object at ``prefix`` or under ``prefix/`` (all of the
    store when ``prefix`` is empty)."""
    import obstore

    found = []
    listed = retrying(lambda: [m for batch in obstore.list(store, prefix=prefix or None, chunk_size=1000)
                               for m in batch])
    for meta in listed:
        path = meta["path"]
        if not prefix or path == prefix or path.startswith(prefix + "/"):
            found.append((path, int(meta["size"])))
    return found


def delete_keys(store: Any, keys: list[str]) -> None:
    """Delete objects, metadata documents first (a reader stops finding the store before
    its chunks go), many per request."""
    import obstore

    first = [k for k in keys if k.rsplit("/", 1)[-1] in METADATA_NAMES]
    rest = [k for k in keys if k.rsplit("/", 1)[-1] not in METADATA_NAMES]
    for group in (sorted(first, key=lambda k: k.count("/")), rest):
        for i in range(0, len(group), 1000):
            retrying(lambda: obstore.delete(store, group[i : i + 1000]))  # noqa: B023 - called at once


def coalesce(ranges: list[tuple[int, int]], gap: int = COALESCE_GAP, limit: int = COALESCE_MAX,
             window: int = 0) -> list[tuple[int, int]]:
    """Merge ``(offset, size)`` ranges whose gap is at most ``gap``, or that start in the
    ``window``-aligned span of bytes the last one ends in (when ``window``), into requests
    of at most ``limit`` bytes (a range larger than ``limit`` stays whole); sorted, no
    overlap. With ``window`` the GETs are at most as many as a reader of whole blocks of
    ``window`` bytes would make for the same ranges."""
    merged: list[list[int]] = []
    for offset, size in sorted(ranges):
        end = offset + size
        near = merged and (offset - merged[-1][1] <= gap or window and offset // window == (merged[-1][1] - 1) // window)
        if near and max(end, merged[-1][1]) - merged[-1][0] <= limit:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([offset, end])
    return [(a, b - a) for a, b in merged]


__all__ = ["COALESCE_GAP", "COALESCE_MAX", "METADATA_NAMES", "READ_KEYS", "UPLOAD_THREADS", "coalesce", "delete_keys",
           "describe_store_error", "is_url", "list_keys", "object_store", "parse_storage_options",
           "store_at", "store_error"]
