"""16 independent small GEMMs, one after another on one stream.

Workload: 16 unrelated fp32 products of 256 x 8192 by 8192 x 256 (say, 16
small models, one request each). Each output is only 256 x 256, a handful
of tiles, so one GEMM occupies a few of the GPU's 132 SMs while the rest sit
idle; on one stream the next GEMM cannot start until the previous one ends.

Bound: compute, but underfilled: the GPU's FP32 rate is reachable only if
several GEMMs run at once. 16 x 1.07 GFLOP = 17 GFLOP.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "compute"
DEVICES = ("cuda",)
GEMMS, M, N, K = 16, 256, 256, 8192


def workload(seed: int, device, quick: bool = False) -> Workload:
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(GEMMS, M, K, device=device, generator=g)
    b = torch.randn(GEMMS, K, N, device=device, generator=g) / K**0.5
    return Workload(inputs={"a": a, "b": b}, flops=2.0 * GEMMS * M * N * K,
                    bytes_moved=4.0 * GEMMS * (M * K + K * N + M * N), items=GEMMS, item_name="GEMMs")


def prepare(w: Workload):
    a, b = w.inputs["a"], w.inputs["b"]
    torch.backends.cuda.matmul.allow_tf32 = False
    out = torch.empty(GEMMS, M, N, device=a.device)

    def run():
        for i in range(GEMMS):
            torch.matmul(a[i], b[i], out=out[i])
        return out
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
