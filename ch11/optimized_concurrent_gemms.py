"""The same 16 GEMMs issued round-robin on 8 streams, so several run on the GPU at once.

Kernels on different streams may execute concurrently: while one GEMM's few
tiles occupy a few SMs, the scheduler places the next stream's tiles on idle
SMs. Each stream waits for the caller's stream first, and the caller's
stream waits for all of them at the end, so the result is complete where the
caller (and its timer) looks.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch11.baseline_concurrent_gemms import GEMMS, M, N

DEVICES = ("cuda",)
STREAMS = 8


def prepare(w: Workload):
    a, b = w.inputs["a"], w.inputs["b"]
    torch.backends.cuda.matmul.allow_tf32 = False
    out = torch.empty(GEMMS, M, N, device=a.device)
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]

    def run():
        main = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(main)
        for i in range(GEMMS):
            with torch.cuda.stream(streams[i % STREAMS]):
                torch.matmul(a[i], b[i], out=out[i])
        for s in streams:
            main.wait_stream(s)
        return out
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
