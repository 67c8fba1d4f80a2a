# picobot — developer entry points. Every target bootstraps .venv on first use
# (only python3 and make are needed), installing the versions CI tested:
# requirements.lock, with hashes. `make lock` refreshes it (see README).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LOCK   := requirements.lock
# empty: the file `picobot` itself finds ($$PICOBOT_HOME/config.json, then
# ./config.json), so `make run`, `picobot doctor` and `picobot backup` agree
CONFIG ?=
HOME_CONFIG = $${PICOBOT_HOME:-$$HOME/.picobot}/config.json

.PHONY: install run test lint bench lock clean screenshots

install: $(STAMP)

$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

run: $(STAMP)
	@if [ -z "$(CONFIG)" ] && [ ! -f "$(HOME_CONFIG)" ] && [ ! -f config.json ]; then \
		install -m 600 config.example.json config.json; \
		echo "make run: wrote ./config.json from config.example.json (picobot doctor and backup read it too);"; \
		echo "          the data (database, workspace, media) goes to $${PICOBOT_HOME:-$$HOME/.picobot}"; \
	fi
	$(BIN)/picobot gateway $(if $(CONFIG),--config $(CONFIG))

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# the console's screenshots in docs/webui/ (docs/WEBUI.md), from its browser tests
screenshots: $(STAMP)
	PICOBOT_DOCS_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/web -k "console or i18n"

bench: $(STAMP)
	$(BIN)/python -m bench

# re-resolve every dependency to its newest allowed version, with hashes;
# then `make test lint` and commit requirements.lock
lock:
	test -x .venv-lock/bin/pip-compile || { $(PYTHON) -m venv .venv-lock && \
		.venv-lock/bin/python -m pip install --quiet pip-tools; }
	.venv-lock/bin/pip-compile --quiet --upgrade --generate-hashes --allow-unsafe \
		--strip-extras --extra dev --no-emit-index-url --no-emit-find-links \
		-o $(LOCK) pyproject.toml

clean:
	rm -rf $(VENV) .venv-lock build *.egg-info .pytest_cache .mypy_cache .ruff_cache
