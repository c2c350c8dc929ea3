# Two commands set everything up on a machine with only python3 and make:
#   make train   create .venv, install minitrain, run lab 01 end to end
#   make test    create .venv, install minitrain with dev extras, run ruff + the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN_DIR ?= runs/lab01-$(shell date +%Y%m%d-%H%M%S)
# The step benchmark compares with PyTorch eager when its Python can import torch (never a dependency):
#   make bench BENCH_PYTHON=/path/to/venv-with-torch/bin/python   (docs/performance.md)
BENCH_PYTHON ?= $(BIN)/python

.PHONY: train test lint bench clean clean-kernels

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(VENV)/.installed $@

train: $(VENV)/.installed
	$(BIN)/python scripts/train_mini.py --config experiments/18-train-mini/config.yaml --out-dir $(RUN_DIR) --models-dir $(RUN_DIR)/models --seed 42

test: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_kernels.py
	$(BIN)/python benchmarks/bench_optim.py
	$(BIN)/python benchmarks/bench_quant.py
	$(BENCH_PYTHON) benchmarks/bench_step.py
	$(BIN)/python benchmarks/bench_run.py

# numba's disk cache is keyed on each kernel's own file: after editing a helper that kernels inline from another
# file (minitrain/kernels/fastmath.py), drop the compiled kernels so they are rebuilt.
clean-kernels:
	find minitrain -name '*.nbi' -delete -o -name '*.nbc' -delete

clean: clean-kernels
	rm -rf $(VENV) runs .pytest_cache
