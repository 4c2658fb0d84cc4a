# samples.mk: the build rules every chapter's Makefile includes. A chapter sets
#   SAMPLES := name1 name2          (one name.cu each)
#   LIBS_name1 := ...               (extra link flags for one sample, optional)
#   FLAGS_name1 := ...              (extra nvcc flags for one sample, optional; e.g. -Xptxas -v)
#   ARCH_name1 := ...               (the architecture for one sample in place of ARCH, optional; e.g. sm_90a)
#   NEEDS_CUBLAS := name1 ...       (the samples that link cuBLAS, optional; set before the include)
# and gets: make (build for the detected GPU; ARCH=sm_90 to choose), make name1 (one sample),
# make run, make clean. Binaries carry the architecture: bin/name1_sm90.
NVCC   ?= nvcc
PYTHON ?= $(if $(wildcard ../.venv/bin/python),../.venv/bin/python,python3)
ifneq ($(MAKECMDGOALS),clean)  # cleaning needs no compiler
ifeq ($(shell command -v $(NVCC) 2>/dev/null),)
$(error nvcc not found: install the CUDA toolkit or set NVCC=/path/to/nvcc)
endif
endif
# The visible GPU's compute capability, else sm_90 (Hopper) when no GPU is visible.
ARCH   ?= sm_$(or $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d .),90)
SUFFIX := $(subst sm_,sm,$(ARCH))
FLAGS  := -std=c++17 -O3 -arch=$(ARCH) -I../common/cuda
# The samples that need cuBLAS last: without it, every other sample is built before the one-line error.
ORDERED := $(filter-out $(NEEDS_CUBLAS),$(SAMPLES)) $(filter $(NEEDS_CUBLAS),$(SAMPLES))
BINS   := $(addprefix bin/,$(addsuffix _$(SUFFIX),$(ORDERED)))

.PHONY: all run clean $(SAMPLES)
all: $(BINS)

# `make name` builds bin/name_<arch> (the binary keeps the architecture in its name).
$(SAMPLES): %: bin/%_$(SUFFIX)

# Every sample depends on the shared header and the chapter's own headers (kernels a sample shares
# with a pair's extension live in a .cuh beside it).
bin/%_$(SUFFIX): %.cu ../common/cuda/cuda_check.cuh $(wildcard *.cuh)
	@mkdir -p bin
	$(NVCC) $(if $(ARCH_$*),$(filter-out -arch=%,$(FLAGS)) -arch=$(ARCH_$*),$(FLAGS)) $(FLAGS_$*) $< -o $@ $(LIBS_$*)

# Without a GPU a sample's first CUDA call fails with a driver message; say what is missing instead.
run: all
	@nvidia-smi -L >/dev/null 2>&1 || { echo "error: make run needs an NVIDIA GPU: nvidia-smi lists none (or is not" \
	  "installed); the samples are built in $(CURDIR)/bin" >&2; exit 2; }
	@set -e; for b in $(BINS); do echo "== $$b"; ./$$b; done

clean:
	rm -rf bin

# cuBLAS for the samples in NEEDS_CUBLAS: the CUDA toolkit's, else the pip package nvidia-cublas. Where neither is
# found, building one of them stops with one line that says what to install.
ifneq ($(NEEDS_CUBLAS),)
PY_SHOWN := $(if $(findstring /,$(PYTHON)),$(abspath $(PYTHON)),$(PYTHON))
CUBLAS := $(shell $(PYTHON) ../scripts/cuda_paths.py cublas 2>/dev/null)
$(foreach s,$(NEEDS_CUBLAS),$(eval LIBS_$(s) += $$(CUBLAS)))
ifeq ($(CUBLAS),)
$(foreach s,$(NEEDS_CUBLAS),bin/$(s)_$(SUFFIX)): cublas-missing
endif
.PHONY: cublas-missing
cublas-missing:
	@echo "error: $(NEEDS_CUBLAS) need$(if $(word 2,$(NEEDS_CUBLAS)),,s) cuBLAS, which neither the CUDA toolkit nor $(PY_SHOWN)'s packages have; install it with: $(PY_SHOWN) -m pip install nvidia-cublas" >&2; exit 1
endif
