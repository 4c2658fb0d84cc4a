"""The same kernel under @triton.autotune over GEMM_CONFIGS (8 tile configurations), keyed on (M, N, K).

The first call benchmarks every configuration and keeps the fastest for this shape: that happens in
prepare(), so prepare_s is the autotuning time, to set beside the gain. The winner is printed to stderr;
`ch13/autotune_sweep.py` lists it per shape with the tile count and waves that explain it.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch13.baseline_autotune_gemm import output

DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(w):
    from ch13 import triton_kernels as tk
    a, b, out = w.inputs["a"], w.inputs["b"], output(w)
    tk.gemm(a, b, None, out, gelu=False)  # autotune now
    print(f"autotune_gemm: chosen {tk.best_config()}", file=sys.stderr)
    return lambda: tk.gemm(a, b, None, out, gelu=False)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
