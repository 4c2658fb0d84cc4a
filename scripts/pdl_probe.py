"""Probe (not a pair): the PDL step's rows-per-program and warps, PDL on and off, on the decode workload."""
import sys, json, itertools; sys.path.insert(0, '.')
import torch
from ch16.decode import decode_workload, capture_graph
from ch16.decode_profile import per_step_ms
from ch16.pdl_step import PDLStep
from ch16 import baseline_decode_graph as eager
w = decode_workload(0, "cuda", False, batch=1, context=1024)
k0, v0 = w.inputs["k_cache"].clone(), w.inputs["v_cache"].clone()
ref = eager.prepare(w)().float()
def reset():
    w.inputs["k_cache"].copy_(k0); w.inputs["v_cache"].copy_(v0)
base = {"qkv": (4, 4), "wo": (4, 4), "w13": (4, 4), "w2": (2, 8), "head": (4, 4)}
trials = [("base", base, True), ("base, pdl off", base, False)]
for key in base:
    for rows, warps in [(2, 4), (4, 8), (8, 4), (8, 8), (2, 8), (4, 4)]:
        b = dict(base); b[key] = (rows, warps)
        if b != base and not (key in ("qkv",) and rows > 64):
            trials.append((f"{key}={rows}x{warps}", b, True))
for name, blocks, pdl in trials:
    try:
        reset()
        st = PDLStep(w.inputs["model"], w.inputs["k_cache"], w.inputs["v_cache"], w.inputs["token"], w.inputs["input_pos"], pdl=pdl, blocks=blocks)
        fn = capture_graph(st)
        reset(); out = fn().float()
        err = ((out - ref).norm() / ref.norm()).item()
        print(json.dumps({"trial": name, "ms": round(per_step_ms(fn), 4), "rel_err": err}), flush=True)
    except Exception as e:
        print(json.dumps({"trial": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}), flush=True)
