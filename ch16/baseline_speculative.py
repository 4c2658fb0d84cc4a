"""The target alone, greedy: 64 new tokens one step at a time, each step a CUDA graph (on a GPU).

Workload: the ~1B target (bf16) on a GPU, one request with a 128-token prompt, 64 new tokens; on a CPU
the small model, fp32 (bf16 with --quick on a GPU), 32 (quick 16) prompt tokens, 16 (quick 8) new. The call returns
the target's logits at every generated position (1, n_new, vocab). The target's layers past the
first `depth` are scaled (speculative.py) so that the optimized variant's early-exit draft has a
stated acceptance rate; `python ch16/speculative_sweep.py` sweeps it and k.
The GPU size (without --quick) is the chapter's result; the CPU and --quick sizes only check that
the pair runs and verifies, and their times are not results.

Prepared once: the target and its draft (the first `depth` layers). Per call: a prompt and both caches,
prefilled with its first L-1 tokens in workload() (untimed: a prefill both sides would pay alike); every new
token is generated from the prompt's last one, writing both caches from there (declared updated).

Bound: memory. Napkin math (H100): each token reads the 1.574 GB of weights once (the embedding: one row)
and the counted KV, 192 x 32 KiB: 1.580 GB ≈ 0.525 ms at 3008 GB/s, so 64 tokens ≥ 33.6 ms alone. The pair's
bytes_moved is the floor of any decoder of this target: one weight read per k+1 = 5 tokens (every proposal
accepted), 13 passes, 20.54 GB ≈ 6.83 ms.

The setting (deep layers x0.25, k=4) is where speculative_sweep.py, on this prompt on the H100, measured
α 0.81 and 1.75x (aa626df): an acceptance rate where the draft pays. The harness times another prompt
each run (seed B is drawn at random), and α with it: 156.6 ms alone, 97.8 ms speculative, 1.601x
(1.593-1.609) at 155bfa6; 1.83x at aa626df, 1.922x at 1702a9a (profiles/h100/ch16-*).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import math

from common import Workload
from ch16.model import KVCache
from ch16.speculative import GreedyDecoder, greedy_work, spec_workload_inputs

BOUND = "memory"
COMPARE = "logits_margin"  # free-running greedy logits: a near-tie may fork the sequences (common.decode_check)


def workload(seed: int, device, quick: bool = False) -> Workload:
    inputs, s, model = spec_workload_inputs(seed, device, quick)
    flops, bytes_alone = greedy_work(model, s)
    passes = math.ceil(s["n_new"] / (s["k"] + 1))
    return Workload(inputs=inputs, updated=("k_cache", "v_cache", "draft_k_cache", "draft_v_cache"),
                    flops=flops, bytes_moved=bytes_alone * passes / s["n_new"], items=s["n_new"], item_name="tokens",
                    note=f"{model.cfg.n_params() / 1e9:.2f}B target, draft = first {s['depth']} layers, deep layers "
                         f"x{s['scale']}, prompt {s['prompt']}, {s['n_new']} new tokens, k={s['k']}")


def prepare(w: Workload):
    s = w.inputs["settings"]
    cache = KVCache(w.inputs["k_cache"], w.inputs["v_cache"])
    return GreedyDecoder(w.inputs["model"], cache, w.inputs["prompt"], s["n_new"])


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
