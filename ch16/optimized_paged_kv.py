"""Paged KV cache: 16-token blocks from one pool and a block table; a Triton kernel (vLLM's paged
attention, split over the keys as in flash-decoding) walks each request's blocks in place with an online
softmax, so each request reads only its own tokens and nothing is copied. Memory per request: its length
rounded up to a block, not max_len. The pool and table are built once; needs a GPU with Triton.

Why it wins: the baseline's masked product reads every request's slab up to the longest request; this
kernel reads each request's own keys, 4 programs per (request, KV head) so the longest request is not
read by one program alone (the first version, one program walking one page at a time, was 0.789x the
baseline at c8b4e68). Measured on the H100 at 155bfa6: 3.475 ms a step against 7.178, 2.05x
(2.04-2.07), 36.3 MiB of KV a request instead of 128 (profiles/h100/ch16-155bfa6)."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.baseline_paged_kv import graphed
from ch16.paged import PagedKV, varlen_decode_step

DEVICES = ("cuda",)
REQUIRES = ("triton",)  # where it is missing the variant is skipped with the reason
PAGE = 16


def paged_prepare(w, attend: str, **kernel):
    """The paged step as a CUDA graph; `kernel`: the attention kernel's splits and block_n, if not PagedKV's."""
    model, lengths = w.inputs["model"], w.inputs["lengths_list"]
    c = model.cfg
    kv = PagedKV(c.n_layers, c.n_kv_heads, c.head_dim, PAGE, [n + 1 for n in lengths],
                 model.output.weight.dtype, w.inputs["token"].device, **kernel)
    kv.load(w.inputs["k_packed"], w.inputs["v_packed"], lengths)
    read_len = max(lengths) + 1
    fn = getattr(kv, attend)
    token, pos = w.inputs["token"], w.inputs["lengths"]

    def step():
        return varlen_decode_step(model, token, pos, kv.write, lambda i, q, p: fn(i, q, p, read_len))
    return graphed(step, kv)


def prepare(w):
    return paged_prepare(w, "attend_triton")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
