"""Weight-only float8 done right: e4m3 weights widened in registers inside one Triton product per layer.

The same storage as torchao's weight-only pitfall (1-byte weights, bf16 activations), without its
dequantize pass: ch13/fp8_weight_only.py loads each tile of float8 weights, converts it to bf16 in
registers and feeds it to tl.dot with the 64 tokens, applying each row's scale to the row's sum. The
weights cross memory once, at 1 byte each: 117 MB against bf16's 235 MB, so at the copy rate the two
layers could take half of eager's time. The up projection's bias and GELU run in its epilogue (one kernel
instead of addmm + gelu); the down projection (K = 14336, N = 4096: only 64 tiles of 64 rows) splits K
four ways so the grid covers the GPU, the last program of each tile adding the partial sums.

Prepared once: the weights quantized (one fp32 scale per output row), the hidden and output buffers,
the kernels compiled and their arguments bound (FP8Linear: launched one by one on the H100, a layer took
0.0399-0.0621 ms through Triton's JIT, which binds and checks its arguments in Python on every call, and
0.0305-0.0381 ms bound: profiles/h100/ch13-fp8-4450696/fp8_weight_only_sweep.md). Per call: x, read where
the workload refreshes it; two kernels. The kernel is shared with chapter 16's float8 decode step
(ch16/pdl_step.py reads its weights with the same functions).

Measured on the H100 (profiles/h100/ch13-fp8-a6cbf1a): 0.0759 ms a call against eager bf16's 0.105:
1.38x, not the 2x the bytes allow. The two kernels run at 1.79 and 1.70 TB/s on their float8 bytes
(the sweep), 57-59% of the copy rate, where cuBLAS streams the bf16 weights at 2.5-2.6 TB/s:
with 64 tokens a program reads twice as many bytes of x (from L2) as of weights, and Nsight Compute shows
the up projection latency-bound (DRAM and SM throughput at 44% and 47%, 2 programs of 4 warps per SM, held
there by 90 KB of shared memory each: ch13-fp8-a6cbf1a/ncu_up_projection_64_tokens.txt). At 1 and 16 tokens the same
kernels reach 1.45-1.56x cuBLAS.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.fp8_weight_only import FP8Linear, quantize_rows

PRECISION = "fp8"
DEVICES = ("cuda",)
REQUIRES = ("triton",)


def bytes_moved(w):
    """The baseline's count with 1-byte weights: float8 weights, their fp32 scales, the biases, x and y."""
    (h, d), tokens = w.inputs["w_up"].shape, w.inputs["x"].shape[0]
    es = w.inputs["x"].element_size()
    return 2 * d * h + 4 * (h + d) + es * (h + d + 2 * tokens * d)


def prepare(w):
    x = w.inputs["x"]
    w_up, s_up = quantize_rows(w.inputs["w_up"])
    w_down, s_down = quantize_rows(w.inputs["w_down"])
    up = FP8Linear(x, w_up, s_up, w.inputs["b_up"], gelu=True)     # h = GELU(x W_up^T + b_up), into up.out
    down = FP8Linear(up.out, w_down, s_down, w.inputs["b_down"])   # y = h W_down^T + b_down

    @torch.no_grad()
    def call():
        up()
        return down()
    return call


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
