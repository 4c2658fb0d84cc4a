# make bench   set up .venv on first use, then run every chapter's pairs (ARGS="--chapter 1 --quick" narrows it);
#              on a CUDA torch it first installs torchao and GemLite once (requirements-cuda-extras.txt; EXTRAS=0 skips)
# make extras  (re)try installing requirements-cuda-extras.txt into .venv (CUDA torch only; a failure is named, not fatal)
# make test    set up .venv on first use, then run the test suite (what CI runs; never installs the extras)
# make peaks   measure and cache this device's ceilings
# make cu      build every chapter's CUDA samples
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
ARGS   ?=
JOBS   ?= 3
EXTRAS ?= 1

.PHONY: bench extras test peaks cu cuda-headers triton clean help
help:
	@sed -n '1,6p' Makefile

bench: $(VENV)/.ready $(if $(filter 0,$(EXTRAS)),,$(VENV)/.extras)
	$(PY) benchmark.py $(ARGS)

# torchao and GemLite for chapter 13's fp8_linear library variants: tried once (the stamp records the
# outcome), again when the file changes or with `make extras`; never by `make test`.
$(VENV)/.extras: $(VENV)/.ready requirements-cuda-extras.txt
	@VENV=$(VENV) scripts/setup_env.sh --extras

extras: $(VENV)/.ready
	@VENV=$(VENV) scripts/setup_env.sh --extras

# The suite in two parts: most files JOBS at a time (pytest-xdist, default 3; a file's tests stay in one process), then
# the files that time the harness against itself (marked serial) alone on the machine. Both parts always run; it
# fails if either fails, or if neither selected a test (pytest's exit 5, e.g. ARGS="-k typo"). ARGS takes -k, -x,
# --durations and the like; not -m or -n (set JOBS).
# The first part gives torch one thread a process (OMP_NUM_THREADS=1): 2 workers with a thread per core each
# spent 17.6 CPU-minutes where one thread each spent 14.3, on a 2-core host (10.6 -> 8.8 min); a third worker keeps
# both cores busy while a test waits on a hanging fixture or a timeout (8.7 -> 8.0 min). The serial part keeps the
# machine's thread count: test_trust checks that a variant's set_num_threads(1) does not reach its baseline.
# Bytecode is cached (PYTHONDONTWRITEBYTECODE unset, __pycache__ is git-ignored): the suite starts hundreds of
# Python processes, and each one compiling common/ and the chapters again cost about 0.5 s.
test: $(VENV)/.ready cuda-headers triton
	@unset PYTHONDONTWRITEBYTECODE; a=0; b=0; \
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(JOBS) --dist loadfile -m "not serial" tests $(ARGS) || a=$$?; \
	$(PY) -m pytest -q -m serial tests $(ARGS) || b=$$?; \
	if [ $$a -eq 5 ] && [ $$b -eq 5 ]; then echo "make test: no test selected"; exit 5; fi; \
	for rc in $$a $$b; do if [ $$rc -ne 0 ] && [ $$rc -ne 5 ]; then exit $$rc; fi; done

peaks: $(VENV)/.ready
	$(PY) benchmark.py --peaks

# Stops at the first chapter whose samples fail to build, with make's error (a sample that cannot be
# built is a failure, not something to skip).
cu:
	@set -e; for d in ch*/; do if [ -f $$d/Makefile ]; then $(MAKE) -C $$d; fi; done

$(VENV)/.ready: requirements.txt scripts/setup_env.sh
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/setup_env.sh

# cuBLAS and NVSHMEM headers for compiling the .cu samples where the CUDA toolkit lacks them
# (only when nvcc is present; the tests compile every .cu file).
# Each package is installed when its library is missing, whatever the other's state.
cuda-headers: $(VENV)/.ready
	@if command -v nvcc >/dev/null; then pkgs=""; \
	  $(PY) scripts/cuda_paths.py cublas >/dev/null 2>&1 || pkgs="$$pkgs nvidia-cublas"; \
	  $(PY) scripts/cuda_paths.py nvshmem >/dev/null 2>&1 || pkgs="$$pkgs nvidia-nvshmem-cu13"; \
	  if [ -n "$$pkgs" ]; then \
	    echo "installing$$pkgs (headers and libraries for the .cu compile check)"; \
	    $(PY) -m pip install -q $$pkgs; fi; fi

# Triton for the kernels' interpreter tests (TRITON_INTERPRET=1 runs them on a CPU): a CUDA build of torch
# brings its own; only where none is installed is this version added (never over torch's own pin).
triton: $(VENV)/.ready
	@$(PY) -c 'import triton' 2>/dev/null || { echo "installing triton (the Triton kernels' CPU interpreter tests)"; \
	  $(PY) -m pip install -q 'triton==3.9.0'; }

clean:
	@for d in ch*/; do if [ -f $$d/Makefile ]; then $(MAKE) -C $$d clean; fi; done
	rm -rf build .pytest_cache
