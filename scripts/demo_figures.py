"""The demo's figures in the docs, taken from the demo's own output, so they cannot drift.

    python scripts/demo_figures.py DEMO_DIR     (make demo-figures, after make demo)

Copies what ``make demo`` measured in the bucket (``DEMO_DIR/report-bucket/summary.md``
and its ``time_by_pattern.png``) to ``docs/demo-summary.md`` and
``docs/demo-time_by_pattern.png``, and writes the block between ``<!-- demo-figures -->``
and ``<!-- /demo-figures -->`` in the README and the getting-started page from that
summary: the sentence with the range of speed-ups, and the table. ``tests/test_docs.py``
checks that both blocks are what this script makes of ``docs/demo-summary.md``.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = ROOT / "docs" / "demo-summary.md"
PAGES = (ROOT / "README.md", ROOT / "docs" / "getting-started.md")
BLOCK = re.compile(r"(<!-- demo-figures -->\n)(.*?)(<!-- /demo-figures -->)", re.S)
ROW = re.compile(r"^\| (\w+) \| ([^|]+?) \| ([\d.]+ s) \| ([\d,]+) \| \*\*([\d.]+)x\*\*")


def rows(summary: str) -> list[tuple[str, str, str, str, float]]:
    """(read, fastest, seconds, requests, times the source) of each line of the answer."""
    return [(m[1], m[2].split(" (the source")[0], m[3], m[4], float(m[5]))
            for line in summary.splitlines() if (m := ROW.match(line))]


def block(summary: str) -> str:
    """The README's and getting-started's text for a demo summary."""
    found = rows(summary)
    dated = re.search(r"^Measured (\d{4}-\d\d-\d\d)", summary, re.M)
    lows, highs = min(r[4] for r in found), max(r[4] for r in found)
    lines = [
        f"Read from the bucket, every request held 10 ms, the layout made for a read is {lows:.1f}x to "
        f"{highs:.1f}x faster than the source HDF5 file read by `layoutkit.open` "
        f"([the demo's summary](docs/demo-summary.md){', measured ' + dated.group(1) if dated else ''}):",
        "",
        "| read (from the bucket, 10 ms per request) | fastest | seconds | requests | vs the source |",
        "|---|---|---:|---:|---:|",
        *(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | **{r[4]:.1f}x** |" for r in found),
    ]
    return "\n".join(lines) + "\n"


def page_block(page: Path, summary: str) -> str:
    text = block(summary)
    return text if page.name == "README.md" else text.replace("(docs/demo-summary.md)", "(demo-summary.md)")


def main(demo: Path) -> None:
    summary = (demo / "report-bucket" / "summary.md").read_text()
    stamp = f"Measured {time.strftime('%Y-%m-%d')} by `make demo` (its `{demo.name}/report-bucket/summary.md`)."
    SUMMARY.write_text(f"# The demo's answer, as make demo wrote it\n\n{stamp}\n\n{summary}")
    shutil.copy(demo / "report-bucket" / "time_by_pattern.png", ROOT / "docs" / "demo-time_by_pattern.png")
    stored = SUMMARY.read_text()
    for page in PAGES:
        text = page.read_text()
        if not BLOCK.search(text):
            raise SystemExit(f"{page} has no <!-- demo-figures --> block")
        block = page_block(page, stored)
        page.write_text(BLOCK.sub(lambda m, block=block: m.group(1) + block + m.group(3), text))
        print(f"wrote {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "demo"))
