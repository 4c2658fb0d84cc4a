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
from ch16.pdl_step import BLOCKS as base
old = {"qkv": (4, 4), "wo": (4, 4), "w13": (4, 4), "w2": (2, 8), "head": (4, 4)}
trials = [("default", base, True, 32), ("default, pdl off", base, False, 32), ("splits 64", base, True, 64),
          ("c0c3e3c blocks", old, True, 32)]
for name, blocks, pdl, splits in trials:
    try:
        reset()
        st = PDLStep(w.inputs["model"], w.inputs["k_cache"], w.inputs["v_cache"], w.inputs["token"], w.inputs["input_pos"], pdl=pdl, blocks=blocks, splits=splits)
        fn = capture_graph(st)
        reset(); out = fn().float()
        err = ((out - ref).norm() / ref.norm()).item()
        print(json.dumps({"trial": name, "ms": round(per_step_ms(fn), 4), "rel_err": err}), flush=True)
    except Exception as e:
        print(json.dumps({"trial": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}), flush=True)
