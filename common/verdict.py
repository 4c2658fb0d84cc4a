"""From profiler metrics to a verdict and a next step: the checklists readers know, written down as code.

`verdict(metrics, device_type)` is pure, so the walkthrough, any kernel's ncu CSV and a harness report get the same
reading, and the thresholds are tested rather than remembered. ch13/README.md's table gives each one's source and
reason: Triton's grading against the measured ceiling (`--peaks`), whose bars the H100 reports give no reason to lower
(ch1's coalesced kernel reaches 97.1% of copy bandwidth, its tf32 and bf16 GEMMs 87.6% and 88.6% of the matmul peak:
profiles/h100/ch1/results.json); Nsight Compute's speed of light, sectors per request (ideal: 32 threads x 4 bytes =
4 sectors of 32 bytes), occupancy against registers (65536 per SM / 128 / 32 = 16 warps of 64 = 25%) and L2 hit rate;
PyTorch's tuning guide and profiler recipe for the step's idle time, allocation and kernel count.
Every rule but the allocation share reads GPU hardware: a CPU run gets none (its figures are not results).
As a script, `python common/verdict.py [--recommend] profiles/runs/<run>/results.json` prints `results_verdicts`
(or `recommendations`, each report's recommendations.md)."""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

if not __package__:  # run as a script (python common/verdict.py): the repository root, for common.results
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common.results import run_label, variant_status  # noqa: E402

BANDWIDTH_GOOD, BANDWIDTH_POOR, COMPUTE_GOOD, COMPUTE_POOR = 60.0, 30.0, 80.0, 50.0  # percent of the measured peak
SOL_LOW, SOL_BOUND = 50.0, 60.0  # Nsight Compute's speed of light (percent of peak)
SECTORS_SLACK, OCCUPANCY_LOW_PCT, REGISTERS_HIGH, L2_HIT_LOW_PCT = 2.0, 25.0, 128, 50.0
GPU_IDLE_HIGH_PCT, ALLOC_SHARE_HIGH_PCT, MANY_KERNELS, SMALL_KERNEL_US = 20.0, 10.0, 100, 10.0
HALF_CEILING_PCT = 50.0


@dataclasses.dataclass
class Finding:
    rule: str        # short name of the rule that fired
    evidence: str    # the metric and its threshold, as a reader would quote it
    next_step: str   # what to try
    gpu: bool = True  # the rule reads GPU hardware: given for GPU runs only

    def line(self) -> str:
        return f"- **{self.rule}**: {self.evidence}. Next: {self.next_step}"


def grade(pct: float, kind: str) -> str:
    """Triton's grading: "good", "fair" or "needs work" for a bandwidth or compute share of peak."""
    good, poor = (BANDWIDTH_GOOD, BANDWIDTH_POOR) if kind == "bandwidth" else (COMPUTE_GOOD, COMPUTE_POOR)
    if kind not in ("bandwidth", "compute"):
        raise ValueError(f"kind must be 'bandwidth' or 'compute', not {kind!r}")
    return "good" if pct > good else "needs work" if pct < poor else "fair"


def _num(m: dict, key: str):
    v = m.get(key)
    return None if v is None else float(v)


def verdict(m: dict, device_type: str | None = None) -> list[Finding]:
    """The findings for one kernel or one step (empty: nothing wrong by these rules). Each rule fires only when its
    keys are in `m`: Nsight Compute's sm_throughput_pct, memory_throughput_pct, achieved_occupancy_pct,
    registers_per_thread, sectors_per_request, access_bytes (per thread and load, default 4), l2_hit_rate_pct;
    torch.profiler's gpu_idle_pct, alloc_cpu_pct, kernels_per_step, mean_kernel_us; the harness's bound, pct_of_ceiling.
    `device_type` ("cuda"/"cpu"; else m's key; else a GPU's, as profilers' kernel metrics are): off a GPU only the
    rules that do not read GPU hardware are given."""
    out = _kernel_findings(m) + _step_findings(m)
    if (device_type or m.get("device_type") or "cuda") != "cuda":
        out = [f for f in out if not f.gpu]
    return out


def _kernel_findings(m: dict) -> list[Finding]:
    """Nsight Compute's rules, on one kernel's metrics."""
    out: list[Finding] = []
    sm, mem = _num(m, "sm_throughput_pct"), _num(m, "memory_throughput_pct")
    if sm is not None and mem is not None:
        if sm < SOL_LOW and mem < SOL_LOW:
            out.append(Finding("latency-bound", f"SM throughput {sm:.0f}% and memory throughput {mem:.0f}% of peak, "
                               f"both under {SOL_LOW:.0f}%", "more independent work per SM: more warps or blocks "
                               "(occupancy), more bytes in flight per thread, fewer dependent steps; check the "
                               "wave count against the SM count"))
        elif mem >= SOL_BOUND and mem >= sm:
            out.append(Finding("memory-bound", f"memory throughput {mem:.0f}% of peak (SM {sm:.0f}%)",
                               "optimize memory access: move fewer bytes (fuse, lower precision), coalesce, "
                               "reuse data from shared memory or L2"))
        elif sm >= SOL_BOUND:
            out.append(Finding("compute-bound", f"SM throughput {sm:.0f}% of peak (memory {mem:.0f}%)",
                               "optimize compute: fewer instructions per result, tensor cores, lower precision"))
    spr = _num(m, "sectors_per_request")
    if spr is not None:
        ideal = 32 * float(m.get("access_bytes", 4)) / 32  # 32 threads x bytes per access / 32-byte sectors
        if spr > SECTORS_SLACK * ideal:
            out.append(Finding("uncoalesced loads", f"{spr:.1f} sectors per global-load request, ideal {ideal:.0f} "
                               f"for {m.get('access_bytes', 4)}-byte accesses", "make consecutive threads read "
                               "consecutive addresses (transpose through shared memory, change the layout)"))
    occ, regs = _num(m, "achieved_occupancy_pct"), _num(m, "registers_per_thread")
    at_a_roof = max((v for v in (sm, mem) if v is not None), default=0.0) >= SOL_BOUND
    # low occupancy costs only a kernel that is not already near a roof: Hopper's GEMMs run one 168-register
    # CTA per SM (15% occupancy) at 90% of the SM's peak, by design
    if occ is not None and regs is not None and occ < OCCUPANCY_LOW_PCT and regs > REGISTERS_HIGH and not at_a_roof:
        out.append(Finding("register-limited occupancy", f"achieved occupancy {occ:.0f}% with {regs:.0f} "
                           "registers per thread", "cap registers (__launch_bounds__, maxrregcount, smaller tiles "
                           "or fewer stages in Triton), watching for spills"))
    l2 = _num(m, "l2_hit_rate_pct")
    if l2 is not None and l2 < L2_HIT_LOW_PCT and mem is not None and mem >= SOL_BOUND:
        out.append(Finding("poor L2 reuse", f"L2 hit rate {l2:.0f}% in a memory-bound kernel",
                           "reorder the tile traversal (grouped ordering) or enlarge tiles so neighbours share data"))
    return out


def _step_findings(m: dict) -> list[Finding]:
    """The profiler's rules on one step, and Triton's grading of its share of the ceiling."""
    out: list[Finding] = []
    idle = _num(m, "gpu_idle_pct")
    if idle is not None and idle > GPU_IDLE_HIGH_PCT:
        out.append(Finding("GPU waiting on the host", f"the GPU is idle {idle:.0f}% of the step "
                           f"(over {GPU_IDLE_HIGH_PCT:.0f}%)", "remove host syncs (.item(), .cpu(), prints), "
                           "overlap copies (pinned memory, non_blocking), replay the step as a CUDA graph"))
    alloc = _num(m, "alloc_cpu_pct")
    if alloc is not None and alloc > ALLOC_SHARE_HIGH_PCT:
        out.append(Finding("allocation on the host", f"{alloc:.0f}% of the CPU time is in allocation "
                           f"(over {ALLOC_SHARE_HIGH_PCT:.0f}%)", "preallocate buffers and reuse them (out=, "
                           "a static cache), avoid torch.cuda.empty_cache()", gpu=False))
    nk, mean_us = _num(m, "kernels_per_step"), _num(m, "mean_kernel_us")
    if nk is not None and mean_us is not None and nk > MANY_KERNELS and mean_us < SMALL_KERNEL_US:
        out.append(Finding("many small kernels", f"{nk:.0f} kernels per step averaging {mean_us:.1f} us",
                           "batch or fuse them (torch.compile, foreach ops, a fused kernel) or replay the step "
                           "as a CUDA graph"))
    pct, bound = _num(m, "pct_of_ceiling"), m.get("bound")
    if pct is not None and bound in ("memory", "compute"):
        kind = "bandwidth" if bound == "memory" else "compute"
        if (g := grade(pct, kind)) != "good":
            step = ("raise the batch size (or fuse the small GEMMs) so the matrices fill the tensor cores"
                    if kind == "compute" else "move fewer bytes per result: fuse passes, lower the precision, "
                    "read each byte once")
            out.append(Finding(f"{kind} {g}", f"{pct:.0f}% of the measured {kind} ceiling (Triton's grading: "
                               f"good above {BANDWIDTH_GOOD if kind == 'bandwidth' else COMPUTE_GOOD:.0f}%, needs "
                               f"work below {BANDWIDTH_POOR if kind == 'bandwidth' else COMPUTE_POOR:.0f}%)", step))
    return out


def device_type(results: dict, pair: dict) -> str | None:
    """The device a pair ran on: its own `device_type`, else the run's (None in older documents)."""
    return pair.get("device_type") or (results.get("device") or {}).get("type")


def results_verdicts(results: dict, always: bool = True) -> str:
    """Markdown: the verdict and a next step for every verified optimized variant below half its ceiling; not for
    baselines (the "before"), pitfalls and tradeoffs (slow by design) or CPU runs. `always=False`: "" if none."""
    lines = ["## Verdicts (common/verdict.py)", "",
             f"Optimized variants below {HALF_CEILING_PCT:.0f}% of their ceiling, read against the thresholds in "
             "common/verdict.py.", ""]
    found = off_gpu = 0
    for pair in results.get("pairs", []):
        where = device_type(results, pair)
        if where not in (None, "cuda"):
            off_gpu += 1
            continue
        for v in pair.get("variants", []):
            pct = v.get("pct_of_ceiling")
            if (pct is None or not v.get("verified") or v.get("suspect") or pct >= HALF_CEILING_PCT
                    or v.get("kind", "optimized") != "optimized"):
                continue
            kernels, median = v.get("kernels_per_call"), v.get("median_ms")
            m = {"pct_of_ceiling": pct, "bound": pair.get("bound")}
            if kernels and median:
                m.update(kernels_per_step=kernels, mean_kernel_us=1000.0 * median / kernels)
            if findings := verdict(m, device_type=where or "cuda"):
                found += 1
                lines += [f"### ch{pair.get('chapter')}/{pair['name']} {v['name']} "
                          f"({pct:.0f}% of {v.get('ceiling') or 'its ceiling'})"] + [f.line() for f in findings] + [""]
    if not found:
        if not always:
            return ""
        lines.append("None." + (" Pairs run on a CPU get no verdict: the rules read GPU hardware, and a CPU's figures "
                                "check that the code runs, they are not results." if off_gpu else ""))
    return "\n".join(lines) + "\n"


def _trusted(v: dict) -> bool:
    return variant_status(v)[0] not in ("skipped", "FAILED", "SUSPECT") and v.get("median_ms") is not None


def _fastest(pair: dict) -> dict | None:
    """What a reader would ship of this pair: its fastest trusted optimized variant, else its trusted baseline."""
    fast = [v for v in pair.get("variants", []) if _trusted(v) and v.get("kind", "optimized") == "optimized"]
    base = pair.get("baseline") or {}
    pool = fast or ([base] if _trusted(base) else [])
    return min(pool, key=lambda v: v["median_ms"]) if pool else None


def _untrusted(pair: dict) -> list[str]:
    """One line per reason not to trust a figure of this pair: the pair failed, or a variant is FAILED or SUSPECT."""
    key, out = f"ch{pair.get('chapter')}/{pair.get('name')}", []
    if pair.get("error") and not pair.get("variants") and pair.get("status") != "skipped":  # skipped: not run here
        out.append(f"**{key}** did not run to the end: {pair['error']}")
    for v in [pair.get("baseline") or {}, *pair.get("variants", [])]:
        status, why = variant_status(v) if v else ("skipped", "")
        if status in ("FAILED", "SUSPECT"):
            out.append(f"**{key}** {v.get('name')}: {status}, {why}")
    return out


# What the time above the floor is, by bound, where Triton's grading (memory and compute only) does not apply.
ABOVE_THE_FLOOR = {
    "launch": "the time above the floor is issue overhead: fewer launches per call (batch the work, fuse kernels, "
              "replay the call as a CUDA graph); `--profile torch` counts the kernels a call runs",
    "transfer": "the link: move fewer bytes across it (keep data on the GPU, gather only what is needed, lower "
                "the precision), or hide the copy behind compute (pinned memory, a copy stream)",
    "link": "the interconnect: fewer or larger messages, overlap communication with compute",
}


def recommendations(results: dict) -> str:
    """recommendations.md: what to fix first, each item citing its measured figure. First every untrusted figure
    (a speedup on a wrong answer is no result); then each GPU pair's fastest trusted implementation, lowest share of
    its ceiling first, with the ms above the floor that share implies and a next step. Launch-bound pairs rank apart
    (launch overhead dwarfs their floor: their small shares would head any list), then pairs with no share; a CPU
    run gets the first list only."""
    where = run_label(results) if results.get("device") else "?"   # a CPU run: the CPU's model, as summary.md
    lines = ["# What to fix first", "",
             f"From the run on {where} at commit `{results.get('git_commit', '?')}`"
             f"{' (--quick: a smoke run, not results)' if results.get('quick') else ''}, by common/verdict.py. "
             "Untrusted figures come first; then each pair's fastest verified implementation, furthest from its "
             "measured ceiling first.", "", "## Not trusted: fix these before reading any speedup", ""]
    untrusted = [line for pair in results.get("pairs", []) for line in _untrusted(pair)]
    lines += [f"{i}. {line}" for i, line in enumerate(untrusted, 1)] or ["None: every variant that ran verified."]
    ranked, launch, apart = [], [], []
    for pair in results.get("pairs", []):
        best = _fastest(pair)
        if device_type(results, pair) not in (None, "cuda") or best is None:
            continue
        key, bound = f"ch{pair.get('chapter')}/{pair.get('name')}", str(pair.get("bound"))
        if best.get("pct_of_ceiling") is None:
            apart.append(f"- **{key}** ({best['name']}, {best['median_ms']:.4g} ms): no share of a ceiling"
                         f"{': ' + best['ceiling_note'] if best.get('ceiling_note') else ''}")
        else:
            (launch if bound == "launch" else ranked).append((best["pct_of_ceiling"], key, bound, best))
    if any(device_type(results, p) not in (None, "cuda") for p in results.get("pairs", [])):
        lines += ["", "Pairs run on a CPU are not ranked: a CPU's figures check that the code runs; they are not "
                      "results."]
    for title, items in (("Furthest from the ceiling", ranked), ("Launch-bound, ranked apart", launch)):
        if items:
            lines += ["", f"## {title}", ""]
            for i, item in enumerate(sorted(items, key=lambda r: r[0]), 1):
                lines += _recommendation(i, *item)
    if apart:
        lines += ["", "## Not ranked (no share of a ceiling applies)", ""] + apart
    return "\n".join(lines) + "\n"


def _recommendation(i: int, pct: float, key: str, bound: str, best: dict) -> list[str]:
    """One ranked item: the figure, then the next step (the rules, or ABOVE_THE_FLOOR for this bound)."""
    left = best["median_ms"] * max(0.0, 1.0 - pct / 100.0)
    head = (f"{i}. **{key}**: {best['name']} at {pct:.1f}% of {best.get('ceiling') or 'its ceiling'} ({bound}-bound), "
            f"{best['median_ms']:.4g} ms a call, {left:.4g} ms above the floor that share implies.")
    m, kernels = {"pct_of_ceiling": pct, "bound": bound}, best.get("kernels_per_call")
    if kernels:
        m.update(kernels_per_step=kernels, mean_kernel_us=1000.0 * best["median_ms"] / kernels)
    steps = [f"   {f.line()[2:]}" for f in verdict(m, device_type="cuda")]
    if bound in ABOVE_THE_FLOOR:
        steps.append(f"   Next: {ABOVE_THE_FLOOR[bound]}.")
    elif not steps:
        steps.append("   Good by Triton's grading: what is left is the bound itself (fewer bytes or FLOPs).")
    return [head] + steps


def main(argv: list[str]) -> int:
    """The script: 0 with the verdicts printed, 2 with one `error:` line when the report cannot be read."""
    usage = ("usage: python common/verdict.py [--recommend] RESULTS.json (a harness report): the verdicts, or with "
             "--recommend what to fix first (the recommendations.md every report now has)")
    if argv in (["-h"], ["--help"]):
        print(usage)
        return 0
    recommend = argv[:1] == ["--recommend"]
    argv = argv[1:] if recommend else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        return _error(usage)
    try:
        doc = json.loads(Path(argv[0]).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return _error(f"cannot read {argv[0]}: {getattr(e, 'strerror', None) or e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("pairs", []), list):
        return _error(f"{argv[0]} is not a harness report (results.json: an object with a list of pairs)")
    try:
        text = recommendations(doc) if recommend else results_verdicts(doc)
    except (KeyError, TypeError, AttributeError, ValueError) as e:  # keys present but of the wrong kind
        return _error(f"{argv[0]} is not a harness report: malformed ({type(e).__name__}: {e})")
    print(text)
    return 0


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
