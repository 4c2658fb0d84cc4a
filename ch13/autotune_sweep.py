"""What the autotuner picks, per shape, and why: every configuration of GEMM_CONFIGS timed at each shape.

    python ch13/autotune_sweep.py [--out DIR]

For each (M, N, K): the time of every configuration in ch13/triton_kernels.GEMM_CONFIGS (triton.testing.do_bench,
median), its tile count and waves over the SMs (tiles / SMs; a fraction means a thin last wave), the
autotuner's own pick and how long autotuning took (the first call of the autotuned kernel), and cuBLAS.
Writes autotune_sweep.json and autotune_sweep.md. GPU and Triton only.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = [(8192, 14336, 4096), (8192, 4096, 14336), (64, 14336, 4096), (512, 4096, 4096), (2304, 2304, 8192)]


def error(message: str) -> int:
    """One line on stderr and exit status 2: what cannot run here, without a traceback."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "profiles" / "runs" / "autotune_sweep")
    a = p.parse_args(argv)
    if a.out.exists() and not a.out.is_dir():
        return error(f"--out {a.out} is a file, not a folder")
    import torch
    if not torch.cuda.is_available():
        return error("the sweep times Triton kernels on a GPU; none is visible to PyTorch")
    try:
        import triton.testing
    except ImportError as e:
        return error(f"the sweep needs Triton, which this Python cannot import ({e})")
    from ch13 import triton_kernels as tk
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for m, n, k in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / k**0.5
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = x @ w
        flops = 2.0 * m * n * k
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        tk.gemm(x, w, None, out, gelu=False)
        torch.cuda.synchronize()
        tune_s = time.perf_counter() - t0
        pick = tk.picked(m, n, k)
        configs = []
        for cfg in tk.GEMM_CONFIGS:
            bm, bn = cfg[0], cfg[1]
            tiles = math.ceil(m / bm) * math.ceil(n / bn)
            try:
                ms = triton.testing.do_bench(lambda: tk.gemm(x, w, None, out, gelu=False, config=cfg))
                ok = torch.allclose(out.float(), ref.float(), rtol=2e-2, atol=2e-2)
            except Exception as e:  # out of shared memory on a smaller GPU
                ms, ok = float("nan"), f"{type(e).__name__}"
            configs.append({"config": cfg, "ms": ms, "tflops": flops / ms / 1e9, "tiles": tiles,
                            "waves": tiles / sms, "correct": ok})
        cublas_ms = triton.testing.do_bench(lambda: x @ w)
        best = min((c for c in configs if c["correct"] is True), key=lambda c: c["ms"])
        rows.append({"shape": [m, n, k], "autotune_s": tune_s, "autotuner_pick": pick, "fastest": best["config"],
                     "cublas_ms": cublas_ms, "configs": configs})
        print(f"M={m} N={n} K={k}: autotune {tune_s:.1f} s, pick {pick}, fastest {best['config']} "
              f"{best['ms']:.3f} ms ({best['waves']:.2f} waves), cuBLAS {cublas_ms:.3f} ms", flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "autotune_sweep.json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "sms": sms,
                                                           "rows": rows}, indent=1) + "\n")
    lines = [f"# Triton GEMM autotuning per shape ({torch.cuda.get_device_name()}, {sms} SMs)", "",
             "| M, N, K | config (BM, BN, BK, stages, warps) | ms | TFLOP/s | tiles | waves | correct |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        for c in r["configs"]:
            mark = " **fastest**" if c["config"] == r["fastest"] else ""
            lines.append(f"| {r['shape']} | {c['config']}{mark} | {c['ms']:.3f} | {c['tflops']:.0f} | {c['tiles']} | "
                         f"{c['waves']:.2f} | {c['correct']} |")
        lines.append(f"| {r['shape']} | cuBLAS | {r['cublas_ms']:.3f} | | | | |")
        lines.append(f"| {r['shape']} | autotuner's pick: {r['autotuner_pick']}, autotuning {r['autotune_s']:.1f} s | | | | | |")
    (a.out / "autotune_sweep.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}/autotune_sweep.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
