"""The shared benchmark harness: discover -> run (verify, time) -> report. Module by module, in the order a
run meets them: the README's "The harness, module by module" (tests/test_readme_and_profiling.py keeps it true)."""
from common.pair import BOUNDS, Workload  # noqa: F401 - what a pair file imports
from common.cli import run_pair_file  # noqa: F401 - `python chN/baseline_x.py` runs that file's pair
