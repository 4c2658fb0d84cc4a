"""A Triton GEMM, one program per output tile (ch13/triton_kernels.py), at a shape where the last wave is thin.

Workload: C = A @ B, M = N = 1536, K = 8192, bf16, tiles of 128 x 128 (K step 64, 4 stages, 8 warps).
12 x 12 = 144 tiles over 132 SMs, one such program per SM at a time (its pipeline holds 128 KB of shared
memory): the first wave runs 132 tiles, the second the last 12, with 120 SMs idle. The kernel takes two
tiles' time for 1.09 tiles of work per SM. ch13/persistent_sweep.py shows the sawtooth over tile counts
(profiles/h100/ch13-persistent-*/persistent_sweep.md): on the H100 at K = 8192 this kernel took
0.0516-0.0521 ms for 132 tiles and 0.1054-0.1065 ms for 144 (8a9b340, 772297c; 92f1ef6's one reading of 0.1177
ms is slower than its own 192 tiles, 0.1049, and is not the shape's time); the pair itself times it at ~0.100.

Per call: A (fed in place). Prepared once: B, the output and the launch: the kernel compiled and its arguments
bound (ch13/triton_kernels.py bound_launch), in every variant alike. Through Triton's JIT each call spent 28-43
us more host time binding its arguments, and on the H200's host the harness's samples (feed, events, launch) were
issued slower than the GPU ran them: the JIT's host time landed inside the timed events, and the split variant read
over 88 us (median 105-120) on 58-72% of its samples in the probe instead of its 70.5 us
(scripts/launch_race_probe.py, profiles/h200/launch-105c17f). Bound, 2-8% in the probe, though three pair runs
each way do not yet show the pair steadier; that host still issued a sample in ~100 us, so the level was rarer in
the probe, not gone. Since b7052f2 the harness's feed and events cost the host less (33.8 -> 16.9 and 17.8 -> 7.2
us on another H200 host, profiles/h200/harness-b7052f2); the pair has not run since on a host measured that slow.
GPU only (a Triton kernel). --quick runs the same size.

Bound: compute, in a full wave. Napkin math: 2 x 1536^2 x 8192 = 38.7 GFLOP ≈ 0.06 ms at ~650 TFLOP/s,
if every SM were busy to the end; with the second wave nearly empty, ~0.1 ms.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "compute"
DEVICES = ("cuda",)
REQUIRES = ("triton",)
CONFIG = (128, 128, 64, 4, 8)  # BLOCK_M, BLOCK_N, BLOCK_K, stages, warps: the same for every variant


def workload(seed: int, device, quick: bool = False) -> Workload:
    m, n, k = 1536, 1536, 8192  # --quick too: 0.1 ms a call, and a smaller shape has no full wave to split after
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m, k, device=device, generator=g).to(torch.bfloat16)
    b = (torch.randn(k, n, device=device, generator=g) / k**0.5).to(torch.bfloat16)
    return Workload(inputs={"a": a, "b": b}, once=("b",), flops=2.0 * m * n * k, bytes_moved=2.0 * (m * k + k * n + m * n))


def prepare(w: Workload):
    from ch13 import triton_kernels as tk
    a, b = w.inputs["a"], w.inputs["b"]
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    return tk.gemm_launcher(a, b, None, out, gelu=False, config=CONFIG)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
