"""Where chapter 16's time goes on a GPU, and why its compiled decode variants missed the bf16 tolerance.

    python scripts/ch16_probe.py decode OUT.json      eager vs fp32 truth vs torch.compile (emulate_precision_casts off/on)
    python scripts/ch16_probe.py batching OUT.json [CONFIG...]   static vs continuous bursts, prefill vs decode time

A measurement script (session 30, profiles/h100/ch16-probe-917ad11), not a pair: its figures are one run each."""
import sys, time, json, pathlib, contextlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import torch

part = sys.argv[1]
out = {}
def sync(): torch.cuda.synchronize()

if part == "batching":
    from ch16.decode import served_model
    from ch16.batching import Engine, make_trace, serve, settings
    t = time.time(); model = served_model("cuda"); sync(); out["build_model_s"] = time.time() - t
    base = dict(settings(torch.device("cuda"), False))
    configs = {
        "32x8_p128_o64_L2048":   # the pair at 4e9eeb0-f68ba3f (24 requests since b86fd00)
        dict(n=32, slots=8, prompt_median=128, out_median=64),
        "L640_32x8_p128_o64": dict(n=32, slots=8, prompt_median=128, out_median=64, max_prompt=384, max_out=240, max_len=640),
        "24x8_p128_o64": dict(n=24, slots=8, prompt_median=128, out_median=64),
        "32x8_p64_o48_L640": dict(n=32, slots=8, prompt_median=64, out_median=48, max_prompt=256, max_out=200, max_len=512),
        "16x8_p128_o64": dict(n=16, slots=8, prompt_median=128, out_median=64),
    }
    only = sys.argv[3:] or list(configs)
    for name, c in configs.items():
        if name not in only: continue
        s = {**base, **c}
        engine = Engine(model, s["slots"], s["max_len"], s["chunk"])
        trace = make_trace(s["n"], 1.0, 0, model.cfg.vocab_size, s["prompt_median"], s["out_median"], s["sigma"],
                           s["max_prompt"], s["max_out"], "cuda")
        for r in trace: r.arrival = 0.0
        acc = {"prefill": 0.0, "decode": 0.0}
        pf, dec = engine.prefill_chunk, engine.decode
        def timed(f, key):
            def g(*a):
                sync(); t0 = time.perf_counter(); r = f(*a); sync(); acc[key] += time.perf_counter() - t0; return r
            return g
        row = {}
        for policy in ("static", "continuous"):
            serve(engine, trace, policy, s["budget"], s["chunk"])  # warm
            walls = []
            for _ in range(2):
                sync(); t0 = time.perf_counter(); serve(engine, trace, policy, s["budget"], s["chunk"]); sync()
                walls.append(time.perf_counter() - t0)
            engine.prefill_chunk, engine.decode = timed(pf, "prefill"), timed(dec, "decode")
            acc.update(prefill=0.0, decode=0.0)
            res = serve(engine, trace, policy, s["budget"], s["chunk"])
            engine.prefill_chunk, engine.decode = pf, dec
            row[policy] = {"wall_s": walls, "prefill_s": acc["prefill"], "decode_s": acc["decode"]}
        row["ratio"] = min(row["static"]["wall_s"]) / min(row["continuous"]["wall_s"])
        # one decode graph replay alone
        sync(); t0 = time.perf_counter()
        for _ in range(50): engine.decode()
        sync(); row["graph_replay_ms"] = (time.perf_counter() - t0) / 50 * 1e3
        out[name] = row
        print(name, json.dumps(row), flush=True)
        del engine; torch.cuda.empty_cache()

if part == "decode":
    from ch16.decode import decode_workload
    from ch16.model import forward_no_cache, cast_model, KVCache, decode_step
    from common.verify import verify_outputs
    t = time.time(); w = decode_workload(0, "cuda", False, batch=1, context=1024); sync(); out["workload_s"] = time.time() - t
    import types
    import ch16.baseline_decode_graph as B, ch16.optimized_decode_graph_compile as C
    from ch16.fused_step import prepare_fused, split_kv_attention
    F = types.SimpleNamespace(prepare=prepare_fused)                                   # until f68ba3f: the _fused variant
    S = types.SimpleNamespace(prepare=lambda w: prepare_fused(w, True, split_kv_attention))   # and the _splitkv one
    import copy
    k0, v0 = w.inputs["k_cache"].clone(), w.inputs["v_cache"].clone()
    def reset():
        w.inputs["k_cache"].copy_(k0); w.inputs["v_cache"].copy_(v0)
    ref = B.prepare(w)().float().cpu()
    reset()
    model = w.inputs["model"]
    m32 = copy.deepcopy(model); cast_model(m32, dtype=torch.float32)
    seq = torch.cat([w.inputs["prefix"], w.inputs["token"]], 1)
    with torch.no_grad():
        truth = forward_no_cache(m32, seq).float().cpu()
    del m32; torch.cuda.empty_cache()
    def err(a, b):
        v = verify_outputs([b], [a], "bf16"); return {"rel": v.rel_err, "max": v.max_err, "ok": v.ok}
    out["eager_vs_truth"] = err(ref, truth)
    print("eager vs fp32 truth", out["eager_vs_truth"], flush=True)
    def ms(fn, n=100):
        for _ in range(5): fn()
        sync(); e0, e1 = torch.cuda.Event(True), torch.cuda.Event(True); e0.record()
        for _ in range(n): fn()
        e1.record(); sync(); return e0.elapsed_time(e1) / n
    reset(); out["eager_ms"] = ms(B.prepare(w), 30); reset()
    for name, mod, emulate in [("compile", C, False), ("compile", C, True), ("fused", F, True), ("splitkv", S, True),
                               ("fused", F, False)]:
        torch._dynamo.reset()
        import ch16.decode, ch16.fused_step   # the variants compile inside compile_like_eager(): off here for emulate0
        like_eager = ch16.decode.compile_like_eager if emulate else contextlib.nullcontext
        C.compile_like_eager = ch16.fused_step.compile_like_eager = like_eager
        reset(); t = time.time()
        fn = mod.prepare(w); sync(); comp = time.time() - t
        reset(); o = fn().float().cpu()
        row = {"compile_s": comp, "vs_eager": err(o, ref), "vs_truth": err(o, truth)}
        reset(); row["ms"] = ms(fn)
        reset()
        key = f"{name}_emulate{int(emulate)}"; out[key] = row; print(key, json.dumps(row), flush=True)
        del fn

pathlib.Path(sys.argv[2]).write_text(json.dumps(out, indent=1))
