# Two commands for a fresh Linux machine with Python 3.11+ (the package runs on 3.10+; the
# documentation tools, Sphinx 9 and MyST, need 3.11):
#   make run   - set up .venv, then compile and run the seed Hopper GEMM and print a report
#   make test  - set up .venv, type-check the package, build the documentation (warnings are
#                errors), then run the whole test suite (every code block of README.md and
#                docs/ included)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# Versions CI installs, pinned so that the CPU tests exercise the Triton of the GPU image
# (triton 3.6). torch 2.13.0 installs as a CPU build; triton 3.6's interpreter needs numpy<2.4.
PINS   := torch==2.13.0 triton==3.6.0 numpy==2.3.5 parso==0.8.7 pytest==9.2.0
# The tools of `make test` beside pytest: mypy type-checks the package; the documentation is
# built with Sphinx, Markdown pages (MyST) and the furo theme.
TOOLS  := mypy==2.4.1 sphinx==9.0.4 myst-parser==5.2.0 furo==2025.12.19
# The optional Hugging Face integration (croqtile.nn.transformers, `croqtile bench models`)
# is tested too: its tests skip without it.
EXTRAS := transformers==5.25.0
# frontend/ and backends/ install as croqtile.frontend and croqtile.backends (the package-dir
# mapping in pyproject.toml), which mypy cannot map by itself: the type check reads the package
# through a tree of links in build/ that puts them in place, then names the checkout's files.
TYPECHECK := build/typecheck

.PHONY: run test typecheck docs setup clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.cfg Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools
	$(PY) -m pip install --quiet $(PINS) $(TOOLS) $(EXTRAS)
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

run: setup
	$(PY) bench/seed_gemm.py

test: typecheck docs
	$(PY) -m pytest -q tests

typecheck: setup
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/croqtile
	ln -s $(CURDIR)/croqtile/* $(CURDIR)/frontend $(CURDIR)/backends $(TYPECHECK)/croqtile/
	$(PY) -m mypy > $(TYPECHECK)/mypy.out; rc=$$?; sed -e 's#^$(TYPECHECK)/croqtile/frontend/#frontend/#' \
	  -e 's#^$(TYPECHECK)/croqtile/backends/#backends/#' -e 's#^$(TYPECHECK)/croqtile/#croqtile/#' \
	  $(TYPECHECK)/mypy.out; exit $$rc

# The site, into build/docs; a warning fails the build (no network is needed).
docs: setup
	$(PY) -m sphinx -W --keep-going -q -b html docs build/docs

clean:
	rm -rf $(VENV) build .mypy_cache *.egg-info
