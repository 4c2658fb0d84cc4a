"""`make bench` installs requirements-cuda-extras.txt (torchao, GemLite) only on a CUDA torch, once, with
--no-deps, and goes on when they fail; `make test` never installs them. The repository's Makefile and
scripts/setup_env.sh run against a fake .venv whose python logs its calls (no network, no pip)."""
import os
import shutil
import subprocess

import pytest

from conftest import ROOT

CPU, CUDA = "2.13.0+cpu -", "2.11.0+cu130 13.0"   # what setup_env.sh's torch check prints


@pytest.fixture
def repo(tmp_path):
    if shutil.which("make") is None or shutil.which("bash") is None:
        pytest.skip("make or bash is not installed")
    for name in ("Makefile", "requirements.txt", "requirements-cuda-extras.txt", "scripts/setup_env.sh"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    log = tmp_path / "calls.log"
    # The torch check prints $TORCH; pip exits with $PIP_RC, `-c import X` with $IMPORT_RC; all else is logged.
    (venv / "python").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        'case "$*" in\n'
        '  *torch.version.cuda*) echo "$TORCH";;\n'
        '  "-m pip install"*) exit ${PIP_RC:-0};;\n'
        '  "-c import "*) exit ${IMPORT_RC:-0};;\n'
        "esac\n")
    (venv / "python").chmod(0o755)
    (tmp_path / ".venv" / ".ready").touch()   # set up already: only the extras step and the run are left
    return tmp_path, log


def make(repo, *args, **env):
    path, log = repo
    # the Makefile's own variables too: `make test ARGS=--durations=10` puts ARGS in this process's environment
    own = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "EXTRAS", "ARGS", "JOBS", "VENV", "PYTHON")
    clean = {k: v for k, v in os.environ.items() if k not in own}
    proc = subprocess.run(["make", "-C", str(path), *args], capture_output=True, text=True, timeout=60,
                          env={**clean, **env})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return proc.stdout, calls


def pip_installs(calls):
    return [c for c in calls if c.startswith("-m pip install")]


def test_bench_on_a_cpu_torch_skips_the_extras_with_one_line(repo):
    out, calls = make(repo, "bench", TORCH=CPU)
    assert not pip_installs(calls), calls
    assert [line for line in out.splitlines() if line.startswith("extras:")] == [
        "extras: torchao and GemLite not installed (torch 2.13.0+cpu is not a CUDA build; they are CUDA-only)"]
    assert any("benchmark.py" in c for c in calls)
    assert (repo[0] / ".venv" / ".extras").read_text().startswith("skipped:")


def test_bench_on_a_cuda_torch_goes_on_when_the_extras_fail_and_tries_once(repo):
    out, calls = make(repo, "bench", TORCH=CUDA, PIP_RC="1")
    wanted = [line.split("#")[0].strip() for line in (ROOT / "requirements-cuda-extras.txt").read_text().splitlines()]
    wanted = [w for w in wanted if w]
    assert [c.split()[-1] for c in pip_installs(calls)] == wanted
    assert all("--no-deps" in c for c in pip_installs(calls)), calls          # pip never resolves torch
    assert not {w.split("=")[0] for w in wanted} & {"torch", "triton"}
    for w in wanted:
        assert any(line.startswith(f"warning: {w} did not install") and "make extras" in line
                   for line in out.splitlines()), out
    assert calls[-1].endswith("benchmark.py"), calls                           # the run still happens
    assert make(repo, "bench", TORCH=CUDA)[1] == ["benchmark.py"]              # the stamp: not retried
    assert len(pip_installs(make(repo, "extras", TORCH=CUDA)[1])) == len(wanted)  # `make extras` retries


def test_a_package_that_does_not_import_is_removed(repo):
    out, calls = make(repo, "extras", TORCH=CUDA, IMPORT_RC="1")
    assert any(c.startswith("-m pip uninstall -q -y torchao") for c in calls), calls
    assert "failed: torchao==" in (repo[0] / ".venv" / ".extras").read_text()


def test_extras_0_and_make_test_never_install_them(repo):
    _, calls = make(repo, "bench", TORCH=CUDA, EXTRAS="0")
    assert calls == ["benchmark.py"]
    out, _ = make(repo, "-n", "test", TORCH=CUDA)
    assert "--extras" not in out and "pytest" in out
