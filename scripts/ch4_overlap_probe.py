"""Why chapter 4's NCCL overlap variants did not win on 2 H200s: each piece timed alone, and the NCCL
settings that might have helped (a high-priority stream, fewer NCCL blocks), side by side.

    torchrun --nproc_per_node=2 scripts/ch4_overlap_probe.py [fsdp] [overlap] [pipe]

A probe, not a benchmark: no verification but one equality check of the copy-engine gather. Each line is
timed as the pairs are (common.timing.time_call: warm-up until the per-call time settles, then samples of
back-to-back calls in rounds, every rank taking each decision together) and is the slowest rank's median,
with its p10-p90. Its output on 2 H200s is in profiles/h200x2/ch4-80dc133/probe/ (the runs at 563f64e and
80dc133 timed single calls after a barrier instead; the later run says what changed).
"""
import os, sys, pathlib  # noqa: E401
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import torch, torch.distributed as dist  # noqa: E401
if "RANK" not in os.environ or torch.cuda.device_count() < 2:
    print("error: needs 2 CUDA GPUs, under torchrun --nproc_per_node=2 (see this file's docstring)", file=sys.stderr)
    sys.exit(2)
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402
from common.timing import max_over_ranks, time_call  # noqa: E402
dist.init_process_group("nccl")
r, n = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", r); torch.cuda.set_device(dev)
peer = 1 - r

def timeit(name, fn, budget_s=1.0):
    t = time_call(fn, dev, budget_s=budget_s, agree=max_over_ranks)
    ms, p10, p90 = (max_over_ranks(x) for x in (t.median_ms, t.p10_ms, t.p90_ms))
    if r == 0: print(f"{name:50s} {ms:8.4f} ms  (p10 {p10:.4f}, p90 {p90:.4f}, n={t.samples}x{t.calls_per_sample})",
                     flush=True)

def group(prio=False, max_ctas=None):
    o = dist.ProcessGroupNCCL.Options(); o.is_high_priority_stream = prio
    if max_ctas:
        try: o.config.max_ctas = max_ctas; o.config.min_ctas = min(max_ctas, 1)
        except Exception as e: print("config failed", e)
    return dist.new_group(backend="nccl", pg_options=o)

G = {"default": None}
for k, a in {"prio": (True,), "ctas8": (False, 8), "ctas2": (False, 2), "prio_ctas8": (True, 8)}.items():
    try: G[k] = group(*a)
    except Exception as e: print(k, "group failed:", e)
part = sys.argv[1:] or ["fsdp", "overlap", "pipe"]

if "fsdp" in part:
    from ch4.baseline_fsdp_prefetch import make_inputs, layer
    from ch4.dist_common import all_gather_into
    inp = make_inputs(0, r, n, dev, False); shards, x = inp["shards"], inp["x"]
    L, half = shards.shape
    full = shards.new_empty(half * n); b2 = [shards.new_empty(half * n) for _ in range(2)]
    timeit("fsdp gather alone (NCCL)", lambda: all_gather_into(full, shards[0]))
    timeit("fsdp compute alone", lambda: layer(x, full))
    def base():
        h = x
        for i in range(L):
            all_gather_into(full, shards[i]); h = layer(h, full)
        return h
    timeit("fsdp baseline", base)
    def pref(g):
        def f():
            p = dist.all_gather_into_tensor(b2[0], shards[0], group=g, async_op=True); h = x
            for i in range(L):
                p.wait()
                if i + 1 < L: p = dist.all_gather_into_tensor(b2[(i + 1) % 2], shards[i + 1], group=g, async_op=True)
                h = layer(h, b2[i % 2])
            return h
        return f
    for k, g in G.items(): timeit(f"fsdp prefetch NCCL {k}", pref(g))
    # copy engine: shards in symmetric memory, the peer's half read by cudaMemcpyAsync on a side stream
    sym = symm_mem.empty((L, half), dtype=shards.dtype, device=dev); sym.copy_(shards)
    hdl = symm_mem.rendezvous(sym, dist.group.WORLD.group_name); dist.barrier(); torch.cuda.synchronize()
    remote = hdl.get_buffer(peer, (L, half), shards.dtype)
    side = torch.cuda.Stream(device=dev)
    def ce_gather(dst, i):
        dst[r * half:(r + 1) * half].copy_(sym[i]); dst[peer * half:(peer + 1) * half].copy_(remote[i])
    def ce_alone():
        ce_gather(full, 0)
    timeit("fsdp gather alone (copy engine)", ce_alone)
    def ce_pref():
        cur = torch.cuda.current_stream(); ev = [torch.cuda.Event(), torch.cuda.Event()]
        side.wait_stream(cur)
        with torch.cuda.stream(side): ce_gather(b2[0], 0); ev[0].record(side)
        h = x
        for i in range(L):
            cur.wait_event(ev[i % 2])
            if i + 1 < L:
                side.wait_stream(cur)  # the buffer it overwrites was read by layer i-1
                with torch.cuda.stream(side): ce_gather(b2[(i + 1) % 2], i + 1); ev[(i + 1) % 2].record(side)
            h = layer(h, b2[i % 2])
        return h
    timeit("fsdp prefetch copy engine", ce_pref)
    ref = base(); got = ce_pref(); torch.cuda.synchronize()
    if r == 0: print("ce equal:", torch.equal(ref, got), flush=True)

if "overlap" in part:
    from ch4.baseline_grad_overlap import make_inputs, param_names, loss_fn
    from ch4.dist_common import bucket_cap, bucket_views, plan_buckets
    inp = make_inputs(0, r, dev, False)
    params = [inp[k].detach().requires_grad_(True) for k in param_names(inp)]
    x, y = inp["x"], inp["y"]
    plan = plan_buckets(params, bucket_cap(params)); flats, views = bucket_views(params, plan)
    if r == 0: print("buckets", len(plan), [len(b) for b in plan], flush=True)
    def bwd():
        for p in params: p.grad = None
        loss_fn(params, x, y).backward(); torch._foreach_copy_(views, [p.grad for p in params])
    timeit("overlap compute only (fwd+bwd+copy)", bwd)
    def comm(g):
        return lambda: [dist.all_reduce(f, group=g) for f in flats]
    for k, g in G.items(): timeit(f"overlap comm only {k}", comm(g))
    def base():
        bwd(); [dist.all_reduce(f) for f in flats]
    timeit("overlap baseline", base)
    bucket_of = {i: b for b, idx in enumerate(plan) for i in idx}
    st = {"g": None, "missing": [], "works": []}
    def on_grad(i):
        def hook(p):
            views[i].copy_(p.grad); b = bucket_of[i]; st["missing"][b] -= 1
            if st["missing"][b] == 0: st["works"].append(dist.all_reduce(flats[b], group=st["g"], async_op=True))
        return hook
    handles = [p.register_post_accumulate_grad_hook(on_grad(i)) for i, p in enumerate(params)]
    def hooked(g):
        def f():
            st["g"] = g; st["missing"] = [len(i) for i in plan]; st["works"] = []
            for p in params: p.grad = None
            loss_fn(params, x, y).backward()
            for w in st["works"]: w.wait()
        return f
    for k, g in G.items(): timeit(f"overlap hooks {k}", hooked(g))
    for h in handles: h.remove()

if "pipe" in part:
    from ch4.baseline_pipeline_handoff import make_inputs, stage
    inp = make_inputs(0, r, dev, False); wt = inp["w"]; data = inp["x" if r == 0 else "target"]
    buf = torch.empty_like(data[0])
    # the stage's matmul and tanh only: rank 1's row loss after each micro-batch is not in it (the pair's
    # stages(w) has it since 98d0658; profiles/h200x2/ch4-80dc133/pipeline-a20afe4)
    timeit("pipe compute x8", lambda: [stage(data[i], wt) for i in range(8)])
    def sends():
        for i in range(8):
            dist.send(data[i], 1) if r == 0 else dist.recv(buf, 0)
    timeit("pipe 8 blocking send/recv alone", sends)
    def one():
        dist.send(data[0], 1) if r == 0 else dist.recv(buf, 0)
    timeit("pipe 1 send/recv alone", one)
dist.barrier(); dist.destroy_process_group()
