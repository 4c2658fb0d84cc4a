"""The decode step as six hand-written Triton kernels per layer, chained by programmatic dependent launch.

What the fused variant's profile left (ch16/decode_profile.py on the H100): its matrix-vector products at 74%
of the copy rate, and 211 kernels a token, each starting on an idle GPU and draining to one. This variant
(ch16/pdl_step.py) writes the step as 97 kernels. Per layer: RMSNorm + QKV + rotary + the cache write (the
first layer's also reads the embedding row), split-KV attention, the merge of its partial softmaxes, the
output projection + residual, RMSNorm + gate/up + SiLU * up, the down projection + residual; then RMSNorm +
the LM head. Each is launched with programmatic dependent launch (Hopper): a kernel lets the next one start
as soon as it is running, and the next one loads its weight tile before it waits for this one's output, so
one product's weight stream overlaps the previous kernel's tail. The launches are captured in one CUDA graph.

Measured on the H100 at 861dee0 (profiles/h100/ch16-decode-861dee0): 0.7092 ms a token in the pair, 75.4%
of the copy-bandwidth floor, against 1.076 ms for the fused variant; in decode_profile's loop 0.691 ms, and
0.790 ms for the same kernels launched without PDL.

prepare() rearranges the weights once (Q/K rows interleaved per head for the rotary, gate/up rows
interleaved; an extra copy, as the fused variant's) and captures the graph. Per call: the token and its
position, read in place; the step writes K and V at the position into the cache, as every variant does.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.pdl_step import prepare_pdl

DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(w):
    return prepare_pdl(w)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
