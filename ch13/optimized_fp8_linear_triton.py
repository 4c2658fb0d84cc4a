"""Weight-only float8 done right: e4m3 weights widened in registers inside one Triton product per layer.

The same storage as torchao's weight-only pitfall (1-byte weights, bf16 activations), without its
dequantize pass: ch13/fp8_weight_only.py loads each tile of float8 weights, converts it to bf16 in
registers and feeds it to tl.dot with the 16 tokens, applying each row's scale to the row's sum. The
weights cross memory once, at 1 byte each: 117 MB against bf16's 235 MB, so at the copy rate the two
layers could take half of eager's time. The up projection's bias and GELU run in its epilogue (one kernel
instead of addmm + gelu); the down projection (K = 14336, N = 4096) splits K two ways so the grid covers
the GPU, the last program of each tile adding the partial sums. On Hopper the down projection is launched
with programmatic dependent launch: the up projection's programs let it launch at once, its programs take
the SMs the up projection leaves room on and wait there for h, so its launch and set-up overlap the up
projection's tail instead of following it.

Prepared once: the weights quantized (one fp32 scale per output row), the hidden and output buffers,
the kernels compiled and their arguments bound (FP8Linear: Triton's JIT binds and checks its arguments in
Python on every call, which at these sizes costs as much host time as the kernel takes on the GPU). Per
call: x, read where the workload refreshes it; two kernels. The kernel is shared with chapter 16's float8
decode step (ch16/pdl_step.py reads its weights with the same functions).

Measured on the H100 in the chapter's run (profiles/h100/ch13-07ac287): 0.0630 ms a call against eager
bf16's 0.1121, 1.795x (1.786-1.804); 1.70x, 1.76x and 1.82x in the three runs before it (the float8 call at
55.7-55.8 us in those; both medians move from run to run, the paired speedup less: ch13/README.md). With PDL the call took 57.1 us
against 58.2 without, timed one by one after the harness's L2 scrub (profiles/h100/ch13-d19f8c2/probe.md);
having the down projection's early programs prefetch the first 1-4 KiB of each weight row into L2 before
the wait made the call slower, 1.38-1.54x eager (profiles/h100/ch13-fp8-mlp-b2d8eea). The block-size
sweep (profiles/h100/ch13-fp8-eeb9e9f/fp8_weight_only_sweep.md) puts each layer, with the blocks used here,
at 1.57x and 1.61x cuBLAS at 16 tokens, 2.1-2.2 TB/s on the float8 bytes. At 64 tokens the same kernels
reach only 1.31-1.36x (profiles/h100/ch13-fp8-eeb9e9f): a program then reads two bytes of activations (from
L2) per byte of weights, and Nsight Compute showed the up projection latency-bound (DRAM 44%, SM 47%:
profiles/h100/ch13-fp8-a6cbf1a/ncu_up_projection_64_tokens.txt).
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
    # programmatic dependent launch (Hopper and later): the down projection launches while the up one runs
    pdl = x.device.type == "cuda" and torch.cuda.get_device_capability(x.device)[0] >= 9
    up = FP8Linear(x, w_up, s_up, w.inputs["b_up"], gelu=True,     # h = GELU(x W_up^T + b_up), into up.out
                   pdl="first" if pdl else None)
    down = FP8Linear(up.out, w_down, s_down, w.inputs["b_down"],   # y = h W_down^T + b_down
                     pdl="second" if pdl else None)

    @torch.no_grad()
    def call():
        up()
        return down()
    return call


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
