"""Where chapter 16's batching time goes on a GPU: static vs continuous bursts, prefill vs decode time.

    python scripts/ch16_probe.py batching OUT.json [CONFIG...]

A measurement script (session 30, profiles/h100/ch16-probe-917ad11), not a pair: its figures are one run each.
Its `decode` part (eager vs an fp32 step vs torch.compile with and without emulate_precision_casts, which
made profiles/h100/ch16-probe-917ad11/decode.json) is in git history before this commit; ch16/decode_profile.py
now measures the same (each variant against an fp32 step, Inductor's own rounding or eager's)."""
import sys, time, json, pathlib
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

pathlib.Path(sys.argv[2]).write_text(json.dumps(out, indent=1))
