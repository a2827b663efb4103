# The two commands of the README: `make run` (main job) and `make test` (test suite).
# Both create .venv and install prefrl into it on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export MUJOCO_GL ?= egl
export XLA_PYTHON_CLIENT_PREALLOCATE ?= false

.PHONY: run test docs system-deps bench-venv clean

# Extras per use: the main job needs none; the tests cover the piano, Adroit, Atari, Ray and the
# docs site too, so the docs build from the test environment.
EXTRAS_run :=
EXTRAS_test := test,piano,docs,adroit,atari,sweep
EXTRAS_bench := bench
# MetaWorld pins MuJoCo 3.3.0 and prefrl runs it on 3.17 (tools/metaworld_check.py): installed
# without its dependencies, which the test install already holds (packaging: imported, undeclared).
METAWORLD := metaworld==3.1.1 packaging

$(VENV)/.installed-%: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.$(if $(EXTRAS_$*),[$(EXTRAS_$*)])'
	$(if $(filter test,$*),$(BIN)/python -m pip install -q --no-deps $(METAWORLD))
	touch $@

# A short preference run (scripted Oracle teacher): prints learned-vs-true agreement, the final
# true return, and writes a video.
run: $(VENV)/.installed-run
	$(BIN)/prefrl train --preset quickstart

# The suite's tests run in TEST_WORKERS processes side by side (pytest-xdist): one process left
# a core of a 2-core machine idle for most of an hour; each test stands alone, so any split works.
TEST_WORKERS ?= 2
test: system-deps $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

# The documentation site in site/: the generated pages (CLI reference, benchmarks) first.
docs: $(VENV)/.installed-test
	$(BIN)/python docs/gen_cli.py
	$(BIN)/python docs/gen_benchmarks.py
	$(BIN)/python docs/gen_reproductions.py
	$(BIN)/mkdocs build --strict

# Debian packages the tests use for real: a PostgreSQL server for the store's tests, Chromium
# for the web app's, PortAudio headers (pyaudio's build) and FluidSynth for the piano's.
# Installed when missing and we may (root); otherwise say what to install.
SYSTEM_DEPS := postgresql chromium portaudio19-dev libfluidsynth3
system-deps:
	@missing=$$(for p in $(SYSTEM_DEPS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $$missing (Debian)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing Debian packages: $$missing (sudo apt-get install $$missing); their tests will be skipped"; \
	  fi; \
	fi

# Benchmarks need the peers (SB3, SBX, CPU torch): a separate environment, never the test one.
bench-venv:
	$(MAKE) VENV=.venv-bench .venv-bench/.installed-bench

clean:
	rm -rf $(VENV) .venv-bench .pytest_cache
