"""NVTX ranges with or without the `nvtx` package: `nvtx` (pip) if installed, else `torch.cuda.nvtx`
(announced once), and nothing on a machine without CUDA."""
from __future__ import annotations

import contextlib
import sys

import torch

_said = False


def _say_once(msg: str) -> None:
    global _said
    if not _said:
        print(msg, file=sys.stderr)
        _said = True


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
