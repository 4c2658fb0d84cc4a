"""torch.compile(mode="reduce-overhead"): Inductor fuses the element-wise kernels (RMSNorm, rotary,
SiLU x up, the softmax) into a few Triton kernels per layer and replays the step as a CUDA graph.

The cache is marked as a static address, so the graph writes it in place instead of copying it in
and out; the token and position (a few bytes) are copied into the graph's inputs each call.
Compilation is prepared once. Needs a GPU and Triton; elsewhere the variant is skipped.

How the cache is written matters here: through the layer's view (k[i].index_copy_), Inductor copied the
whole 18 MB K or V cache at every layer, 32 copies a token, and the step took 1.952 ms (b86fd00); with
one index_put_ on the whole cache (ch16/model.py: KVCache.write) it takes 1.33 ms (01d9686). The kernel
profile that found it: profiles/h100/ch16-decode-f75b693 against profiles/h100/ch16-01d9686.

Numerics: fused, Inductor keeps a kernel's bf16 intermediates in fp32 and rounds once, where eager rounds
after every op. Measured on the H100 (profiles/h100/ch16-probe-917ad11/decode.json, context 1024): against
an fp32 run of the same weights the eager step is 1.06e-2 off and the default compiled step 0.59e-2 (more
accurate), but the two differ by 1.19e-2, over the bf16 tolerance (1e-2) the harness holds a variant to
against the eager baseline. So the step is compiled with `emulate_precision_casts` (Inductor rounds where
eager does): it then differs from eager by 0.65e-2, and at 135e97c it cost nothing (1.316 ms against
1.315 ms a step; profiles/h100/ch16-decode-135e97c/profile).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.decode import compiled_replay
from ch16.model import KVCache, decode_step

DEVICES = ("cuda",)
REQUIRES = ("triton",)  # where it is missing the variant is skipped with the reason


def prepare(w, round_like_eager: bool = True):
    model = w.inputs["model"]
    token, pos, k, v = (w.inputs[n] for n in ("token", "input_pos", "k_cache", "v_cache"))

    def step(token, pos, k_cache, v_cache):
        return decode_step(model, KVCache(k_cache, v_cache), token, pos)
    return compiled_replay(step, (token, pos, k, v), static=(k, v), round_like_eager=round_like_eager)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
