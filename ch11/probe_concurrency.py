"""Do cuBLAS GEMMs gain from streams? One stream vs 8 streams for a few shapes (a measuring aid).

cuBLAS picks tiles and splits K so that even one small GEMM fills much of the GPU, which is
why the concurrent_gemms pair uses a kernel that cannot split its work (tile_gemm.cu).
A script, not a pair: nothing runs on import.

    python ch11/probe_concurrency.py          (needs a CUDA GPU; exits 2 with one line without one)
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402

SHAPES = ((256, 256, 8192), (512, 512, 4096), (1024, 1024, 1024), (512, 512, 512), (512, 512, 1024),
          (256, 256, 1024), (768, 768, 768), (384, 384, 384), (256, 256, 256))
BATCH, STREAMS = 16, 8


def probe(m: int, n: int, k: int) -> tuple[float, float]:
    """Median ms of 16 fp32 GEMMs (m x k by k x n) issued on one stream, then spread over 8 streams."""
    from common.timing import time_call
    dev = torch.device("cuda")
    a = torch.randn(BATCH, m, k, device=dev)
    b = torch.randn(BATCH, k, n, device=dev)
    out = torch.empty(BATCH, m, n, device=dev)
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]

    def one():
        for i in range(BATCH):
            torch.matmul(a[i], b[i], out=out[i])

    def many():
        main = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(main)
        for i in range(BATCH):
            with torch.cuda.stream(streams[i % STREAMS]):
                torch.matmul(a[i], b[i], out=out[i])
        for s in streams:
            main.wait_stream(s)

    return (time_call(one, dev, budget_s=0.5).median_ms, time_call(many, dev, budget_s=0.5).median_ms)


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    if not torch.cuda.is_available():
        print("probe_concurrency: needs a CUDA GPU (it times cuBLAS on streams); none is visible", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 GEMMs (this script's own process; not a pair)
    for m, n, k in SHAPES:
        t1, t8 = probe(m, n, k)
        print(f"{m}x{n}x{k}: one stream {t1:.3f} ms, 8 streams {t8:.3f} ms, {t1 / t8:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
