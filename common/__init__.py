"""The shared benchmark harness: discover -> run (verify, time) -> report.

    common.pair       the contract a pair file follows
    common.discover   finds chapters and pairs by file name
    common.verify     compares outputs with dtype-aware tolerances
    common.timing     CUDA-event timing with warm-up, L2 scrubbing and a wall-clock cross-check
    common.peaks      measures and caches the device's ceilings
    common.run        verifies and times one pair, in its own process
    common.launch     starts those processes, with timeouts, and collects results
    common.report     results.json, summary.md, figures, --compare
    common.profiling  torch.profiler / nsys / ncu wrappers
"""
from common.pair import BOUNDS, Workload  # noqa: F401


def run_pair_file(path: str, argv=None) -> int:
    """What `python chN/baseline_x.py` does: run that file's pair through benchmark.py's machinery."""
    import sys
    from pathlib import Path

    from benchmark import main

    p = Path(path).resolve()
    name = p.stem.split("_", 1)[1]
    chapter = int(p.parent.name[2:])
    # The pair name is the baseline's: an optimized file may carry a suffix.
    from common.discover import pair_files
    for pname in pair_files(p.parent):
        if name == pname or name.startswith(pname + "_"):
            name = pname
            break
    args = ["--chapter", str(chapter), "--pair", name, "--no-report"] + list(argv if argv is not None else sys.argv[1:])
    return sys.exit(main(args))
