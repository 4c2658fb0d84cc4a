"""What no variant may change: the harness's own functions, the clocks, and torch's functions.

A variant runs in the harness's process, so it could patch the clock the harness reads, the function that verifies
it, or `torch.Tensor.__matmul__` to slow the baseline down. Every such function is recorded before any pair file is
imported, checked after each step, and put back (README.md, "How we measure")."""
from __future__ import annotations

import inspect
import sys
import time

import torch

HARNESS_PREFIX = "common."  # every module of the harness that is loaded
LIBRARIES = (("time", time), ("torch", torch), ("torch.Tensor", torch.Tensor),
             ("torch.nn.functional", torch.nn.functional), ("torch.cuda", torch.cuda))


def _entries():
    """(owner, attribute name, shown name) for every function watched."""
    for modname, mod in list(sys.modules.items()):
        if modname.startswith(HARNESS_PREFIX) and mod is not None:
            for k, v in list(vars(mod).items()):
                if inspect.isfunction(v) and v.__module__ == modname:
                    yield mod, k, f"{modname}.{k}"
    for shown, owner in LIBRARIES:
        for k in dir(owner):
            try:
                v = inspect.getattr_static(owner, k)
            except AttributeError:
                continue
            if inspect.isroutine(v) or isinstance(v, (staticmethod, classmethod)):
                yield owner, k, f"{shown}.{k}"


def _wraps(new, old) -> bool:
    """Is `new` a functools.wraps-style wrapper around `old` (a library's own decoration)?"""
    for _ in range(8):
        new = getattr(new, "__wrapped__", None)
        if new is old:
            return True
    return False


class Snapshot:
    """The watched functions as they are now: each object and, for Python functions, its code."""

    def __init__(self):
        self.saved = {}
        for owner, k, shown in _entries():
            v = inspect.getattr_static(owner, k)
            self.saved[shown] = (owner, k, v, getattr(v, "__code__", None))

    def changed(self) -> list[str]:
        out = []
        for shown, (owner, k, v, code) in list(self.saved.items()):
            now = inspect.getattr_static(owner, k, None)
            if now is v and getattr(now, "__code__", None) is code:
                continue
            if now is not v and _wraps(now, v):  # torch wraps some functions on first use (torch._dynamo)
                self.saved[shown] = (owner, k, now, getattr(now, "__code__", None))
                continue
            out.append(shown)
        return out

    def restore(self) -> None:
        for owner, k, v, code in self.saved.values():
            if code is not None and getattr(v, "__code__", None) is not code:
                v.__code__ = code
            if inspect.getattr_static(owner, k, None) is not v:
                setattr(owner, k, v)
