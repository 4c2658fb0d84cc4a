"""Build a chapter's CUDA kernels as a PyTorch extension once, then reuse the build.

torch.utils.cpp_extension.load compiles with nvcc and ninja into build/ext/<name>-sm<XY>/ and rebuilds only when
a source or flag changes; later processes (each pair runs in its own) import the cached library. benchmark.py
builds every extension the selected pairs load at once, in parallel, before the first pair starts
(`build_declared`), so no pair's wall time holds a compiler's. It finds them in the pair files'
`load_extension("name", "src", ...)` calls with literal arguments; any other call still builds on first use.

    python -m common.cuda_ext NAME SOURCE...    # build one (what build_declared runs)
"""
from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

import torch

from common.pair import REPO_ROOT


class ExtensionUnavailable(RuntimeError):
    """A kernel this machine cannot build or run (no GPU, no nvcc, too old a GPU): skipped, not failed (a
    variant alone; the whole pair when its baseline raises it)."""


def build_dir(name: str, capability: tuple[int, int]) -> Path:
    return REPO_ROOT / "build" / "ext" / f"{name}-sm{capability[0]}{capability[1]}"


@functools.lru_cache(maxsize=None)
def load_extension(name: str, *sources: str):
    from torch.utils import cpp_extension  # heavy (setuptools, ninja checks): only where a pair loads a kernel
    if not torch.cuda.is_available():
        raise ExtensionUnavailable(f"{name}: needs a CUDA GPU")
    if shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
        raise ExtensionUnavailable(f"{name}: nvcc not found; install the CUDA toolkit or set CUDA_HOME")
    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    build = build_dir(name, (major, minor))
    build.mkdir(parents=True, exist_ok=True)
    return cpp_extension.load(name=name, sources=[str(REPO_ROOT / s) for s in sources], build_directory=str(build),
                              extra_cuda_cflags=["-O3", "-std=c++17"], extra_cflags=["-O3"], verbose=False)


def declared(paths: Iterable[Path]) -> list[tuple[str, ...]]:
    """The extensions these files load: each `load_extension("name", "src", ...)` call with literal arguments,
    once, in the order first seen."""
    found: dict[tuple[str, ...], None] = {}   # in order, without repeats
    for path in paths:
        try:
            tree = ast.parse(Path(path).read_text())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            callee = getattr(node, "func", None)
            called = getattr(callee, "id", getattr(callee, "attr", None))   # f(...) or module.f(...)
            if (isinstance(node, ast.Call) and called == "load_extension" and node.args
                    and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)):
                found.setdefault(tuple(a.value for a in node.args))
    return list(found)


def up_to_date(spec: tuple[str, ...], capability: tuple[int, int]) -> bool:
    """Is the library newer than every source it is built from (ninja's own test, without starting torch)?"""
    name, *sources = spec
    lib = build_dir(name, capability) / f"{name}.so"
    try:
        built = lib.stat().st_mtime
        return all(f.stat().st_mtime < built for f in _inputs(sources))
    except OSError:
        return False


def _inputs(sources: list[str]) -> list[Path]:
    """The sources and the local headers they include (`#include "x.cuh"`), as ninja's depfile would list them."""
    seen: list[Path] = []
    todo = [REPO_ROOT / s for s in sources]
    while todo:
        f = todo.pop()
        if f in seen or (seen and not f.is_file()):  # a quoted include that is not a local file (a toolkit header)
            continue
        seen.append(f)
        text = f.read_text(errors="replace")
        todo += [f.parent / h for h in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M)]
    return seen


def build_declared(paths: Iterable[Path], capability: tuple[int, int], log: Callable[[str], None]) -> list[str]:
    """Build the extensions these pair files load, all at once, one process each; returns the names whose build
    failed (their pairs then fail at prepare() with the compiler's message, as they would have)."""
    todo = [s for s in declared(paths) if not up_to_date(s, capability)]
    if not todo:
        return []
    names = ", ".join(s[0] for s in todo)
    log(f"building {len(todo)} CUDA extension(s) at once ({names}): once, then cached in build/ext/")
    started = time.monotonic()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    procs = [subprocess.Popen([sys.executable, "-m", "common.cuda_ext", *spec], cwd=REPO_ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for spec in todo]
    failed = []
    for spec, proc in zip(todo, procs):
        out, _ = proc.communicate()
        if proc.returncode:
            failed.append(spec[0])
            last = [line for line in out.splitlines() if line.strip()][-1:] or ["no output"]
            log(f"  {spec[0]}: build failed ({last[0][:200]}); its pairs will say why")
    log(f"built in {time.monotonic() - started:.1f} s")
    return failed


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: python -m common.cuda_ext NAME SOURCE...", file=sys.stderr)
        sys.exit(2)
    try:
        load_extension(sys.argv[1], *sys.argv[2:])
    except ExtensionUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
