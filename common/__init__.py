"""The shared benchmark harness: discover -> run (verify, time) -> report.

    common.pair       the contract a pair file follows
    common.discover   finds chapters and pairs by file name
    common.verify     compares outputs with dtype-aware tolerances
    common.timing     CUDA-event timing with warm-up, L2 scrubbing and a wall-clock cross-check
    common.peaks      measures and caches the device's ceilings
    common.run        verifies and times one pair, in its own process
    common.launch     starts those processes, with timeouts, and collects results
    common.report     results.json, summary.md, figures, --compare
    common.cli        the command line of benchmark.py and of a pair file, and the order of a run
    common.host       the host CPU a run happened on
    common.profiling  torch.profiler / nsys / ncu wrappers
"""
from common.pair import BOUNDS, Workload  # noqa: F401


def run_pair_file(path: str, argv=None) -> None:
    """What `python chN/baseline_x.py` does: run that file's pair and print its comparison (common.cli)."""
    from common.cli import run_pair_file as run
    run(path, argv)
