"""Serve a burst of requests with static batching: take up to 8, prefill them, decode until all are done.

Workload: the ~1B model (bf16) on a GPU, 24 requests arriving at once (the saturated end of the
load sweep), prompts log-normal around 128 tokens, outputs log-normal around 64 (σ 0.8), 8 slots of
2048 tokens; on a CPU (and --quick) the small model, 12 requests, 4 slots. The call serves the whole
burst and returns every request's generated tokens (padded, int64), so the two schedulers must
generate exactly the same tokens. Items: generated tokens (tokens/s is the throughput).
`python ch16/batching.py` sweeps the offered load with Poisson arrivals and gives p50/p99 latency
(200 requests, prompts around 256, outputs around 128, 16 slots: the sweep's settings).
The GPU size (without --quick) is the chapter's result; the CPU and --quick sizes only check that
the pair runs and verifies, and their times are not results.

Prepared once: the model, the trace's lengths (declared once: a scheduler must know them to be the same
workload) and, in prepare(), the Engine's KV slabs and its CUDA graphs. Per call: the prompts, read in place,
and the whole burst served from empty slots, prefill and decode.

Bound: memory per decode iteration, in principle (the weights, read once for all 8 slots: an 8-slot step
≈ 1.574 GB, the bytes the pair counts per iteration, ≈ 0.52 ms at 3008 GB/s, + the slots' KV; the sweep's
iterations take several times that, not yet taken apart). Static batching waits for each batch's longest output (the
longest of 8 is ~3x the median, the mean 1.38x); continuous batching refills a slot at once. Both prefill
in the same 128-token chunks, each one CUDA graph (batching.Engine), so the prefill is the same small
share of either schedule.

The pair's size, measured on the H100 (reports under profiles/h100/): 64 requests on 16 slots with outputs
around 128 ran alone for over nine minutes (0af4c72). With eager prefill chunks (1.48 s for a
burst's 65), 32 requests took 4.5 s a call static and 2.9 s continuous (4e9eeb0); with graphed chunks 4.07 s
and 2.39 s, 1.71x (1.68-1.73), 99 s for the pair (f68ba3f). This size, 24 requests, at 155bfa6 (each slot's
attention reading only its own keys): 2729 ms and 1550 ms, 1.74x (1.73-1.79), 71 s for the pair, the
chapter in 207.4 s (profiles/h100/ch16-155bfa6; 1.768x at aa626df). The load sweep (200 requests a load) at 1702a9a: 1.03x at
4 requests/s, 2.26x at 32 (profiles/h100/ch16-batching-1702a9a).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch16.batching import Engine, Request, make_trace, serve, settings
from ch16.decode import served_model

BOUND = "memory"


def workload(seed: int, device, quick: bool = False) -> Workload:
    device = torch.device(device)
    s = dict(settings(device, quick))
    if device.type == "cuda" and not quick:
        s.update(n=24, slots=8, prompt_median=128, out_median=64)
    else:
        s["n"] = 12
    model = served_model(device, quick)
    trace = make_trace(s["n"], 1.0, seed, model.cfg.vocab_size, s["prompt_median"], s["out_median"], s["sigma"],
                       s["max_prompt"], s["max_out"], device)
    prompts = torch.zeros(s["n"], s["max_prompt"], dtype=torch.long, device=device)
    for i, r in enumerate(trace):
        prompts[i, :r.prompt.shape[1]] = r.prompt[0]
    lengths = torch.tensor([[r.prompt.shape[1], r.n_out] for r in trace], device=device)
    # at best one weight read per decode iteration, and at least max(longest output, all tokens / slots) iterations
    iterations = max(int(lengths[:, 1].max()), -(-int(lengths[:, 1].sum()) // s["slots"]))
    return Workload(inputs={"model": model, "settings": s, "prompts": prompts, "lengths": lengths},
                    once=("lengths",), items=float(lengths[:, 1].sum()), item_name="tokens",
                    bytes_moved=model.weight_bytes() * iterations,
                    note=f"{s['n']} requests at once, {s['slots']} slots, prompts {int(lengths[:, 0].min())}-"
                         f"{int(lengths[:, 0].max())}, outputs {int(lengths[:, 1].min())}-{int(lengths[:, 1].max())} tokens")


def server(w: Workload, policy: str):
    s, model = w.inputs["settings"], w.inputs["model"]
    engine = Engine(model, s["slots"], s["max_len"], s["chunk"])
    prompts, lengths = w.inputs["prompts"], w.inputs["lengths"].tolist()
    # every request arrives at time 0; each reads its prompt from the per-call input, in place
    trace = [Request(i, 0.0, prompts[i:i + 1, :L], n) for i, (L, n) in enumerate(lengths)]
    out = torch.zeros(len(trace), max(n for _, n in lengths), dtype=torch.long)

    def call():
        res = serve(engine, trace, policy, s["budget"], s["chunk"])
        out.zero_()
        for rid, _, _, _, toks in res["requests"]:
            out[rid, :len(toks)] = torch.tensor(toks)
        call.makespan = res["makespan"]
        return out
    return call


def prepare(w: Workload):
    return server(w, "static")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
