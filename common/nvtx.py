"""NVTX ranges with or without the `nvtx` package: `nvtx` (pip) if installed, else `torch.cuda.nvtx`
(announced once), and nothing on a machine without CUDA."""
from __future__ import annotations

import contextlib
import functools
import sys

import torch


@functools.lru_cache(maxsize=None)
def _say_once(msg: str) -> None:
    print(msg, file=sys.stderr)


@contextlib.contextmanager
def range(name: str):  # noqa: A001 - mirrors nvtx.annotate / torch.cuda.nvtx.range
    try:
        import nvtx as _nvtx  # optional (pip install nvtx)
        with _nvtx.annotate(name):
            yield
        return
    except ImportError:
        pass
    if torch.cuda.is_available():
        _say_once("nvtx package not installed: using torch.cuda.nvtx for ranges")
        with torch.cuda.nvtx.range(name):
            yield
    else:
        yield
