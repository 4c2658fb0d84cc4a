"""16 independent small GEMMs, one after another on one stream.

Workload: 16 unrelated fp32 products of 512 x 512 by 512 x 512 (say, 16
small models, one request each). Each output is 16 tiles of 128 x 128, so
one GEMM occupies a few of the GPU's 132 SMs while the rest sit idle, and K
is too short for cuBLAS to split it across more; on one stream the next GEMM
cannot start until the previous one ends. (With long K, cuBLAS splits the
reduction and fills the GPU by itself: ch11/probe_concurrency.py shows it.)

Bound: compute, but underfilled: the GPU's FP32 rate is reachable only if
several GEMMs run at once. 16 x 0.27 GFLOP = 4.3 GFLOP.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "compute"
DEVICES = ("cuda",)
GEMMS, M, N, K = 16, 512, 512, 512


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
