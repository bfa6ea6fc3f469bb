# One task runner. Every target sets up .venv itself, so a fresh clone needs only Python 3.11 and make.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Two stamps: the tool with its runtime dependencies alone (all `make demo` needs), and the test tooling on
# top of it (pytest, hypothesis, ruff, mypy, playwright, moto, dask, ...) for every other target.
RUNTIME := $(VENV)/.runtime-installed
STAMP := $(VENV)/.dev-installed

.PHONY: demo test lint docs engines fuzz fuzz-c bench bench-dask bench-live bench-capture bench-groups bench-rules study examples clean

# setup.py and the C sources too: `pip install -e` builds the compiled parts in place, once per change.
$(RUNTIME): pyproject.toml setup.py specaccept_cli/_jsonl_c.c specaccept_cli/_rule_c.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP): $(RUNTIME)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# DuckDB is a benchmark-only extra, never a runtime dependency.
$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

bench: $(VENV)/.bench-installed
	$(BIN)/python benchmarks/bench.py
	$(BIN)/python benchmarks/bench_known_line.py
	$(BIN)/python benchmarks/bench_rules.py
	$(BIN)/python benchmarks/bench_capture.py
	$(BIN)/python benchmarks/bench_live.py --seconds $(LIVE_SECONDS)

# Rows of each verification rule against standard rows, JSONL and Parquet (benchmarks/latest-rules.md).
bench-rules: $(STAMP)
	$(BIN)/python benchmarks/bench_rules.py

# The recorder's cost per verify step and its disk bytes per 1B steps (benchmarks/latest-capture.md).
bench-capture: $(STAMP)
	$(BIN)/python benchmarks/bench_capture.py

# Live: latency from a line written to the record showing it, and RSS over LIVE_SECONDS of 100k runs/s.
LIVE_SECONDS ?= 600
bench-live: $(STAMP)
	$(BIN)/python benchmarks/bench_live.py --seconds $(LIVE_SECONDS)

# One process vs --jobs 2 vs a Dask cluster of 2 workers (Dask comes with the dev extra).
bench-dask: $(STAMP)
	$(BIN)/python benchmarks/bench_dask.py

# A summary of 140,000 groups written, then read back by diff, --baseline and merge: bytes, seconds, peak RSS.
bench-groups: $(STAMP)
	$(BIN)/python benchmarks/bench_groups.py

# The runtime dependencies only, no test tooling. The HTML report goes to demo/ (git-ignored).
demo: $(RUNTIME)
	$(BIN)/specaccept audit examples/serving-logs.jsonl.gz
	$(BIN)/specaccept audit examples/server-reported.jsonl.gz --reported-field reported --check-sampler
	$(BIN)/specaccept audit examples/vllm-server.log
	mkdir -p demo
	$(BIN)/specaccept report examples/server-reported.jsonl.gz --reported-field reported --check-sampler -o demo/report.html
	@echo "HTML report written to demo/report.html"

# The transformers capture tests (tests/capture/test_hf.py) run real generation, so `make test` installs
# the [hf] extra. torch is pinned here, not in the extra: 2.13.0 is a CPU build this machine has at hand,
# where a plain `torch` would pull a multi-GB CUDA build.
TORCH ?= torch==2.13.0
$(VENV)/.hf-installed: $(STAMP)
	$(BIN)/python -m pip install --quiet '$(TORCH)'
	$(BIN)/python -m pip install --quiet -e '.[dev,hf]'
	touch $@

# Real serving engines for tests/engines_real/: llama.cpp's llama-server, built from the llama-cpp-python
# 0.3.36 sdist (pinned by sha256) into a cache outside the checkout, SPECACCEPT_ENGINES_CACHE (default
# ~/.cache/specaccept/engines), and reused when present: ~900 CPU-seconds the first time, nothing after.
engines:
	JOBS=$(or $(JOBS),2) scripts/build-llama-server.sh

# Hypothesis profile "fast" (tests/conftest.py); `make fuzz` runs the same properties "deep".
test: $(VENV)/.hf-installed
	HYPOTHESIS_PROFILE=fast $(BIN)/python -m pytest

# After a change to an option or to what specaccept prints: regenerate docs/cli.md from the Click commands, and
# write the real output of every checked console example into README.md and docs/*.md (review the diff).
docs: $(STAMP)
	$(BIN)/python scripts/cli_reference.py
	$(BIN)/python scripts/format_table.py
	$(BIN)/python scripts/rules_table.py
	UPDATE_EXAMPLES=1 $(BIN)/python -m tests.test_readme_examples

lint: $(STAMP)
	$(BIN)/ruff check specaccept_cli tests $(wildcard benchmarks)
	$(BIN)/ruff format --check specaccept_cli tests $(wildcard benchmarks)
	$(BIN)/mypy

# The seeded study of every interval and test (tests/study, deep profile: a few minutes each for logged
# runs and for payloads with short drafts); writes both tables into docs/statistics.md between their
# markers. `make test` runs its fast profile.
study: $(STAMP)
	$(BIN)/python -m tests.study.run --profile deep --write-docs

# Fuzz the JSONL reader (tests/fuzz_reader.py), then the engine-line, scrape and payload readers and the audit
# command over them (tests/fuzz_formats.py): FUZZ_EXAMPLES inputs each through hypothesis;
# then every property test of the pure parts with the "deep" hypothesis profile.
# First the compiled reader alone (fuzz-c): libFuzzer with AddressSanitizer and UBSan for FUZZ_SECONDS
# (clang needed: `apt-get install clang`); its findings, if any, land in build/fuzz/ as crash-* files.
FUZZ_EXAMPLES ?= 20000
FUZZ_SECONDS ?= 120
CLANG ?= clang
PY_INCLUDE = $(shell $(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['include'])")
PY_LIBDIR = $(shell $(BIN)/python -c "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))")
PY_LIB = $(shell $(BIN)/python -c "import sysconfig; print(sysconfig.get_config_var('LDVERSION'))")
fuzz: fuzz-c
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m tests.fuzz_reader
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m tests.fuzz_formats
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest -q tests/rule tests/read tests/summary tests/pipeline tests/test_checks.py tests/test_text.py

fuzz-c: $(STAMP)
	mkdir -p build/fuzz/corpus
	$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$(PY_INCLUDE) \
		tests/fuzz/jsonl_c_fuzz.c -L$(PY_LIBDIR) -Wl,-rpath,$(PY_LIBDIR) -lpython$(PY_LIB) -lm -o build/fuzz/jsonl_c_fuzz
	cd build/fuzz && ASAN_OPTIONS=detect_leaks=0 PYTHONHOME=$$($(abspath $(BIN))/python -c "import sys; print(sys.base_prefix)") \
		./jsonl_c_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -dict=../../tests/fuzz/json.dict \
		corpus ../../tests/fuzz/seeds

examples: $(STAMP)
	$(BIN)/specaccept simulate --runs 2000 --alpha 0.78 --k 1-8 --seed 7 -o examples/serving-logs.jsonl.gz
	$(BIN)/specaccept simulate --runs 2000 --alpha 0.78 --k 1-8 --seed 8 -o examples/serving-logs.parquet
	$(BIN)/python -m tests.specdec examples/server-reported.jsonl.gz
	$(BIN)/python -m tests.engines examples/vllm-server.log
	$(BIN)/python -m tests.payloads examples/vllm-payloads.jsonl

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build *.egg-info
