"""The same tensor-parallel step with every all-reduce a one-shot all-reduce on symmetric memory
(torch.ops.symm_mem.one_shot_all_reduce): each rank reads the peer's 4 KiB directly over NVLink and
sums, synchronized through signal pads instead of NCCL's protocol; the step is still one CUDA graph.
The symmetric buffers (one per message shape) and their rendezvous are prepared once.

Measured on 2 H200s (profiles/h200x2/ch16-6a47edb): 1.011x (1.006-1.016), 2.516 against 2.542 ms. Alone,
the 32 all-reduces of a step take 7.19 µs each against NCCL's 14.41 µs, but in the step each adds 7.68 µs
against NCCL's 8.31: NCCL's kernel itself is as fast (6.0 µs) and the gaps between its kernels in a graph of
all-reduces alone do not appear in the step (tp_decode_breakdown.py). With each layer compiled (332 kernels
instead of 892) the two are level, 0.998x: the step's own kernels, not its all-reduces, set its time here."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.baseline_tp_decode import tp_step

DEVICES = ("cuda",)


def prepare(w):
    return tp_step(w, "symm")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
