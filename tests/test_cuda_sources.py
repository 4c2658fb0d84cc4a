"""Every .cu file in the repository compiles (and links) with nvcc for sm_90: here, except chapter 4's NVSHMEM
samples, which tests/test_ch4_cuda.py builds and links the way a reader does (make -C ch4 nvshmem)."""
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, run_script

ALL_SOURCES = sorted(p for p in ROOT.rglob("*.cu") if ".venv" not in p.parts and "build" not in p.parts)


def makefile_samples(folder) -> list[str]:
    """The names a folder's Makefile lists in SAMPLES ([] without a Makefile or a SAMPLES line)."""
    make = folder / "Makefile"
    found = re.search(r"^SAMPLES\s*:?=(.*)$", make.read_text(), re.M) if make.exists() else None
    return found.group(1).split() if found else []


# chapter 4's samples (its Makefile's SAMPLES: the NVSHMEM ones), built and linked by make in test_ch4_cuda.py
BUILT_BY_TEST_CH4_CUDA = {ROOT / "ch4" / f"{name}.cu" for name in makefile_samples(ROOT / "ch4")}
SOURCES = [p for p in ALL_SOURCES if p not in BUILT_BY_TEST_CH4_CUDA]
NVCC = shutil.which("nvcc")


def flags_for(src) -> list[str]:
    """cuBLAS's include and library flags for a file that includes it (scripts/cuda_paths.py)."""
    text = src.read_text()
    if "#include <cublas" not in text and '#include "cublas' not in text:
        return []
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "cuda_paths.py"), "cublas"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_every_chapter_cuda_source_is_a_sample_or_an_extension():
    """Each chapter's .cu file is built by something a reader runs: a sample its chapter's Makefile lists
    (SAMPLES), or an extension a pair loads (load_extension); the compile check below covers every one (chapter
    4's NVSHMEM samples: test_ch4_cuda.py, through make)."""
    from common.cuda_ext import declared
    chapter_cu = sorted(p for p in ALL_SOURCES if re.fullmatch(r"ch\d+", p.parent.name))
    assert chapter_cu
    loaded = {ROOT / src for spec in declared(sorted(ROOT.glob("ch*/*.py"))) for src in spec[1:] if src.endswith(".cu")}
    for src in chapter_cu:
        assert src.stem in makefile_samples(src.parent) or src in loaded, \
            f"{src.relative_to(ROOT)}: no Makefile sample and no pair loads it"


def test_every_nvshmem_source_is_built_by_make_in_test_ch4_cuda():
    """The compile check below passes no NVSHMEM flags: a file that includes NVSHMEM is one of ch4's samples."""
    nvshmem = {p for p in ALL_SOURCES if "#include <nvshmem" in p.read_text()}
    assert nvshmem and nvshmem <= BUILT_BY_TEST_CH4_CUDA, sorted(map(str, nvshmem - BUILT_BY_TEST_CH4_CUDA))


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("src", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_cu_compiles(src, tmp_path):
    text = src.read_text()
    # A file with a main() is a program: compile and link it. Otherwise (a torch extension's kernels) compile only.
    is_program = "int main(" in text
    out = tmp_path / (src.stem + (".bin" if is_program else ".o"))
    # a sample with Hopper-only instructions (wgmma, setmaxnreg) guards them with __CUDA_ARCH_FEAT_SM90_ALL: build
    # it for sm_90a, so that they are compiled here too (its Makefile does the same)
    arch = "sm_90a" if "__CUDA_ARCH_FEAT_SM90_ALL" in text else "sm_90"
    cmd = [NVCC, "-std=c++17", "-O2", f"-arch={arch}", f"-I{ROOT / 'common' / 'cuda'}", str(src), "-o", str(out)]
    if not is_program:
        cmd.insert(1, "-c")
    proc = subprocess.run(cmd + flags_for(src), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


# ---- the build tooling around the samples: top-level Makefile and scripts ---------------------------

def _top_makefile_copy(tmp_path):
    """The repository's Makefile in an empty folder, with a ready (fake) .venv whose python logs its calls."""
    import shutil as sh
    sh.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "requirements.txt").write_text("")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup_env.sh").write_text("#!/bin/sh\n")
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    log = tmp_path / "calls.log"
    # cuda_paths.py exits with $CUBLAS_RC or $NVSHMEM_RC; anything else (pip) is logged.
    (venv / "python").write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        '  *cuda_paths.py\\ cublas*) exit ${CUBLAS_RC:-0};;\n'
        '  *cuda_paths.py\\ nvshmem*) exit ${NVSHMEM_RC:-0};;\n'
        f'  *) echo "$*" >> {log};;\n'
        "esac\n")
    (venv / "python").chmod(0o755)
    (tmp_path / ".venv" / ".ready").touch()
    fake_nvcc = tmp_path / "tools"
    fake_nvcc.mkdir()
    (fake_nvcc / "nvcc").write_text("#!/bin/sh\nexit 0\n")
    (fake_nvcc / "nvcc").chmod(0o755)
    return log, f"{fake_nvcc}:/usr/bin:/bin"


@pytest.mark.parametrize("cublas_rc,nvshmem_rc,expected", [
    (1, 0, "-m pip install -q nvidia-cublas"),              # the case `a && !b || a && !c` got wrong
    (0, 1, "-m pip install -q nvidia-nvshmem-cu13"),
    (1, 1, "-m pip install -q nvidia-cublas nvidia-nvshmem-cu13"),
    (0, 0, None),
])
def test_cuda_headers_installs_each_missing_library(tmp_path, cublas_rc, nvshmem_rc, expected):
    import os
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    log, path = _top_makefile_copy(tmp_path)
    env = {**os.environ, "PATH": path, "CUBLAS_RC": str(cublas_rc), "NVSHMEM_RC": str(nvshmem_rc)}
    proc = subprocess.run(["make", "-C", str(tmp_path), "cuda-headers"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines() if log.exists() else []
    assert calls == ([expected] if expected else []), calls


def test_make_cu_fails_when_a_chapter_fails_to_build(tmp_path):
    import os
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    _, path = _top_makefile_copy(tmp_path)
    for name, rule in (("ch1", "\tfalse"), ("ch2", "\ttouch built")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Makefile").write_text(f"all:\n{rule}\n")
    proc = subprocess.run(["make", "-C", str(tmp_path), "cu"], capture_output=True, text=True,
                          env={**os.environ, "PATH": path}, timeout=60)
    assert proc.returncode != 0, "make cu must fail when a chapter's samples fail to build"
    (tmp_path / "ch1" / "Makefile").write_text("all:\n\ttrue\n")
    proc = subprocess.run(["make", "-C", str(tmp_path), "cu"], capture_output=True, text=True,
                          env={**os.environ, "PATH": path}, timeout=60)
    assert proc.returncode == 0 and (tmp_path / "ch2" / "built").exists(), proc.stderr


def test_probe_concurrency_is_a_script_that_explains_a_missing_gpu():
    """Importing it runs nothing; run without a GPU it exits 2 with one line."""
    import importlib
    import torch
    importlib.import_module("ch11.probe_concurrency")  # must not start measuring
    helped = run_script(ROOT / "ch11" / "probe_concurrency.py", "--help", timeout=120, cwd="/")  # measures nothing
    assert helped.returncode == 0 and "8 streams" in helped.stdout and "ms," not in helped.stdout, helped.stderr
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the probe would measure")
    proc = run_script(ROOT / "ch11" / "probe_concurrency.py", timeout=120, cwd="/")
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "needs a CUDA GPU" in proc.stderr
