# hapflow: `make run` (install into .venv, run the main job), `make test`, `make bench`.
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
	$(VENV)/bin/hapflow run graphs/demo_oscillator.yaml --out out/demo_oscillator.h5 --plot out/demo_oscillator.png

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/engine.py
	$(PY) bench/ident.py

clean:
	rm -rf out .pytest_cache
