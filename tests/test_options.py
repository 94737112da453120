from __future__ import annotations

import pytest

from layoutkit.errors import InvalidOptionError
from layoutkit.options import (
    CompressorSpec,
    format_size,
    parse_chunks,
    parse_compressor,
    parse_shards,
    parse_size,
)


@pytest.mark.parametrize(
    "text, expected",
    [("4096", 4096), ("8MiB", 8 << 20), ("64MB", 64_000_000), ("1.5GiB", 3 << 29), ("1 kib", 1024), (12, 12)],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MiB", "-1", "4 parsecs", "1e3", "0x10"])
def test_parse_size_rejects(text):
    with pytest.raises(InvalidOptionError, match="Got"):
        parse_size(text)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("none", CompressorSpec("none")),
        ("zstd", CompressorSpec("zstd", 3)),
        ("zstd:9", CompressorSpec("zstd", 9)),
        ("gzip:4", CompressorSpec("gzip", 4)),
        ("shuffle+gzip:2", CompressorSpec("gzip", 2, shuffle=True)),
        ("lz4", CompressorSpec("lz4")),
        ("lzf", CompressorSpec("lzf")),
        ("blosc:zstd:5:shuffle", CompressorSpec("blosc", 5, "zstd", True)),
        ("blosc:lz4:1:noshuffle", CompressorSpec("blosc", 1, "lz4", False)),
    ],
)
def test_parse_compressor_round_trips(text, expected):
    spec = parse_compressor(text)
    assert spec == expected
    assert parse_compressor(str(spec)) == spec


@pytest.mark.parametrize(
    "text, message",
    [
        ("gzip:12", "Expected a gzip compression level from 0 to 9. Got 12."),
        ("zstd:0", "from 1 to 22"),
        ("snappy", "Expected a compressor"),
        ("blosc:snappy", "Expected a blosc codec"),
        ("lz4:3", "takes no level"),
        ("none:1", "takes no options"),
    ],
)
def test_parse_compressor_rejects(text, message):
    with pytest.raises(InvalidOptionError, match=message.replace(".", r"\.")):
        parse_compressor(text)


def test_parse_chunks_and_shards():
    assert parse_chunks("source").mode == "source"
    assert parse_chunks("1000,-1").shape == (1000, -1)
    assert parse_shards("none").mode == "none"
    assert parse_shards("auto").target_bytes == 64 << 20
    assert parse_shards("128MiB").target_bytes == 128 << 20
    for bad in ("0", "a,b", "-2"):
        with pytest.raises(InvalidOptionError):
            parse_chunks(bad)
    with pytest.raises(InvalidOptionError):
        parse_shards("0")


def test_format_size():
    assert format_size(512) == "512 B"
    assert format_size(8 << 20) == "8.0 MiB"


def test_durations_are_said_as_a_person_says_them():
    from layoutkit.options import duration_text

    assert [duration_text(s) for s in (0.4, 45, 119.6, 180, 200, 1500, 9000)] == [
        "0 s", "45 s", "120 s", "3 min", "3 min 20 s", "25 min", "2.5 h"]
