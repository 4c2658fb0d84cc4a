"""The compiled step with fewer, larger reads: fused weights, one attention kernel, a Triton GEMV.

Three changes on top of optimized_decode_graph_compile, each aimed at what the step's profile showed
(ch16/decode_profile.py on the H100):
- Q, K and V from one concatenated weight, gate and up from another (ch16/fused_step.py): 4 matrix-vector
  products per layer instead of 7. At batch 1 a small product is latency, not bandwidth: cuBLAS reads
  the 2 MB K and V weights at a fraction of the copy rate, so one 12.6 MB read beats three.
- Attention as F.scaled_dot_product_attention with enable_gqa (fused_step.sdpa_attention): one kernel
  reads each KV head once for its query heads, where the model's attend() is two batched matmuls and a
  softmax.
- Every projection and the LM head through ch16/gemv.py's Triton kernel (a torch.library.triton_op, so
  Inductor puts its launches in the same CUDA graph): at M=1 it streams W in 4-row tiles and reached
  98% of the copy rate on the 131 MB LM head, where cuBLAS's GEMM-with-M=1 reached 89% (ch16/gemv.py).
Tried and dropped: the RMSNorm before Q/K/V, gate/up and the LM head computed inside the GEMV (each program
reading x twice, its sum of squares first), with 8 warps for the smaller matrices: 1.153 ms against this
file's 1.077 ms a step on the H100 (profiles/h100/ch16-decode-c3b48ba): the GEMVs took 809 µs instead of
710, more than the 33 norm kernels it removed.
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
