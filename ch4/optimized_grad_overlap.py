"""Launch each bucket's all-reduce from a gradient hook as soon as backward has filled it.

A post-accumulate-grad hook on every parameter copies its gradient into its bucket; the hook
that completes a bucket starts that bucket's all-reduce asynchronously (on NCCL's own stream),
so the last layers' gradients travel while backward still computes the first layers'. Only the
last bucket's all-reduce is left after backward: time ≈ max(compute, communication) + one
bucket, instead of their sum. This is what DDP's reducer does in C++.

Buckets fill in the order backward produces gradients, the same on every rank, so every rank
launches the same collectives in the same order (NCCL requires it).

A pitfall on 2 H200s: slower than the baseline, 0.77x (ch4/README.md has the figures). Timed alone as the
pairs are, forward and backward take 1.75 ms and the all-reduces 0.61 ms; the hooked step takes 3.04 ms, more
than their sum (scripts/ch4_overlap_probe.py, profiles/h200x2/ch4-80dc133/probe). Our reading, not measured
directly: NCCL's all-reduce is a kernel that needs SMs, backward's GEMMs keep them busy, and the two take
turns. A high-priority NCCL stream or fewer NCCL blocks did not help, and an eager variant that moved the
bytes with a copy engine (symmetric memory) measured 0.71x: it is not kept.

Prepared once: the parameters, the buckets, the hooks. Per call: the batch and its targets.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch.distributed as dist

from ch4.baseline_grad_overlap import leaf_params, loss_fn
from ch4.dist_common import bucket_cap, bucket_views, plan_buckets

KIND = "pitfall"


def prepare(w):
    params = leaf_params(w)
    x, y = w.inputs["x"], w.inputs["y"]
    plan = plan_buckets(params, bucket_cap(params))
    flats, views = bucket_views(params, plan)
    bucket_of = {i: b for b, idx in enumerate(plan) for i in idx}
    state = {"missing": [], "works": []}

    def on_grad(i):
        def hook(p):
            views[i].copy_(p.grad)
            b = bucket_of[i]
            state["missing"][b] -= 1
            if state["missing"][b] == 0:
                state["works"].append(dist.all_reduce(flats[b], async_op=True))
        return hook

    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(on_grad(i))

    def step():
        state["missing"] = [len(idx) for idx in plan]
        state["works"] = []
        for p in params:
            p.grad = None
        loss_fn(params, x, y).backward()
        if len(state["works"]) != len(plan):
            raise RuntimeError(f"{len(state['works'])} of {len(plan)} buckets were launched during backward")
        for work in state["works"]:
            work.wait()  # the caller's stream waits for NCCL's; the host does not block
        return tuple(views)
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
