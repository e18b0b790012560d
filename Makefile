# Two commands do everything:  `make lab` opens the course, `make test` runs every test.
# Both build a local virtual environment (.venv) from nothing the first time.
PYTHON ?= python3
# The version set (README, "Versions"): TRITON=3.9, the default (requirements.txt, in .venv), or
# TRITON=3.6, the GPU image's (requirements-triton3.6.txt, in .venv-triton3.6).
TRITON ?= 3.9
ifeq ($(TRITON),3.9)
REQUIREMENTS := requirements.txt
VENV   ?= .venv
else
REQUIREMENTS := requirements-triton$(TRITON).txt
VENV   ?= .venv-triton$(TRITON)
endif
BIN    := $(VENV)/bin
# With an NVIDIA GPU: the CUDA build of torch the course's GPU image has, then the set's Triton over the
# one that torch pins (pip warns of the mismatch; the course is tested on the GPU with both Tritons).
TORCH_GPU ?= torch==2.11.0
HAVE_GPU  := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
JOBS   ?= 2

.PHONY: lab test test-unit test-notebooks test-triton3.6 grade bench venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: $(REQUIREMENTS) pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
ifeq ($(HAVE_GPU),1)
	$(BIN)/python -m pip install -q $(TORCH_GPU) $$(grep -v '^torch==\|^triton==' $(REQUIREMENTS) | grep -v '^#')
	$(BIN)/python -m pip install -q --no-deps $$(grep '^triton==' $(REQUIREMENTS))
else
	$(BIN)/python -m pip install -q -r $(REQUIREMENTS)
endif
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@

# Extra JupyterLab flags: make lab LAB_ARGS="--no-browser --port 8888"
LAB_ARGS ?=
lab: venv
	$(BIN)/python -m course.lab $(LAB_ARGS)

# --dist loadgroup keeps the browser test's notebooks on one worker (one JupyterLab server).
test: venv
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadgroup tests
	$(MAKE) --no-print-directory test-notebooks

test-unit: venv
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadgroup tests

# The other end of the versions the course supports: unit tests and nbval on the GPU image's Triton 3.6.
test-triton3.6:
	$(MAKE) --no-print-directory test TRITON=3.6

# Every notebook under nbval: lax mode (only cells tagged nbval-check-output are compared),
# one notebook per worker, outputs sanitized by tests/nbval_sanitize.cfg.
test-notebooks: venv
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadscope -p no:cacheprovider \
		--nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
		notebooks/

# Grade learners' filled notebooks on the CPU, one row per exercise (README, "Grading"):
#   make grade NOTEBOOKS="submissions/alice/*.ipynb" GRADE_ARGS="--require-all --json grades.json"
NOTEBOOKS  ?= notebooks/*.ipynb
GRADE_ARGS ?=
grade: venv
	$(BIN)/python -m course.grade $(GRADE_ARGS) $(NOTEBOOKS)

bench: venv
	$(BIN)/python -m course.bench all

clean:
	rm -rf .venv .venv-triton3.6 .pytest_cache
