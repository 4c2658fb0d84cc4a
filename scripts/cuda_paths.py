#!/usr/bin/env python3
"""Print nvcc flags that find cuBLAS or NVSHMEM: the CUDA toolkit's copy if it has one,
else the pip packages nvidia-cublas / nvidia-nvshmem-cu13.

    python3 scripts/cuda_paths.py cublas     -> -I... -L... -l:libcublas.so.13 (or -lcublas)
    python3 scripts/cuda_paths.py nvshmem    -> -I... -L... (NVSHMEM's libraries)
Exits 1 with a one-line message when neither is found.
"""
import glob
import importlib.util
import os
import shutil
import sys
from pathlib import Path


def cuda_home() -> Path | None:
    nvcc = shutil.which("nvcc")
    if os.environ.get("CUDA_HOME"):
        return Path(os.environ["CUDA_HOME"])
    if nvcc:
        real = Path(nvcc).resolve()
        # /usr/local/bin/nvcc may be a wrapper script; look for the toolkit beside it
        for cand in [real.parent.parent, *map(Path, sorted(glob.glob("/usr/local/cuda*"), reverse=True))]:
            if (cand / "include" / "cuda_runtime.h").exists():
                return cand
    return None


def pip_dirs(pkg: str, header: str):
    """(include, lib) folders of a pip package under site-packages/nvidia that holds `header`."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    for root in roots:
        for inc in glob.glob(os.path.join(root, "*", "include", header)):
            base = Path(inc).parent.parent
            return base / "include", base / "lib"
    return None


def main(which: str) -> int:
    home = cuda_home()
    if which == "cublas":
        if home and (home / "include" / "cublas_v2.h").exists():
            print("-lcublas")
            return 0
        dirs = pip_dirs("cublas", "cublas_v2.h")
        if dirs:
            print(f"-I{dirs[0]} -L{dirs[1]} -Xlinker -rpath={dirs[1]} -l:libcublas.so.13 -l:libcublasLt.so.13")
            return 0
        print("error: cuBLAS not found (install the CUDA toolkit's cuBLAS or `pip install nvidia-cublas`)", file=sys.stderr)
        return 1
    if which == "nvshmem":
        for cand in ([home / "include"] if home else []) + [Path("/usr/include/nvshmem")]:
            if (cand / "nvshmem.h").exists():
                print(f"-I{cand}")
                return 0
        dirs = pip_dirs("nvshmem", "nvshmem.h")
        if dirs:
            print(f"-I{dirs[0]} -L{dirs[1]} -Xlinker -rpath={dirs[1]}")
            return 0
        print("error: NVSHMEM not found (`pip install nvidia-nvshmem-cu13`)", file=sys.stderr)
        return 1
    print(f"error: unknown library {which!r}; choose cublas or nvshmem", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
