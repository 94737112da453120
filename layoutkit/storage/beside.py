"""Documents layoutkit keeps beside an Icechunk repository's own objects (in its folder,
or under its bucket prefix): objects Icechunk does not know, which other readers ignore
(:mod:`layoutkit.storage.nodeindex`, the virtual layout's copy of its references)."""

from __future__ import annotations

import os


def put(location: str, storage_options: dict[str, str], name: str, data: bytes) -> None:
    """Write a document beside the repository at ``location`` (a folder or an s3:// prefix)."""
    from layoutkit.storage.buckets import is_url

    if is_url(location):
        import obstore

        from layoutkit.storage.buckets import object_store
        from layoutkit.storage.retry import retrying

        store, key = object_store(location.rstrip("/") + "/" + name, storage_options)
        retrying(lambda: obstore.put(store, key, data))
        return
    path = os.path.join(os.path.abspath(location.removeprefix("file://")), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


async def get(location: str, storage_options: dict[str, str], name: str) -> bytes | None:
    """A document beside the repository at ``location``, or None when it is missing."""
    import asyncio

    from layoutkit.storage.buckets import is_url

    if is_url(location):
        import obstore

        from layoutkit.storage.buckets import object_store
        from layoutkit.storage.retry import aretrying

        store, key = object_store(location.rstrip("/") + "/" + name, storage_options)
        try:
            result = await aretrying(lambda: obstore.get_async(store, key))
            return bytes(await result.bytes_async())
        except FileNotFoundError:
            return None
    path = os.path.join(os.path.abspath(location.removeprefix("file://")), name)
    try:
        return await asyncio.to_thread(_read, path)
    except FileNotFoundError:
        return None


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


__all__ = ["get", "put"]
