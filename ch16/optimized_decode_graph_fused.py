"""The compiled step with fewer, larger reads: fused weights, fused attention, a Triton GEMV.

Three changes on top of optimized_decode_graph_compile, each aimed at what the step's profile showed
(ch16/decode_profile.py on the H100):
- Q, K and V from one concatenated weight, gate and up from another (ch16/fused_step.py): 4 matrix-vector
  products per layer instead of 7. At batch 1 a small product is latency, not bandwidth: in the graph
  step's profile one small cuBLAS kernel runs 32 times a token (the K and V projections, 2.1 MB each) at
  5.2 µs a call, about 400 GB/s (profiles/h100/ch16-decode-f75b693), so one 12.6 MB read beats three.
- Attention as F.scaled_dot_product_attention with enable_gqa (fused_step.sdpa_attention): cuDNN's fused
  attention kernel reads each KV head once for its query heads (with a mask kernel and a reduction kernel
  beside it), where the model's attend() is two batched matmuls and a softmax.
- Every projection and the LM head through ch16/gemv.py's Triton kernel (a torch.library.triton_op, so
  Inductor puts its launches in the same CUDA graph): at M=1 it streams W in 4-row tiles and reached
  98% of the copy rate on the 131 MB LM head, where cuBLAS's GEMM-with-M=1 reached 89% (ch16/gemv.py,
  profiles/h100/ch16-decode-8ca5edf/gemv.json).
Tried and dropped: the RMSNorm before Q/K/V, gate/up and the LM head computed inside the GEMV (each program
reading x twice, its sum of squares first), with 8 warps for the smaller matrices: 1.153 ms a step in the
pair on the H100 (profiles/h100/ch16-decode-c3b48ba) against 1.077 ms for this file (ch16-decode-135e97c);
in the c3b48ba profile its GEMVs took 809 µs against 706 µs without it.
The fused weights are an extra copy made once in prepare (a real server would load them fused) and are
marked static, so the graph reads them in place. Per call: the token and its position.

Numerics: compiled with Inductor rounding where eager does (ch16/decode.py: compile_like_eager), as the
compile variant is; the Triton GEMV accumulates in fp32 and rounds once, as cuBLAS does.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.fused_step import prepare_fused, sdpa_attention
from ch16.gemv import linear

DEVICES = ("cuda",)
REQUIRES = ("triton",)  # where it is missing the variant is skipped with the reason


def prepare(w):
    return prepare_fused(w, attention=sdpa_attention, linear=linear)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
