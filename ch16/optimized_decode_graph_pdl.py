"""The decode step as six hand-written Triton kernels per layer, chained by programmatic dependent launch.

What the fused variant's profile left (ch16/decode_profile.py on the H100, profiles/h100/ch16-c8b4e68):
its matrix-vector products at 74% of the copy rate, and about 180 kernels a token, each starting on an
idle GPU and draining to one. This variant (ch16/pdl_step.py) writes the step as 97 kernels: per layer,
RMSNorm + QKV + rotary + cache write, split-KV attention, the merge of its partial softmaxes, the output
projection + residual, RMSNorm + gate/up + SiLU * up, the down projection + residual (the embedding
lookup in the first layer's QKV kernel); then RMSNorm + the
LM head. Each is launched with programmatic dependent launch (Hopper): a kernel lets the next one start as
soon as it is running, and the next one loads its weight tile before it waits for this one's output, so
one product's weight stream overlaps the previous kernel's tail. The launches are captured in one CUDA graph.

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
