"""The virtual layout's names: an Icechunk repository whose chunks are references into
the source files.

The hierarchy is the shot-major layout's (every group, array and attribute at its own
path, the same type rules), so any Zarr reader reads it once Icechunk is told it may
follow the references. Each referenced chunk is a (file URL, byte offset, length) triple
with the version of the file it was taken from (its modification time, or its ETag in a
bucket): Icechunk refuses to read a chunk whose file changed since. What cannot be
referenced is written as ordinary chunks in the same repository.
"""

from __future__ import annotations

LAYOUT_NAME = "virtual"
LAYOUT_VERSION = 1
"""The version its stores record (``{"name": "virtual", "version": 1}``)."""

REFS_PREFIX = "layoutkit.refs/"
"""Where a staged store (an append's, before it joins the repository) keeps the
references it would have set: one JSON document per task, ``{array: [[chunk index,
url, offset, length], ...]}``, and ``versions.json``, each source's version."""

VERSIONS_KEY = REFS_PREFIX + "versions.json"

__all__ = ["LAYOUT_NAME", "LAYOUT_VERSION", "REFS_PREFIX", "VERSIONS_KEY"]
