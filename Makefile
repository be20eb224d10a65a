# hapflow: `make run` (install into .venv, run the haptic-camera loop on the simulated rig),
# `make test`, `make bench`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/hapflow camera graphs/colton2005_sweep.yaml --validate graphs/colton2005_validation.yaml --method ewls --out out/camera

# --dist loadfile: a test file's tests share kernels; spread over both workers, each worker
# compiled them at the same time (the same files from an empty kernel cache: 212 s CPU with
# --dist load, 125 s with loadfile).  The files that compile every graph file and every
# library block run on one worker as one unit of work (tests/conftest.py, SHARED_KERNELS).
test: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadfile

bench: $(STAMP)
	$(PY) bench/engine.py
	$(PY) bench/ident.py
	$(PY) bench/ident_rates.py
	$(PY) bench/ident_silverbox.py
	$(PY) bench/playback.py
	$(PY) bench/devices.py
	$(PY) bench/sinks.py
	$(PY) bench/study.py
	$(PY) bench/estimation.py
	$(PY) bench/hil_timing.py --seconds 2
	$(PY) bench/hil_ident.py --grpc-seconds 2
	$(PY) bench/compile.py
	$(PY) bench/flex.py

clean:
	rm -rf out .pytest_cache
