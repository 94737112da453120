# Two commands: `make demo` and `make test`. Each creates .venv when missing.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.layoutkit-installed
DEMO    ?= demo
SHOTS   ?= 10

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || "$$(./scripts/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(VENV)/bin/layoutkit sample $(DEMO)/shots.h5 --shots $(SHOTS)
	$(VENV)/bin/layoutkit convert $(DEMO)/shots.h5 $(DEMO)/shots.zarr
	$(VENV)/bin/layoutkit convert $(DEMO)/shots.h5 $(DEMO)/shots-sharded.zarr --shards auto --compressor lz4
	$(PY) examples/read_back.py $(DEMO)/shots.h5 $(DEMO)/shots.zarr $(DEMO)/shots-sharded.zarr

test: $(STAMP)
	$(PY) -m pytest -n 2 -q

bench: $(STAMP)
	$(PY) benchmarks/bench_convert.py

clean:
	rm -rf $(DEMO) .pytest_cache
