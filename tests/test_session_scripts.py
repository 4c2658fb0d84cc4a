"""The GPU session scripts (scripts/h100_*.sh, through scripts/steps.sh) under stand-ins for python3, make and
ncu that exit with the status they are told to: every step runs, a failed step fails the script and is named, and
a step that must exit non-zero (a fixture that holds a fault, a refused --pair) fails the script when it does not.
No GPU: the stand-ins stand for what each step would run there."""
import os
import subprocess

import pytest
from conftest import ROOT

# what the stand-in python3 exits with: a fixture run holding faults (chapter 92), a two-process pair asked for on
# one GPU, and anything else
FAKE_PYTHON = """#!/bin/sh
echo "fake python3 $*"
case "$*" in
  *"--chapter 92"*) exit ${FAKE_FIXTURE_RC:-1};;
  *"--pair ch91/allreduce"*) exit ${FAKE_SKIP_PAIR_RC:-2};;
esac
exit ${FAKE_PYTHON_RC:-0}
"""

SCRIPTS = {   # script: (the steps it logs, [(stand-ins' exit statuses, the script's exit status, failed steps)])
    "h100_ch11.sh": ({"probe_concurrency", "benchmark_ch11", "make_run", "escaped", "pytest_gpu"},
                     [({}, 0, ""), ({"FAKE_PYTHON_RC": "1"}, 1, "probe_concurrency benchmark_ch11 pytest_gpu"),
                      ({"FAKE_MAKE_RC": "2"}, 1, "make_run"), ({"FAKE_FIXTURE_RC": "0"}, 1, "escaped")]),
    "h100_ch1.sh": ({"benchmark_ch1", "performance_basics", "performance_basics_optimized", "roofline_analysis",
                     "make_run", "ncu_launch_bounds"},
                    [({}, 0, ""), ({"FAKE_MAKE_RC": "2"}, 1, "make_run"),
                     ({"FAKE_NCU_RC": "1"}, 1, "ncu_launch_bounds")]),
    "h100_trust.sh": ({"escape_rounds", "fixtures", "skip_chapter", "skip_pair"},
                      [({}, 0, ""), ({"FAKE_FIXTURE_RC": "0"}, 1, "fixtures"),
                       ({"FAKE_SKIP_PAIR_RC": "0"}, 1, "skip_pair"),
                       ({"FAKE_PYTHON_RC": "1"}, 1, "escape_rounds skip_chapter")]),
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_session_script_runs_every_step_and_fails_when_one_does(script, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(FAKE_PYTHON)
    for tool in ("make", "ncu"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "fake {tool} $*"\nexit ${{FAKE_{tool.upper()}_RC:-0}}\n')
    for tool in ("python3", "make", "ncu"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    steps, cases = SCRIPTS[script]
    for i, (given, expected, failed) in enumerate(cases):
        out = tmp_path / f"out{i}"
        proc = subprocess.run(["bash", str(ROOT / "scripts" / script), str(out)], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, env={**env, **given})
        assert proc.returncode == expected, (given, proc.stdout[-2000:], proc.stderr[-2000:])
        assert set(p.stem for p in (out / "logs").glob("*.log")) == steps, given
        named = [line for line in proc.stderr.splitlines() if line.startswith("failed:")]
        assert named == ([f"failed: {failed}"] if failed else []), (given, proc.stderr[-2000:])
