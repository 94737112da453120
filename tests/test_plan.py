"""Layout maths, checked against brute force with hypothesis."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutkit.options import ShardSpec, parse_chunks, parse_compressor
from layoutkit.plan import (
    ArrayPlan,
    iter_blocks,
    plan_chunks,
    plan_grid,
    plan_shards,
    plan_tasks,
    region_size,
    task_budget,
)


@st.composite
def shape_and_base(draw, max_extent=300):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, max_extent)) for _ in range(ndim))
    base = tuple(draw(st.integers(1, s)) for s in shape)
    return shape, base


def boundaries(extent: int, step: int) -> set[int]:
    return set(range(0, extent, step)) | {extent}


@settings(max_examples=300, deadline=None)
@given(shape_and_base(), st.sampled_from([1, 2, 4, 8]), st.integers(1, 1 << 22))
def test_grid_blocks_align_with_base_and_respect_target(sb, itemsize, target):
    shape, base = sb
    block = plan_grid(shape, base, itemsize, target)
    for s, b, blk in zip(shape, base, block):
        # every block boundary is a base-block boundary (or the array's end)
        assert boundaries(s, blk) <= boundaries(s, b)
        assert 1 <= blk <= s
    nbytes = math.prod(block) * itemsize
    base_bytes = math.prod(min(b, s) for b, s in zip(base, shape)) * itemsize
    assert nbytes <= max(target, base_bytes)


@settings(max_examples=200, deadline=None)
@given(shape_and_base(), st.integers(1, 1 << 20))
def test_grid_is_maximal(sb, target):
    """No single axis could still be doubled (or completed) within the target."""
    shape, base = sb
    block = plan_grid(shape, base, 1, target)
    for s, b, blk in zip(shape, base, block):
        if blk >= s:
            continue
        grown = min(s, blk * 2)
        if grown < s:
            grown = grown // b * b
        if grown <= blk:
            continue
        assert math.prod(block) // blk * grown > target


@settings(max_examples=200, deadline=None)
@given(shape_and_base(), st.integers(1, 1 << 20))
def test_shards_are_multiples_of_chunks(sb, target):
    shape, chunks = sb
    shards = plan_shards(shape, chunks, 4, ShardSpec("size", target))
    nchunks = math.prod(math.ceil(s / c) for s, c in zip(shape, chunks))
    if nchunks <= 1:
        assert shards is None
        return
    assert shards is not None
    assert all(sh % c == 0 and sh >= c for sh, c in zip(shards, chunks))


@settings(max_examples=200, deadline=None)
@given(shape_and_base(max_extent=24))
def test_blocks_tile_the_array_exactly(sb):
    shape, block = sb
    seen = np.zeros(shape, dtype=np.int32)
    for region in iter_blocks(shape, block):
        seen[tuple(slice(a, b) for a, b in region)] += 1
    assert (seen == 1).all()


def test_plan_chunks_modes():
    assert plan_chunks((1000, 8), 4, (100, 8), parse_chunks("source"), 1 << 20) == (100, 8)
    assert plan_chunks((1000, 8), 4, (100, 8), parse_chunks("250,-1"), 1 << 20) == (250, 8)
    # auto grows source chunks to the target, staying aligned
    auto = plan_chunks((100_000,), 8, (1000,), parse_chunks("auto"), 64_000)
    assert auto == (8000,)
    # contiguous source: whole trailing axes first
    assert plan_chunks((1000, 50), 8, None, parse_chunks("auto"), 8 * 50 * 100) == (100, 50)
    assert plan_chunks((), 8, None, parse_chunks("auto"), 100) == ()
    # an explicit shape of another rank falls back to auto
    assert plan_chunks((10,), 8, None, parse_chunks("4,4"), 1 << 20) == (10,)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 700)), min_size=1, max_size=20),
       st.integers(1000, 100_000))
def test_tasks_cover_every_block_once_within_budget(arrays, budget):
    plans = [
        ArrayPlan(f"/a{i}", (n,), "f4", 4, (c,), None, parse_compressor("none"), "raw", n * 4)
        for i, (n, c) in enumerate(arrays)
    ]
    tasks = plan_tasks(plans, budget)
    covered = {}
    for task in tasks:
        assert task.nbytes == sum(region_size(r) * 4 for _, r in task.items)
        assert task.nbytes <= budget or len(task.items) == 1
        for path, region in task.items:
            covered.setdefault(path, []).append(region)
    for plan in plans:
        expected = list(iter_blocks(plan.shape, plan.chunks))
        assert sorted(covered.get(plan.path, [])) == sorted(expected)


def test_task_budget_scales_with_memory_and_workers():
    assert task_budget(1 << 30, 2) == 16 << 20
    assert task_budget(64 << 20, 2) == 4 << 20
    assert task_budget(64 << 20, 8) == 1 << 20


def test_auto_page_size_grows_only_for_chunks():
    from layoutkit.layouts.hdf5_paged.plan import DEFAULT_PAGE_BYTES, plan_page_size

    assert plan_page_size(1000) == DEFAULT_PAGE_BYTES == 8 << 20
    assert plan_page_size(8 << 20) == 8 << 20
    assert plan_page_size(9 << 20) == 16 << 20
    assert plan_page_size(16 << 20) == 32 << 20  # strictly above: the page also holds its header


@given(st.integers(min_value=0, max_value=1 << 40), st.integers(min_value=1, max_value=1 << 28))
def test_small_files_get_pages_that_fit_them(file_bytes: int, chunk: int) -> None:
    """Below 128 MiB the page is a power of two near a sixteenth of the file (4 KiB at
    least), so a file's two half-empty last pages cost at most about 1/8 of it; above,
    the rule for large files holds."""
    from layoutkit.layouts.hdf5_paged.plan import DEFAULT_PAGE_BYTES, MIN_PAGE_BYTES, plan_page_size

    page = plan_page_size(chunk, file_bytes)
    assert page & (page - 1) == 0 and page >= MIN_PAGE_BYTES
    if file_bytes < 16 * DEFAULT_PAGE_BYTES // 2:
        assert page < DEFAULT_PAGE_BYTES and 2 * page <= max(2 * MIN_PAGE_BYTES, file_bytes // 4)
    else:
        assert page == plan_page_size(chunk)
