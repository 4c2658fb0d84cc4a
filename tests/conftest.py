import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT))

# Ceilings measured while the suite loads the machine are too low: they go to a folder of the
# suite's own (inherited by every process it starts), never to the user's profiles/peaks/. Under
# pytest-xdist (`make test`) the controller picks the folder and its workers inherit it.
if "PYTEST_XDIST_WORKER" not in os.environ or not os.environ.get("PERF_PEAKS_DIR"):
    os.environ["PERF_PEAKS_DIR"] = tempfile.mkdtemp(prefix="test-peaks-")


def pytest_configure(config):
    config.addinivalue_line("markers", "serial: times the harness against itself; `make test` runs these files "
                                       "alone on the machine, after the others")
    if (getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ
            and not config.option.collectonly):
        # Before the workers load the machine: the CPU's ceilings, once, for all of them. Measured under the
        # workers' load they would read low, and a pair timed a moment later on an idle core would read
        # faster than its ceiling (SUSPECT). Load after this only makes a pair slower.
        try:
            proc = bench("--peaks", "--device", "cpu", timeout=300)
        except subprocess.TimeoutExpired:
            raise pytest.UsageError("measuring the CPU's ceilings took over 300 s") from None
        if proc.returncode != 0:
            raise pytest.UsageError(f"measuring the CPU's ceilings failed: {proc.stderr.strip()[-500:]}")


def bench(*args, timeout=600):
    """Run benchmark.py as a user would; returns the CompletedProcess."""
    return subprocess.run([sys.executable, str(ROOT / "benchmark.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def run_bench():
    return bench
