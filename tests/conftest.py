import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT))


def bench(*args, timeout=600):
    """Run benchmark.py as a user would; returns the CompletedProcess."""
    return subprocess.run([sys.executable, str(ROOT / "benchmark.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def run_bench():
    return bench
