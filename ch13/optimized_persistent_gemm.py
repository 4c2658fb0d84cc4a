"""The fix for a thin last wave: a persistent grid that splits the last wave's tiles along K.

One program per SM (132 on an H100) walks the tiles pid, pid + 132, ... for the full waves, exactly as
the baseline's programs would. The 12 tiles left over (144 = 132 + 12) are not given to 12 SMs for a
whole tile's time: each is split along K over 132 // 12 = 11 programs, which sum their slice of K into
fp32 partial tiles; the last of a tile's 11 to finish (an atomic count) adds them and stores the tile.
The second wave then costs 1/11 of a tile plus the sums (atomic adds in L2), not a whole tile. It is the
data-parallel + Stream-K hybrid of CUTLASS and cuBLAS, in ch13/triton_kernels.py (_persistent_gemm_kernel,
SPLIT_TAIL).

Measured on the H100 (profiles/h100/ch13-e9abe53): 0.0719 ms a call against 0.1011, 1.415x (1.408-1.422),
not the one-wave time (0.0521 ms at 132 tiles): the persistent grid itself runs a full wave slower than
one program per tile (0.0577 against 0.0521 ms, its epilogue holding 32 KB more shared memory), and the
split tiles add their sums through L2. Where the split pays and where it does not, from the sweep
(profiles/h100/ch13-persistent-772297c): at K = 8192 it wins where the last wave is thin (1.55x at 1.09
waves, 1.25x at 2.09, 1.19x at 3.09), gains 5-9% at 1.45 and 2.45 waves, and loses 7-19% where the tiles are
an exact multiple of the SMs (no tail to split, only the persistent grid's cost); at K = 2048 a split tile
is too little work to pay for its sums (0.87-1.10x).

Persistence is what makes the split possible (the programs know the wave count and which work is left),
not what makes it fast: without the split (ch13/optimized_persistent_gemm_plain.py) the same persistent
grid is no faster than one program per tile.

Prepared once: B, the output, the fp32 partial tiles and the per-tile counts (zero between calls).
Per call: A; one launch.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_persistent_gemm import CONFIG

DEVICES = ("cuda",)
REQUIRES = ("triton",)
SPLIT_TAIL = True


def prepare(w):
    from ch13 import triton_kernels as tk
    a, b = w.inputs["a"], w.inputs["b"]
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    gemm = tk.PersistentGemm(out, CONFIG, num_programs=sms, split_tail=SPLIT_TAIL)
    return lambda: gemm(a, b)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
