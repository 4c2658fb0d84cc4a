"""The same tensor-parallel step with every all-reduce a one-shot all-reduce on symmetric memory
(torch.ops.symm_mem.one_shot_all_reduce): each rank reads the peer's 4 KiB directly over NVLink and
sums, synchronized through signal pads instead of NCCL's protocol; the step is still one CUDA graph.
The symmetric buffers (one per message shape) and their rendezvous are prepared once."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.baseline_tp_decode import tp_step

DEVICES = ("cuda",)


def prepare(w):
    return tp_step(w, "symm")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
