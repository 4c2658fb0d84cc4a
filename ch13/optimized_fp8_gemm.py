"""The same layer on the float8 tensor cores: both operands in e4m3 with a scale per row, torch._scaled_mm.

The weight is quantized once (one scale per output row: each row's largest |w| maps to e4m3's 448,
ch13/fp8_weight_only.py's quantize_rows). Every call quantizes x, the new tokens, with a scale per token
in one Triton pass (each program reads one row of x once, takes its largest |x| and writes the row in
float8 with its scale: 134 MB read, 67 MB written), then runs `torch._scaled_mm` with the two rows of
scales, which cuBLAS applies in the GEMM's epilogue: y[i, j] = sx[i] sw[j] sum_k x8[i, k] w8[j, k], in bf16.
Float8 doubles the tensor cores' rate, so at this size the GEMM takes about half of bf16's time, and the
quantization pass costs a few percent of it. Without fast accumulation (`use_fast_accum=False`, the
default): the partial sums are promoted to fp32 as cuBLAS' bf16 GEMM keeps them.

Precision: e4m3 keeps 3 mantissa bits, so the product is a different, coarser computation; the variant
declares PRECISION = "fp8" and is verified at that tolerance against the bf16 layer.

Prepared once: the weight in float8 and its scales, the buffers for x in float8 and its scales.
Per call: x quantized, the fp8 GEMM.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.fp8_weight_only import E4M3, quantize_rows

PRECISION = "fp8"
DEVICES = ("cuda",)
REQUIRES = ("triton",)

try:
    import triton
    import triton.language as tl

    @triton.jit
    def _quantize_rows_kernel(x_ptr, q_ptr, s_ptr, K, BLOCK_K: tl.constexpr):
        """Row `program_id` of x (M, K): its scale max|x| / 448 to s, the row divided by it to q in e4m3."""
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + row * K + cols, mask=cols < K, other=0.0).to(tl.float32)
        scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-12) / 448.0
        tl.store(q_ptr + row * K + cols, (x / scale).to(q_ptr.dtype.element_ty, fp_downcast_rounding="rtne"),
                 mask=cols < K)
        tl.store(s_ptr + row, scale)
except ImportError:
    triton = None


def quantize_tokens(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) -> None:
    """x (M, K) into q (M, K) e4m3 and s (M, 1) fp32, one program per row (a row fits one program's registers)."""
    M, K = x.shape
    _quantize_rows_kernel[(M,)](x, q, s, K, BLOCK_K=triton.next_power_of_2(K), num_warps=8)


def prepare(w):
    x = w.inputs["x"]
    w8, w_scale = quantize_rows(w.inputs["w"])
    w8_t, w_scale = w8.t(), w_scale.view(1, -1)     # column-major (K, N): the layout _scaled_mm wants for b
    x8 = torch.empty(x.shape, device=x.device, dtype=E4M3)
    x_scale = torch.empty(x.shape[0], 1, device=x.device, dtype=torch.float32)

    def call():
        quantize_tokens(x, x8, x_scale)
        return torch._scaled_mm(x8, w8_t, scale_a=x_scale, scale_b=w_scale, out_dtype=x.dtype)
    return call


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
