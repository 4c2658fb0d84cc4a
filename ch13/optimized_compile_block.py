"""Pitfall: torch.compile (default mode) expected to speed up a GEMM-bound block, and not doing so.

Inductor fuses the LayerNorms, the GELU and the residual adds into Triton kernels (their names,
triton_per_fused_native_layer_norm_..., triton_poi_fused_add_gelu_..., show in the profiler table:
`python ch13/profile_walkthrough.py --compile default`); the matmuls and attention stay cuBLAS and cuDNN
calls. The napkin math (baseline_compile_block.py) allowed up to ~0.2 ms of 1.4 ms for the element-wise
passes, but eager already runs LayerNorm as one kernel and the bias in cuBLAS's epilogue (addmm): what is
left to fuse is the GELU and two residual adds, ~3% of the forward.

Measured on the H100, four runs of the pair: 1.018x (0af4c72), 1.024x (4e9eeb0), 0.988x (951f95d),
1.019x (e9abe53): no gain beyond run-to-run noise, for a compile that prepare_s shows taking tens of
seconds. Compile where the profile shows element-wise kernels or launches taking the time, not by default.
The block's training step is such a place: its backward adds GELU's and the LayerNorms' gradients and the bias
gradients' reductions, and compiled, the walkthrough's step keeps the GPU busy 4.39 ms against eager's 5.06, the
GEMMs unchanged and the rest 0.83 ms against 1.50 (profiles/h100/ch13-trainstep-1c29d51; before 1c29d51 the
eager step skipped most weight gradients, and compiled read slower).
KIND = "pitfall": reported with its ratio. GPU only: on a CPU Inductor compiles C++ for tens of seconds, which CI
does not pay.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_compile_block import forward

KIND = "pitfall"
DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(w):
    x, model = w.inputs["x"], w.inputs["model"]
    fn = torch.compile(forward, mode=None)
    fn(model, x)  # compile now, so that prepare_s holds the compile time
    return lambda: fn(model, x)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
