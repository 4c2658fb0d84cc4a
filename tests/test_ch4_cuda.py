"""Chapter 4's NVSHMEM samples compile and link (make -C ch4 nvshmem), where nvcc and NVSHMEM are present.

Running them needs two GPUs and a launcher (scripts/nvshmem_launch_multinode.sh); that is the
2-GPU session's job (scripts/h200x2_ch4.sh).
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def nvshmem_missing() -> str | None:
    if shutil.which("nvcc") is None:
        return "nvcc is not installed"
    if shutil.which("make") is None:
        return "make is not installed"
    found = subprocess.run([sys.executable, str(ROOT / "scripts" / "cuda_paths.py"), "nvshmem"], capture_output=True,
                           text=True)
    return None if found.returncode == 0 else f"NVSHMEM not found ({found.stderr.strip()})"


@pytest.mark.skipif(nvshmem_missing() is not None, reason=str(nvshmem_missing()))
def test_nvshmem_samples_compile_and_link(tmp_path):
    proc = subprocess.run(["make", "-C", str(ROOT / "ch4"), "-j2", "nvshmem", "ARCH=sm_90", f"BIN={tmp_path}",
                           f"PYTHON={sys.executable}"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for name in ("nvshmem_pipeline_patterns", "nvshmem_multinode_example"):
        binary = tmp_path / f"{name}_sm90"
        assert binary.exists() and binary.stat().st_size > 0, name
        # linked against NVSHMEM's host library, which the binary finds through its rpath
        ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
        assert "libnvshmem_host.so" in ldd.stdout and "not found" not in ldd.stdout.split("libnvshmem_host")[1].split("\n")[0], ldd.stdout
        # started by hand, with no launcher's variables: one line that names the launch script, exit 2,
        # before NVSHMEM's own failure deep inside nvshmem_init ("status 7"); no GPU is touched
        bare = {k: v for k, v in os.environ.items() if not k.startswith(("NVSHMEM_", "OMPI_", "PMI", "SLURM_"))}
        run = subprocess.run([str(binary)], env=bare, capture_output=True, text=True, timeout=60)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and len(lines) == 1 and "nvshmem_launch_multinode.sh" in lines[0], run.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("make") is None, reason="needs nvcc and make")
def test_missing_nvshmem_is_one_line_naming_the_python_to_install_it_into(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")  # cuda_paths.py finds no NVSHMEM
    fake.chmod(0o755)
    proc = subprocess.run(["make", "-C", str(ROOT / "ch4"), "nvshmem", "ARCH=sm_90", f"BIN={tmp_path}",
                           f"PYTHON={fake}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"{fake} -m pip install nvidia-nvshmem-cu13" in errors[0], proc.stderr
