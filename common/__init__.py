"""The shared benchmark harness: discover -> run (verify, time) -> report. Module by module, in the order a
run meets them: the README's "The harness, module by module" (tests/test_readme_and_profiling.py keeps it true).

Importing `common` imports no torch: the report side (results, report, figures, verdict) reads and compares
reports without it (tests/test_report_figures.py checks)."""
from common.pair import BOUNDS, Workload  # noqa: F401 - what a pair file imports


def run_pair_file(path: str, argv=None) -> None:
    """What `python chN/baseline_x.py` does: run that file's pair and print its comparison (common.cli)."""
    from common.cli import run_pair_file as run  # the command line: torch and the whole harness, only here
    run(path, argv)
