# The two commands of the README: `make run` (main job) and `make test` (test suite).
# Both create .venv and install prefrl into it on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export MUJOCO_GL ?= egl
export XLA_PYTHON_CLIENT_PREALLOCATE ?= false

.PHONY: run test bench-venv clean

$(VENV)/.installed-%: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$*]'
	touch $@

# A short preference run (scripted Oracle teacher): prints learned-vs-true agreement, the final
# true return, and writes a video.
run: $(VENV)/.installed-test
	$(BIN)/prefrl train --preset quickstart

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

# Benchmarks need the peers (SB3, SBX, CPU torch): a separate environment, never the test one.
bench-venv:
	$(MAKE) VENV=.venv-bench .venv-bench/.installed-bench

clean:
	rm -rf $(VENV) .venv-bench .pytest_cache
