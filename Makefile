# Two commands set everything up on a machine with only python3 and make:
#   make train   create .venv, install minitrain, run lab 01 end to end
#   make test    create .venv, install minitrain with dev extras, run ruff, the line budget and the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN_DIR ?= runs/lab01-$(shell date +%Y%m%d-%H%M%S)
# More flags for `make train`, e.g. TRAIN_ARGS='--set optimizer.lr_max=1.5e-4'. With MINITRAIN_LAB_DIR=DIR set,
# `make train` trains with a lab workspace's files (minitrain/seam.py).
TRAIN_ARGS ?=
# The step benchmark compares with PyTorch and JAX when its Python can import them (never dependencies):
#   make bench BENCH_PYTHON=/path/to/venv-with-torch/bin/python   (docs/performance.md)
BENCH_PYTHON ?= $(BIN)/python

.PHONY: train test fuzz lint bench bench-llama clean clean-kernels

# uv (from PyPI, like everything else) installs the packages: it resolves and unpacks in parallel. Byte-compiled at
# install: without it a fresh clone's suite took 17 min instead of about 11 (every test's subprocess, Ray worker
# and numba import compiled the packages it imports again).
INSTALL := $(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(INSTALL) -e ".[plots]"
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(INSTALL) -e ".[dev]"
	touch $(VENV)/.installed $@

train: $(VENV)/.installed
	$(BIN)/python scripts/train_mini.py --config experiments/18-train-mini/config.yaml --out-dir $(RUN_DIR) --models-dir $(RUN_DIR)/models --seed 42 $(TRAIN_ARGS)

# The suite runs on every core (pytest-xdist): TEST_WORKERS=0 runs it in one process, as plain `pytest` does. An idle
# worker takes queued tests from a busy one (worksteal), so the two long end-to-end tests do not queue behind each other.
# The 15 slowest tests are listed at the end: the suite must stay under 10 minutes on a 2-core machine. Before it,
# scripts/warm_caches.py compiles the bytecode and the numba kernels once, so a fresh clone's processes (and the
# copies of the checkout some tests make) do not each compile them again.
TEST_WORKERS ?= auto
test: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/python scripts/line_budget.py
	$(BIN)/python scripts/warm_caches.py
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=15

# The damage suites (tests/*/test_damage*.py: run folders, configs, Hub ids, numbers and tables, sweeps, foreign run
# files) at length: random seeds, FUZZ_EXAMPLES cases each (make test runs a few from a fixed seed). It prints how
# many cases it tried; any traceback, hang or stray write fails it.
FUZZ_EXAMPLES ?= 1000
fuzz: $(VENV)/.installed-dev
	MINITRAIN_DAMAGE_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) tests/*/test_damage*.py

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_kernels.py
	$(BIN)/python benchmarks/bench_optim.py
	$(BIN)/python benchmarks/bench_quant.py
	$(BENCH_PYTHON) benchmarks/bench_step.py
	$(BIN)/python benchmarks/bench_run.py

# SmolLM2-135M's shape (LoRA, full and QLoRA steps, KV-cache generation) against PyTorch eager from BENCH_PYTHON
# (its own processes), measured at its real 30 layers on 1 and 2 threads: about an hour on 2 cores (estimated from
# the step times in docs/performance.md). A ratio above load 1.5 is printed as NOT A RESULT; add --strict to fail.
BENCH_LLAMA_ARGS ?= --rounds 2
bench-llama: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_llama.py --torch-python $(BENCH_PYTHON) $(BENCH_LLAMA_ARGS)

# numba's disk cache is keyed on each kernel's own file: after editing a helper that kernels inline from another
# file (minitrain/autograd/kernels/fastmath.py), drop the compiled kernels so they are rebuilt.
clean-kernels:
	find minitrain -name '*.nbi' -delete -o -name '*.nbc' -delete

clean: clean-kernels
	rm -rf $(VENV) runs .pytest_cache
