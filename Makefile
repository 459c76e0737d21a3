# The README's two commands: `make app` serves the planner, `make test` passes the tests.
# Both create .venv from nothing. torch is pinned here to the CPU wheel on local disk;
# the package itself asks only for a range.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN ?= torch==2.13.0
PORT ?= 8866
IP ?= 127.0.0.1
STAMP := $(VENV)/.installed

.PHONY: app test venv bench fidelity clean browser-deps lint

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH_PIN)"
	$(BIN)/pip install -q -e ".[app,torch,nvml,test]"
	touch $(STAMP)

# the planner: Voila with the CDN-free vramplan-lab template (app/vramplan/commands/app.py)
app: venv
	$(BIN)/vramplan app --port=$(PORT) --ip=$(IP)

test: venv
	$(BIN)/python -m pytest -q --timeout=600 tests

# ruff: pyflakes + where each heavy library may be imported (pyproject.toml, */ruff.toml)
lint: venv
	$(BIN)/ruff check .

bench: venv
	$(BIN)/python benchmarks/fidelity.py

# the real-module comparison (needs PyPI once: pip install -e ".[tracing]")
.PHONY: real-modules tracing
TRACING_STAMP := $(VENV)/.installed-tracing

# the tracing extra (transformers, timm, torchvision, diffusers, bitsandbytes at their pins): .ci/run installs
# it so tests/test_trace_real_modules.py runs in CI (without it those tests skip)
tracing: $(TRACING_STAMP)

$(TRACING_STAMP): $(STAMP)
	$(BIN)/pip install -q -e ".[tracing]"
	touch $(TRACING_STAMP)

real-modules: tracing
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/real_modules.py

fidelity: bench

clean:
	rm -rf $(VENV) build dist app/*.egg-info .pytest_cache .hypothesis test-artifacts

# JupyterLab on the checkout with the planner notebook open (run its cell): `make lab`, then
# the URL it prints.
# The lab extra is installed once. JupyterLab's news feed, update check and PyPI extension
# manager are off, so nothing leaves the machine (tests/browser/test_paths.py checks it).
# news_url=None stops the feed but not JupyterLab 4's "Would you like to get notified about
# official Jupyter news?" toast: the announcements plugin asks while the setting
# @jupyterlab/apputils-extension:notification fetchNews is "none" (its default), whatever the
# server's news_url (jupyterlab packages/apputils-extension/src/announcements.ts; docs
# user/announcements.rst: set fetchNews "false" in overrides.json). notebooks/lab-settings/
# holds that overrides.json, read as the app settings folder (a fresh venv has none of its own).
.PHONY: lab
LAB_PORT ?= 8888
LAB_STAMP := $(VENV)/.installed-lab
LAB_ARGS = --ip=$(IP) --port=$(LAB_PORT) --no-browser --LabApp.news_url=None \
	--LabApp.app_settings_dir=$(CURDIR)/notebooks/lab-settings \
	--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	--LabApp.extension_manager=readonly $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(LAB_STAMP)
	$(BIN)/jupyter lab $(LAB_ARGS) --LabApp.default_url=/lab/tree/notebooks/planner.ipynb

$(LAB_STAMP): $(STAMP)
	$(BIN)/pip install -q -e ".[app,lab]"
	touch $(LAB_STAMP)
