"""Speculative decoding over a sweep of acceptance rate and k: measured speedup vs Leviathan et al.'s expectation.

For each deep-layer scale (which sets how often the early-exit draft agrees with the target) and
each k, this runs the target alone and with the draft, on the same prompt, and reports:

    α          accepted proposals / proposals (per-proposal acceptance, measured)
    E          (1 - α^(k+1)) / (1 - α): expected tokens per target pass (Leviathan et al., 2023)
    tok/pass   tokens emitted per target pass (measured)
    c          draft step time / target step time (measured, CUDA graphs on a GPU)
    expected   E / (k c + v + α^k c), v = verification pass time / target step time (measured); the
               last term: a round where all k are accepted feeds the draft its k-th proposal (one more step)
    measured   time of the target alone / time with the draft, the two timed in the same interleaved
               rounds (common.timing.time_together, the harness's method)

Every run is checked with the logits-and-margin rule (common/decode_check.py): the speculative decoder's
logits teacher-forced on the target's own greedy tokens, and its free-running tokens.

    python ch16/speculative_sweep.py [--device cuda] [--quick] [--budget S] [--out DIR]
"""
from __future__ import annotations

import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import argparse
import json

import torch

from ch16.model import KVCache
from ch16.speculative import GreedyDecoder, SpeculativeDecoder, spec_workload_inputs
from common.decode_check import check_decode
from common.inputs import SEEDS
from common.timing import time_call, time_together


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    return k + 1.0 if alpha >= 1.0 else (1 - alpha ** (k + 1)) / (1 - alpha)


def run(device, quick: bool, scales, ks, budget_s: float, seed: int = 7) -> list[dict]:
    rows = []
    precision = "bf16" if device.type == "cuda" else "fp32"
    for scale in scales:
        inputs, s, model = spec_workload_inputs(seed, device, quick, scale=scale, k=max(ks))
        cache = KVCache(inputs["k_cache"], inputs["v_cache"])
        dcache = KVCache(inputs["draft_k_cache"], inputs["draft_v_cache"])
        greedy = GreedyDecoder(model, cache, inputs["prompt"], s["n_new"])
        ref_logits = greedy().clone()
        ref_tokens = ref_logits.argmax(-1)
        draft_ms = None
        for k in ks:
            spec = SpeculativeDecoder(model, cache, dcache, s["depth"], inputs["prompt"], s["n_new"], k)
            out_logits = spec().clone()
            alpha, rounds = spec.acceptance, spec.rounds
            spec.forced = ref_tokens
            tf_logits = spec().clone()
            spec.forced = None
            verdict = check_decode(ref_tokens, ref_logits, tf_logits, out_logits.argmax(-1), precision)
            times = time_together({"alone": greedy, "spec": spec}, device, budget_s=budget_s)
            t_alone, t_spec = times["alone"].median_ms, times["spec"].median_ms
            step_ms = t_alone / s["n_new"]
            if draft_ms is None:  # one draft step and one verification pass, each alone
                draft_ms = time_call(spec.draft, device, budget_s=budget_s).median_ms
            verify_ms = time_call(spec.verify, device, budget_s=budget_s).median_ms
            c, v = draft_ms / step_ms, verify_ms / step_ms
            E = expected_tokens_per_pass(alpha, k)
            rows.append({"scale": scale, "k": k, "alpha": alpha, "expected_tokens_per_pass": E,
                         "tokens_per_pass": s["n_new"] / rounds, "rounds": rounds, "n_new": s["n_new"],
                         "draft_over_step": c, "verify_over_step": v, "step_ms": step_ms,
                         "alone_ms": t_alone, "spec_ms": t_spec, "expected_speedup": E / (k * c + v + alpha ** k * c),
                         "measured_speedup": t_alone / t_spec, "verified": verdict.ok,
                         "verification": verdict.as_dict(), "depth": s["depth"], "cfg": s["cfg"]})
            r = rows[-1]
            print(f"scale {scale:4.2f} k {k}: α {alpha:.2f}  E {E:.2f}  tok/pass {r['tokens_per_pass']:.2f}  "
                  f"c {c:.3f}  v {v:.2f}  expected {r['expected_speedup']:.2f}x  measured {r['measured_speedup']:.2f}x  "
                  f"[{'ok' if verdict.ok else 'FAILED'}: {verdict.message}]", flush=True)
    return rows


def plot(rows: list[dict], path: pathlib.Path) -> None:
    """Measured and expected speedup against the measured acceptance rate, one colour per k."""
    from common.figures import chart  # matplotlib: heavy, and only for a figure (pair files import this module)

    def draw(ax):
        for k in sorted({r["k"] for r in rows}):
            rs = [r for r in rows if r["k"] == k]
            ax.plot([r["alpha"] for r in rs], [r["measured_speedup"] for r in rs], "o", label=f"k={k} measured")
            ax.plot([r["alpha"] for r in rs], [r["expected_speedup"] for r in rs], "x",
                    color=ax.lines[-1].get_color(), label=f"k={k} expected")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set_xlabel("acceptance rate α (measured)")
        ax.set_ylabel("speedup over the target alone")
        ax.legend(fontsize=7)
    chart(path, draw, size=(5, 4))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                    help="cuda or cpu (default: cuda where a GPU is visible; a CPU runs the small model)")
    ap.add_argument("--quick", action="store_true", help="the small model and a short generation, as on a CPU")
    ap.add_argument("--scales", type=float, nargs="+", default=[0.0, 0.25, 0.5, 1.0, 2.0],
                    help="deep-layer scales: 0 makes the draft exact (every proposal accepted), larger scales make "
                         "it disagree more (default 0 0.25 0.5 1 2)")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8],
                    help="tokens the draft proposes per round (default 1 2 4 8)")
    ap.add_argument("--budget", type=float, default=1.0, metavar="S",
                    help="the harness's timing budget per timed call (the target alone, with the draft, one draft "
                    "step, one verification pass), s (default 1)")
    ap.add_argument("--seed", type=int, default=SEEDS[0], help="the prompt's seed (default: the harness's seed A, "
                    "so the row at the pair's setting is the pair's prompt)")
    ap.add_argument("--out", type=pathlib.Path,
                    help="folder for speculative_sweep.json and .png (default: print the table only)")
    a = ap.parse_args(argv)
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: ch16/speculative_sweep.py --device cuda needs a CUDA GPU; none is visible to PyTorch",
              file=sys.stderr)
        return 2
    rows = run(device, a.quick, a.scales, a.ks, a.budget, a.seed)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        meta = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
                "torch": torch.__version__, "quick": a.quick, "seed": a.seed, "budget_s": a.budget}
        (a.out / "speculative_sweep.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
        plot(rows, a.out / "speculative_sweep.png")
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
