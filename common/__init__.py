"""The shared benchmark harness: discover -> run (verify, time) -> report.

    common.pair          the contract a pair file follows
    common.discover      finds chapters and pairs by file name
    common.inputs        each variant's own copy of the workload; feeding new per-call values
    common.verify        compares outputs with tolerances from measurement
    common.decode_check  the logits-and-margin rule for free-running decoders
    common.numerics      torch's numerics flags: one state per variant, checked and restored
    common.integrity     the harness's, the clocks' and torch's functions: checked and restored
    common.timing        CUDA-event timing with warm-up, L2 scrubbing, the rounds' wall-clock check,
                         and the fed loops of the reuse check
    common.physics       achieved rates, shares of the ceilings, and the SUSPECT floors
    common.peaks         measures and caches the device's ceilings (common.peaks_collective: NCCL's)
    common.overlap       serial and ideal times of overlap pairs
    common.run           verifies and times one pair, in its own process
    common.launch        starts those processes, with timeouts, and collects results
    common.report        results.json, summary.md, --compare (common.figures: the figures)
    common.verdict       what a variant far from its ceiling should try next
    common.cli           the command line of benchmark.py and of a pair file, and the order of a run
    common.host          the host CPU a run happened on
    common.profiling     torch.profiler / nsys / ncu wrappers, kernel counts
"""
from common.pair import BOUNDS, Workload  # noqa: F401


def run_pair_file(path: str, argv=None) -> None:
    """What `python chN/baseline_x.py` does: run that file's pair and print its comparison (common.cli)."""
    from common.cli import run_pair_file as run
    run(path, argv)
