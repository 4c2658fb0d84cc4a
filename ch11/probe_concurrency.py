"""Do cuBLAS GEMMs gain from streams? One stream vs 8 streams for a few shapes (a measuring aid).

cuBLAS picks tiles and splits K so that even one small GEMM fills much of the GPU, which is
why the concurrent_gemms pair uses a kernel that cannot split its work (tile_gemm.cu).

    python ch11/probe_concurrency.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402

from common.timing import time_call  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
SHAPES = ((256, 256, 8192), (512, 512, 4096), (1024, 1024, 1024), (512, 512, 512), (512, 512, 1024),
          (256, 256, 1024), (768, 768, 768), (384, 384, 384), (256, 256, 256))
for m, n, k in SHAPES:
    a = torch.randn(16, m, k, device="cuda")
    b = torch.randn(16, k, n, device="cuda")
    out = torch.empty(16, m, n, device="cuda")
    streams = [torch.cuda.Stream() for _ in range(8)]

    def one():
        for i in range(16):
            torch.matmul(a[i], b[i], out=out[i])

    def many():
        main = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(main)
        for i in range(16):
            with torch.cuda.stream(streams[i % 8]):
                torch.matmul(a[i], b[i], out=out[i])
        for s in streams:
            main.wait_stream(s)

    t1 = time_call(one, torch.device("cuda"), budget_s=0.5).median_ms
    t8 = time_call(many, torch.device("cuda"), budget_s=0.5).median_ms
    print(f"{m}x{n}x{k}: one stream {t1:.3f} ms, 8 streams {t8:.3f} ms, {t1 / t8:.2f}x")
