"""The fix for a thin last wave: a persistent grid that splits the last wave's tiles along K.

One program per SM (132 on an H100) walks the tiles pid, pid + 132, ... for the full waves, exactly as
the baseline's programs would. The 12 tiles left over (144 = 132 + 12) are not given to 12 SMs for a
whole tile's time: each is split along K over 132 // 12 = 11 programs, which add their slice's sums into
one fp32 tile in L2 (atomic adds); the last of a tile's 11 to finish (an atomic count) reads the total,
applies the epilogue and stores the tile. The second wave then costs 1/11 of a tile plus the additions,
not a whole tile. It is the data-parallel + Stream-K hybrid of CUTLASS and cuBLAS, in
ch13/triton_kernels.py (_persistent_gemm_kernel, SPLIT_TAIL); where the tiles fill whole waves there is
nothing to split and PersistentGemm launches the kernel without it.

Persistence is what makes the split possible (the programs know the wave count and which work is left),
not what makes it fast: without the split (ch13/optimized_persistent_gemm_plain.py) the same persistent
grid is no faster than one program per tile.

Measured on the H100, launched through the JIT then (profiles/h100/ch13-persistent-92f1ef6/pair): 0.07237 ms
a call against 0.1018, 1.429x (1.418-1.439); 1.404x (1.397-1.411) in the chapter's run at 07ac287
(profiles/h100/ch13-07ac287). Not the one-wave time (0.0521 ms at 132 tiles): the split tiles add their sums
through L2, and the kernel with the split compiled in holds one more accumulator tile of shared memory. Where the
split pays and where it does not, from the sweep
(profiles/h100/ch13-persistent-92f1ef6/persistent_sweep.md): at K = 8192 it wins where the last wave is
thin (1.55x at 1.09 waves: 1.546x at 772297c, and 1.71x in this sweep against a plain reading, 0.1177 ms, slower
than its own 192 tiles; in this sweep 1.28x at 2.09, 1.15x at 3.09, 1.12x at 1.45; 772297c: 1.25x, 1.19x,
1.09x) and is even at 2.45 waves; at exact multiples of 132 there is no tail and the plain persistent kernel
runs (0.89-0.99x one program per tile in this sweep); at K = 512 a split tile is too little work to pay for its sums (0.64-0.81x where there is a tail).

On the H200 at 105c17f, launched bound (profiles/h200/launch-105c17f): 1.44x (1.42-1.45) and 1.438x
(1.431-1.445) at 0.0714 and 0.0707 ms, and 1.20x (1.17-1.22) in a third run whose samples caught the host's lag
(the baseline's docstring says why).

Prepared once: B, the output, the fp32 tile sums and the per-tile counts (zero between calls), and the launch
(compiled, arguments bound, as in the baseline). Per call: A (fed in place); one launch.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_persistent_gemm import CONFIG

DEVICES = ("cuda",)
REQUIRES = ("triton",)
SPLIT_TAIL = True


def prepare(w, split_tail: bool = SPLIT_TAIL):
    """The persistent GEMM over the workload's A and B; split_tail=False is the plain persistent pitfall."""
    from ch13 import triton_kernels as tk
    a, b = w.inputs["a"], w.inputs["b"]
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    gemm = tk.PersistentGemm(out, CONFIG, num_programs=sms, split_tail=split_tail)
    return gemm.bind(a, b)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
