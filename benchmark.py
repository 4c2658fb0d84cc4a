#!/usr/bin/env python3
"""Run the chapters' baseline/optimized pairs: verify, time, report.

    python benchmark.py --help

The command line and the order of a run are in common/cli.py; this file only
makes sure the interpreter running it has the dependencies.
"""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Before anything imports them: the system Python without .venv should get one line, not a traceback.
_missing = [m for m in ("torch", "numpy") if importlib.util.find_spec(m) is None]
if _missing:
    print(f"error: {' and '.join(_missing)} {'is' if len(_missing) == 1 else 'are'} not installed for "
          f"{sys.executable}; run 'make bench' (it sets up .venv) or activate .venv "
          f"(source .venv/bin/activate)", file=sys.stderr)
    sys.exit(2)

from common.cli import build_parser, main  # noqa: E402,F401  (ch1/compare.py imports main from here)

if __name__ == "__main__":
    sys.exit(main())
