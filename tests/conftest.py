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
# suite's own (inherited by every process it starts), never to the user's profiles/peaks/.
os.environ["PERF_PEAKS_DIR"] = tempfile.mkdtemp(prefix="test-peaks-")


def bench(*args, timeout=600):
    """Run benchmark.py as a user would; returns the CompletedProcess."""
    return subprocess.run([sys.executable, str(ROOT / "benchmark.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def run_bench():
    return bench
