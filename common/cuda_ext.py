"""Build a chapter's CUDA kernels as a PyTorch extension once, then reuse the build.

torch.utils.cpp_extension.load compiles with nvcc and ninja into
build/ext/<name>/ and rebuilds only when a source or flag changes; later
processes (each pair runs in its own) import the cached library.
"""
from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

from common.pair import REPO_ROOT


class ExtensionUnavailable(RuntimeError):
    pass


@functools.lru_cache(maxsize=None)
def load_extension(name: str, *sources: str):
    import torch
    from torch.utils import cpp_extension

    if not torch.cuda.is_available():
        raise ExtensionUnavailable(f"{name}: needs a CUDA GPU")
    if shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
        raise ExtensionUnavailable(f"{name}: nvcc not found; install the CUDA toolkit or set CUDA_HOME")
    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    build = REPO_ROOT / "build" / "ext" / f"{name}-sm{major}{minor}"
    build.mkdir(parents=True, exist_ok=True)
    return cpp_extension.load(name=name, sources=[str(REPO_ROOT / s) for s in sources], build_directory=str(build),
                              extra_cuda_cflags=["-O3", "-std=c++17"], extra_cflags=["-O3"], verbose=False)
