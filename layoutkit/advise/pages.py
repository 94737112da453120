"""Where a paged HDF5 file's bytes fall: the data pages a read touches, from the write
order alone.

``advise`` fits its counts on two small samples. A paged file whose samples are small
hides how a read grows: a signal of 7 shots and of 13 fits the same few 8 MiB pages, so
the line through the samples predicts no growth, and the full archive spreads the same
signal over many more (measured on the 40-shot benchmark: 14 GETs predicted, 19 made;
51 predicted, 69 made). The file's geometry knows better: ``reorder`` writes the arrays
in an order :func:`layoutkit.layouts.hdf5_paged.plan.write_order` decides, HDF5 packs them into pages, and
a read with a page buffer fetches each page it touches once.

:func:`layout_pages` lays the arrays out in that order at their stored sizes, as
HDF5's paged aggregation does (an allocation smaller than a page never straddles one; a
larger one starts on a page boundary); :func:`page_requests` replays a shot or signal
read over them (its arrays and their dimension scales, in the reader's order) through a
least-recently-used page buffer, as ``verify`` reads: one per worker process, or one for
thread workers, which share the open file and move through it together
(:func:`interleave`; on the 40-shot benchmark, reading 2 signals of a shot-ordered file
with 2 threads fetched 25 pages, counted 20 + 5 of metadata this way, 40 + 5 read one
after the other). Only the difference
between the full archive and the larger sample is used (:func:`extra_requests`): what
the layout adds as the archive grows, on top of the requests measured there, metadata
pages included.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest

from layoutkit.templates import match_template, natural_key

PAGED_PATTERNS = ("shot", "signal")  # the reads whose pages the geometry knows


def layout_pages(order: Sequence[str], sizes: Mapping[str, int], page: int) -> dict[str, range]:
    """Each array's pages (indices) when written in ``order`` at ``sizes`` into pages of
    ``page`` bytes: a piece smaller than a page goes into the current page if it fits,
    else into a new one; a larger piece starts a page of its own and fills as many as it
    needs. Arrays with nothing stored have no pages."""
    if page <= 0:
        raise ValueError(f"Expected a page size above 0. Got {page}.")
    out: dict[str, range] = {}
    current, used = 0, 0  # the page being filled and the bytes in it
    for path in order:
        n = int(sizes.get(path, 0))
        if n <= 0:
            out[path] = range(0)
            continue
        if n < page:
            if used + n > page:
                current, used = current + (1 if used else 0), 0
            out[path] = range(current, current + 1)
            used += n
        else:
            start = current + (1 if used else 0)
            count = -(-n // page)
            out[path] = range(start, start + count)
            current, used = start + count - 1, n - (count - 1) * page
            if used == page:
                current, used = current + 1, 0
    return out


def read_sequence(matches: Mapping[str, tuple[str, str]], scales_of: Mapping[str, Sequence[str]], pattern: str,
                  item: str) -> list[str]:
    """The arrays one ``shot`` or ``signal`` read of ``item`` fetches, in the order a
    reader fetches them: shot by shot (or signal by signal) in natural order, each
    signal's dimension scales before it. ``matches``: each signal's ``(shot, signal)``
    (:func:`layoutkit.templates.match_template`)."""
    which = 0 if pattern == "shot" else 1
    found = [(parts[1 - which], p) for p, parts in matches.items() if parts[which] == item]
    out: list[str] = []
    for _, p in sorted(found, key=lambda x: natural_key(x[0])):
        out.extend(scales_of.get(p, ()))
        out.append(p)
    return out


def page_requests(pages: Mapping[str, range], shares: Iterable[Iterable[Sequence[str]]], buffer_pages: int) -> int:
    """Pages fetched by readers that each hold a page buffer of ``buffer_pages`` pages
    (least recently used out first), one reader per share; a share is a list of read
    sequences (:func:`read_sequence`), read one after the other."""
    fetched = 0
    for share in shares:
        cache: OrderedDict[int, None] = OrderedDict()
        for sequence in share:
            for path in sequence:
                for page in pages.get(path, ()):
                    if page in cache:
                        cache.move_to_end(page)
                        continue
                    fetched += 1
                    cache[page] = None
                    if len(cache) > max(1, buffer_pages):
                        cache.popitem(last=False)
    return fetched


def interleave(shares: Sequence[Sequence[Sequence[str]]]) -> list[str]:
    """What readers working at once on one open file fetch, as one stream: each reader's
    read sequences one after another, the readers taking turns array by array (threads
    sharing a file move through the archive together, so one's pages serve the other)."""
    streams = [[path for sequence in share for path in sequence] for share in shares]
    return [path for turn in zip_longest(*streams) for path in turn if path is not None]


@dataclass(frozen=True)
class PagedFile:
    """A paged file to be: its arrays' write order, stored sizes and dimension scales."""

    order: tuple[str, ...]
    sizes: Mapping[str, int]
    scales_of: Mapping[str, Sequence[str]]
    page: int

    def requests(self, pattern: str, items: Sequence[str], workers: int, buffer: int, template: str,
                 shared: bool = False) -> int:
        """Data pages a ``shot`` or ``signal`` read of ``items`` fetches, its items dealt
        round-robin to ``workers`` readers with a page buffer of ``buffer`` bytes each, or
        (``shared``) reading at once through one page buffer of ``buffer`` bytes."""
        pages = layout_pages(self.order, self.sizes, self.page)
        matches = match_template(self.order, template)
        sequences = [read_sequence(matches, self.scales_of, pattern, str(i)) for i in items]
        shares = [sequences[w::workers] for w in range(max(1, workers))]
        return page_requests(pages, [[interleave(shares)]] if shared else shares, buffer // self.page)

    def array_requests(self, sequences: Sequence[Sequence[str]], workers: int, buffer: int) -> int:
        """Data pages fetched by reads of arrays (each a sequence of paths, read in order),
        dealt round-robin to ``workers`` threads reading at once through one page buffer
        of ``buffer`` bytes."""
        pages = layout_pages(self.order, self.sizes, self.page)
        shares = [list(sequences[w::workers]) for w in range(max(1, workers))]
        return page_requests(pages, [[interleave(shares)]], buffer // self.page)

    @property
    def data_pages(self) -> int:
        """The pages its raw data fill, laid out as :func:`layout_pages` lays them."""
        return max((r.stop for r in layout_pages(self.order, self.sizes, self.page).values()), default=0)


def extra_requests(large: PagedFile, full: PagedFile, pattern: str, items: Sequence[str], workers: int,
                   buffer: int, template: str, shared: bool = False) -> int:
    """Data pages the full archive's read fetches beyond the larger sample's (at least 0)."""
    return max(0, full.requests(pattern, items, workers, buffer, template, shared)
               - large.requests(pattern, items, workers, buffer, template, shared))


__all__ = ["PAGED_PATTERNS", "PagedFile", "extra_requests", "interleave", "layout_pages", "page_requests",
           "read_sequence"]
