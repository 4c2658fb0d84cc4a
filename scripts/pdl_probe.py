#!/usr/bin/env python3
"""Probe the PDL decode step's launch settings on this GPU (a measurement script, not a pair).

    python scripts/pdl_probe.py [--out FILE.jsonl]      (needs a CUDA GPU with Triton)

For each trial (ch16/pdl_step.py's defaults; the same with programmatic dependent launch off; other
attention split counts; the block sizes before c0c3e3c's probe), on decode_graph's workload (llama-1b,
bf16, batch 1, context 1024): the step captured in a CUDA graph, its logits' relative error against the
eager step, and ms per step over 200 back-to-back replays. Prints one JSON line per trial (and writes them
to --out); a trial that fails (an error, or logits beyond bf16's tolerance of the eager step's) prints why, the
others still run, and the exit status is 1. BLOCKS in ch16/pdl_step.py came
from such a probe on the H100.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", help="also write the JSON lines to this file")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: scripts/pdl_probe.py needs a CUDA GPU; none is visible to PyTorch", file=sys.stderr)
        return 2
    from ch16 import baseline_decode_graph as eager
    from ch16.decode import capture_graph, decode_workload
    from ch16.decode_profile import per_step_ms
    from ch16.pdl_step import BLOCKS, PDLStep
    from common.verify import verify_outputs

    w = decode_workload(0, "cuda", False, batch=1, context=1024)
    k0, v0 = w.inputs["k_cache"].clone(), w.inputs["v_cache"].clone()
    ref = eager.prepare(w)().float()

    def reset():
        w.inputs["k_cache"].copy_(k0)
        w.inputs["v_cache"].copy_(v0)
    before = {"qkv": (4, 4), "wo": (4, 4), "w13": (4, 4), "w2": (2, 8), "head": (4, 4)}   # at c0c3e3c
    trials = [("default", BLOCKS, True, 32), ("default, PDL off", BLOCKS, False, 32), ("splits 16", BLOCKS, True, 16),
              ("splits 64", BLOCKS, True, 64), ("c0c3e3c blocks", before, True, 32)]
    rows = []
    for name, blocks, pdl, splits in trials:
        try:
            reset()
            step = PDLStep(w.inputs["model"], w.inputs["k_cache"], w.inputs["v_cache"], w.inputs["token"],
                           w.inputs["input_pos"], pdl=pdl, blocks=blocks, splits=splits)
            fn = capture_graph(step)
            reset()
            check = verify_outputs([ref], [fn().float()], "bf16")
            if not check.ok:   # a wrong step's time is no result
                raise ValueError(f"its logits differ from the eager step's: {check.message}")
            row = {"trial": name, "ms": round(per_step_ms(fn), 4), "rel_err": check.rel_err}
        except Exception as exc:   # one trial's failure is reported, the others still run
            row = {"trial": name, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.out:
        Path(a.out).write_text("".join(json.dumps(row) + "\n" for row in rows))
    failed = [row["trial"] for row in rows if "error" in row]
    if failed:
        print(f"error: {len(failed)} trial(s) failed: {'; '.join(failed)} (each line says why)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
