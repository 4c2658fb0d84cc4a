"""One decode step at batch 1, eager: the static-cache step as model code runs it, kernel by kernel.

Workload: the ~1B model (bf16, 16 layers) on a GPU, one request 1024 tokens in, cache of 1088.
On a CPU: the small model, fp32, context 256 (quick 64); --quick on a GPU: the small model in bf16.
The GPU size (without --quick) is the chapter's result; the CPU and --quick sizes only check that
the pair runs and verifies, and their times are not results.

Prepared once: the model. Per call: a request, one of the harness's value sets: its token, its position and its
cache, prefilled with its prefix in workload() (untimed: a server's prefill is a step of its own). The step writes
the token's position of the cache (declared updated).

Bound: memory, in principle: at batch 1 every weight is read once per token, 1.608 GB with the KV as the
workload counts it, 0.534 ms at the H100's measured 3008 GB/s copy rate; that floor is this pair's
ceiling (profiles/h100/ch16-c8b4e68/decode_profile.md). Eager,
the step is launch-bound instead: 892 kernels a token (about 56 per layer), each behind ~10 µs of Python
and dispatcher; on the H100 the GPU is busy 2.3 ms of a 16.9 ms step (ch16/decode_profile.py,
profiles/h100/ch16-c8b4e68/decode_profile.md).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch16.decode import decode_workload
from ch16.model import KVCache, decode_step

BOUND = "memory"


def workload(seed: int, device, quick: bool = False):
    gpu = torch.device(device).type == "cuda"
    return decode_workload(seed, device, quick, batch=1, context=1024 if gpu and not quick else (64 if quick else 256))


def prepare(w):
    model, token, pos = w.inputs["model"], w.inputs["token"], w.inputs["input_pos"]
    cache = KVCache(w.inputs["k_cache"], w.inputs["v_cache"])

    @torch.no_grad()
    def step():
        return decode_step(model, cache, token, pos)
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
