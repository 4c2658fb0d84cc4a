"""Every .cu file in the repository compiles (and links) with nvcc for sm_90."""
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

SOURCES = sorted(p for p in ROOT.rglob("*.cu") if ".venv" not in p.parts and "build" not in p.parts)
NVCC = shutil.which("nvcc")


def flags_for(src) -> list[str]:
    text = src.read_text()
    flags = []
    for lib in ("cublas", "nvshmem"):
        if f"{lib}" in text and (f"#include <{lib}" in text or f'#include "{lib}' in text):
            out = subprocess.run([sys.executable, str(ROOT / "scripts" / "cuda_paths.py"), lib],
                                 capture_output=True, text=True)
            assert out.returncode == 0, out.stderr
            flags += out.stdout.split()
    return flags


def test_there_are_cuda_sources():
    assert SOURCES, "no .cu files found"


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("src", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_cu_compiles(src, tmp_path):
    text = src.read_text()
    # A file with a main() is a program: compile and link it. Otherwise (a torch extension's kernels) compile only.
    is_program = "int main(" in text
    out = tmp_path / (src.stem + (".bin" if is_program else ".o"))
    cmd = [NVCC, "-std=c++17", "-O2", "-arch=sm_90", f"-I{ROOT / 'common' / 'cuda'}", str(src), "-o", str(out)]
    if not is_program:
        cmd.insert(1, "-c")
    if "nvshmem" in text and "#include <nvshmem" in text:
        cmd += ["-rdc=true"]
    proc = subprocess.run(cmd + flags_for(src) + (["-lnvshmem_host", "-lnvshmem_device"] if "#include <nvshmem" in text else []),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
