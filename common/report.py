"""Write a run's report (summary.md, recommendations.md, the figures, results.json) and compare two runs
(--compare). The figures are loaded only when a report is written: reading and comparing never import matplotlib."""
from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

from common.files import atomic_write, atomic_write_json, finite
from common.physics import SLACK
from common.results import (BY_DESIGN, by_design_text, entries, host_text, pair_failures, pair_key, pair_level_error,
                            run_label, speedup_text, validate_results, variant_status)
from common.verdict import recommendations, results_verdicts

BASELINE_MOVED = 1.10        # the baseline's levels beside two variants this far apart (intervals apart): said
REGRESSION_PCT = 5.0          # a change smaller than this is never called a regression, however tight the intervals
CEILING_NOISE_PCT = 100 * SLACK   # a share up to this is printed (the ceilings' own noise); above it, none
_HOW_TO_READ = (
    "Times are medians of samples, each one call on input values it has never seen where the inputs allow it "
    "(results.json's fed_new_values says where they did not), timed with CUDA events (on a CPU, the wall clock) in "
    "rounds taken in turn with the baseline's; ± is half the width of the median's 95% confidence interval. A "
    "speedup is the median of the per-round ratios, printed with the digits its own interval (in brackets) "
    "supports. % of ceiling compares the achieved rate with this device's measured ceiling for the "
    "pair's bound (launch-bound pairs: the roofline floor time over the measured time). pitfall and tradeoff "
    "variants are slower on purpose. A SUSPECT time is not trusted (faster than the floor its workload implies; the "
    "reason is given), so it has no speedup and no % of ceiling.")


def ci_text(v: dict) -> str:
    """The median's 95% interval as ± percent of the median (half the interval's width)."""
    pct = v.get("median_ci_pct")
    if pct is None or not v.get("median_ms"):
        return "–"
    half = pct / 2
    return f"±{half:.0f}%" if half >= 10 else f"±{half:.2g}%"


def _cell(text: str, limit: float = math.inf) -> str:
    """`text` on one line with its pipes escaped (a markdown table's cell), cut to `limit` characters."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _fmt(x, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def summary_markdown(doc: dict) -> str:
    notes = _Notes()
    lines = _header_lines(doc) + _results_table(doc, notes) + _details_table(doc) + _overlap_table(doc, notes)
    lines += _problem_sections(doc)
    if verdicts := results_verdicts(doc, always=False):
        lines += [""] + verdicts.rstrip("\n").split("\n")
    return "\n".join(lines + ["", _HOW_TO_READ, ""])


def _header_lines(doc: dict) -> list[str]:
    lines = [f"# Results on {run_label(doc)}", ""]
    if doc.get("interrupted"):
        lines += ["**Interrupted (Ctrl-C or SIGTERM): this report covers only the pairs that finished"
                  + (f"; not run: {', '.join(doc['not_run'])}" if doc.get("not_run") else "") + ".**", ""]
    if doc.get("quick"):
        lines += ["**Quick run: smoke-test sizes and 0.3 s of timing per variant. These figures show that the pairs "
                  "run and verify; they are not the chapters' results (an optimized variant that wins at full size "
                  "can lose at a size too small to fill the GPU). The chapters' READMEs quote full-size runs.**", ""]
    lines += [f"torch {doc['torch']}, CUDA {doc['cuda'] or '–'}, driver {doc['driver'] or '–'}, "
              f"commit `{doc['git_commit']}`, {doc['created']}" + (" — quick run" if doc.get("quick") else ""), ""]
    host = host_text(doc)
    lines += [f"Host CPU: {host}.", ""] if host else []
    if peaks := doc["device"].get("ceilings"):
        mm, how = peaks.get("matmul_tflops", {}), peaks.get("matmul_how") or {}
        # the precisions measured (a CPU measures fp32 and lends its rate to the others: not printed as measured)
        names = [k for k in ("fp32", "tf32", "bf16", "fp16", "fp8") if mm.get(k) and (k in how or not how)]
        lines += ["Measured ceilings: copy {} GB/s, host→device {} GB/s, matmul {} {} TFLOP/s, "
                  "launch {} µs.".format(_fmt(peaks.get("copy_gbps"), ".0f"), _fmt(peaks.get("h2d_gbps"), ".1f"),
                                         "/".join(names), " / ".join(_fmt(mm.get(k), ".3g") for k in names),
                                         _fmt(peaks.get("launch_us"), ".2f")), ""]
    return lines


def _status_cell(v: dict, base: dict | None) -> str:
    status, why = variant_status(v)
    if status == "ok":
        return "ok"
    if status in BY_DESIGN:
        return f"{status} ({by_design_text(v, base)})"
    bold = f"**{status}**" if status in ("FAILED", "SUSPECT") else status
    return f"{bold}: {_cell(why, 90)}"


class _Notes(list):
    """The footnotes of summary.md: each distinct text numbered once, in order of first use, the numbers running
    on through the document; each table lists the ones it used first."""
    shown = 0

    def mark(self, text: str) -> str:
        text = " ".join(str(text).split())
        if text not in self:
            self.append(text)
        return f" [{self.index(text) + 1}]"

    def after(self, lines: list[str], extra: list[str] = ()) -> list[str]:
        """`lines`, then the notes added since the last call and `extra`, as list items."""
        footer = [f"- [{i}] {_cell(t)}" for i, t in enumerate(self[self.shown:], self.shown + 1)] + list(extra)
        self.shown = len(self)
        return lines + ([""] + footer if footer else [])


def bounded_pct(pct: float | None) -> tuple[float | None, str | None]:
    """(shown, why) for a share that must lie in 0-100%: inside, shown (why None); up to CEILING_NOISE_PCT (the noise
    of what it is measured against) shown, why "noise"; above that ("above") or below 0 ("below"), not shown (None)."""
    if pct is None or not math.isfinite(pct):
        return None, None
    if 0 <= pct <= 100:
        return pct, None
    if 100 < pct <= CEILING_NOISE_PCT:
        return pct, "noise"
    return None, "above" if pct > 100 else "below"


def _share_cell(v: dict, notes: _Notes) -> str:
    """% of ceiling: only a share in 0-100% (up to 110%, the ceilings' noise, with a note); `ceiling_note` as a note."""
    if variant_status(v)[0] == "SUSPECT":   # no result from it
        return "–"
    pct, ceiling = v.get("pct_of_ceiling"), v.get("ceiling") or "its ceiling"
    shown, why = bounded_pct(pct)
    cell = _fmt(shown, ".1f")
    if why:
        slack = CEILING_NOISE_PCT - 100
        cell += notes.mark({
            "noise": f"above 100% of the ceiling but within {slack:.0f}%: the ceilings are measured once, with about "
                     f"that much noise of their own",
            "above": f"measured {pct:.0f}% of {ceiling}: no share printed (more than {slack:.0f}% above a ceiling "
                     f"means the ceiling does not bound this workload, or was measured low)",
            "below": f"measured {pct:.0f}% of {ceiling}: a share below 0% is no share"}[why])
    return cell + (notes.mark(v["ceiling_note"]) if v.get("ceiling_note") else "")


def baseline_moved(p: dict) -> str | None:
    """The note for a pair whose baseline ran at levels more than BASELINE_MOVED apart, their intervals apart, in
    the rounds beside two of its variants (results.json's baseline_in_rounds_ms); None where it held one level.
    A speedup over the baseline of its own rounds cancels what moves both (the GPU's clock), but what moves only the
    baseline (a host-bound step while the host slows; what a variant leaves behind) makes two speedups ratios over two
    different baselines. The baseline alone cannot tell which happened, so the note names both readings."""
    levels = [(v["name"], v["baseline_in_rounds_ms"]) for v in p.get("variants") or []
              if v.get("baseline_in_rounds_ms") and v.get("speedup") is not None]
    apart = [(b[1][0] / a[1][0], a, b) for a in levels for b in levels   # every two, not only the extremes: a
             if b[1][0] >= BASELINE_MOVED * a[1][0] and b[1][1] > a[1][2]]  # third level's wide interval hides none
    if not apart:
        return None
    _, (low_name, low), (high_name, high) = max(apart, key=lambda x: x[0])
    return (f"{pair_key(p)}'s baseline took {low[0]:.4g} ms a call in the rounds beside {low_name} and "
            f"{high[0]:.4g} ms beside {high_name}: each speedup is over the baseline as it ran in that variant's "
            f"rounds, not over one baseline. Where only the baseline's time moved (a host-bound step), rank the "
            f"variants by their median ms; where theirs moved with it (the GPU's clock), by their speedups")


def _results_table(doc: dict, notes: _Notes) -> list[str]:
    memory = any(v.get("peak_memory_mb") is not None for p in doc["pairs"] for v in entries(p))
    head = "| pair | bound | variant | status | median ms | ± 95% CI | speedup (95% CI) | % of ceiling |"
    rule = "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |"
    lines = [head + " peak memory MB |", rule + " ---: |"] if memory else [head, rule]
    blank = " |" * (5 if memory else 4)
    for p in doc["pairs"]:
        start, base, moved = f"| {pair_key(p)} | {p['bound']} |", p.get("baseline"), baseline_moved(p)
        if p["status"] == "skipped":
            lines.append(f"{start} – | skipped: {_cell(p.get('error') or p.get('skipped') or '', 90)} |{blank}")
            continue
        if own := pair_level_error(p):
            lines.append(f"{start} (pair) | **FAILED**: {_cell(own, 90)} |{blank}")
        for v in entries(p):
            name = v["name"] + (" ⚠ escaped stream" if (v.get("wall_check") or {}).get("escaped") else "")
            speedup = "reference" if v is base and variant_status(v)[0] == "ok" else speedup_text(v, base)
            speedup += notes.mark(moved) if moved and v is not base and speedup != "–" else ""
            row = (f"{start} {name} | {_status_cell(v, base)} | {_fmt(v.get('median_ms'), '.4g')} | {ci_text(v)} | "
                   f"{speedup} | {_share_cell(v, notes)} |")
            lines.append(row + (f" {_fmt(v.get('peak_memory_mb'), '.1f')} |" if memory else ""))
    cpu = ["- % of ceiling on a CPU is rough: a CPU's ceilings are measured at small sizes and its clocks move with "
           "load, so a CPU's shares (like its times) check that the code runs; they are not results."]
    return notes.after(lines, cpu if (doc.get("device") or {}).get("type") == "cpu" else [])


def _verification_text(v: dict) -> str:
    ver = v.get("verification") or {}
    if ver.get("rel_err") is None:
        return "–"
    # the tolerance as given (fp8's 0.15 printed with one digit read "1e-01")
    return f"{ver['rel_err']:.1e}" + (f" (≤ {ver['tolerance']:.3g})" if ver.get("tolerance") else "")


def _details_table(doc: dict) -> list[str]:
    """The rarely-read figures of each timed entry, kept out of the main table so it stays narrow."""
    rows = [f"| {pair_key(p)} | {v['name']} | {_fmt(v.get('p10_ms'), '.4g')}–{_fmt(v.get('p90_ms'), '.4g')} | "
            f"{v.get('samples') or '–'} | {v.get('precision') or '–'} | {_verification_text(v)} | "
            f"{_fmt(v.get('tflops'), '.2f')} | {_fmt(v.get('gbps'), '.1f')} |"
            for p in doc["pairs"] for v in entries(p) if v.get("median_ms")]
    return ["", "## Details", "", "| pair | variant | p10–p90 ms | samples | precision | rel. error (tolerance) | "
            "TFLOP/s | GB/s |", "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: |"] + rows if rows else []


def _overlap_table(doc: dict, notes: _Notes) -> list[str]:
    overlap = [p for p in doc["pairs"] if p.get("stages") and p.get("baseline")]
    if not overlap:
        return []
    lines = ["", "## Overlap", "",
             "Serial = chunks × the sum of one chunk's stages, each timed alone; ideal = the longest stage "
             "per chunk plus one chunk to fill and drain the pipeline. A variant's overlap is where its "
             "time lands between them (0% serial, 100% ideal).", "",
             "| pair | stages per chunk (ms) | serial ms | ideal ms | variant | median ms | overlap | timeline |",
             "| --- | --- | ---: | ---: | --- | ---: | ---: | --- |"]
    for p in overlap:
        st = p["stages"]
        stage_text = ", ".join(f"{k} {v:.3f}" for k, v in st["stage_ms"].items()) + f" (× {st['chunks']})"
        for v in entries(p):
            if v.get("median_ms"):
                timeline = f"[png]({v['timeline']})" if v.get("timeline") else "–"
                lines.append(f"| {pair_key(p)} | {stage_text} | {st['serial_ms']:.3f} | {st['ideal_ms']:.3f} | "
                             f"{v['name']} | {v['median_ms']:.4g} | {_overlap_cell(v, notes)} | {timeline} |")
    return notes.after(lines)


def _overlap_cell(v: dict, notes: _Notes) -> str:
    """The overlap share where it lies in 0-100% (up to 110% with a note: the stages were timed alone, each
    with its own noise); the variant's `overlap_note`, where it has one, beside it or in its place."""
    pct = v.get("overlap_pct_of_ideal")
    shown, why = bounded_pct(pct)
    cell = "–" if shown is None else f"{shown:.0f}%"
    if v.get("overlap_note"):
        cell = f"{cell} ({_cell(v['overlap_note'])})" if shown is not None else _cell(v["overlap_note"])
    if why:
        cell += notes.mark({
            "noise": f"faster than the ideal by up to {CEILING_NOISE_PCT - 100:.0f}%: within the noise of the "
                     f"stages, each timed alone",
            "above": f"measured {pct:.0f}%: faster than the ideal its stages allow, so the stages timed alone do "
                     f"not describe this variant; no overlap share printed",
            "below": f"measured {pct:.0f}%: slower than its stages run one after another, so no overlap share "
                     f"printed"}[why])
    return cell


def _problem_sections(doc: dict) -> list[str]:
    """Failures; SUSPECT times; variants whose per-call times fall at two separate levels where their baseline's
    fall at one (a path taken only at speed, a periodic stall, an autotuner switching mid-loop: the median hides
    which level the reader's loop will see); memory- and compute-bound entries whose GPU waited on the host
    (`common.timing.host_pace`; a launch-bound call is about its host time)."""
    failures = []
    for p in doc["pairs"]:
        if p["status"] == "failed" or any(variant_status(v)[0] == "FAILED" for v in entries(p)):
            reasons = pair_failures(p)
            failures += [f"- {pair_key(p)}: {reasons[0]}"] if len(reasons) == 1 else \
                [f"- {pair_key(p)}: {len(reasons)} failures"] + [f"  - {r}" for r in reasons]
    suspect = [f"- {pair_key(p)} {v['name']}: {v['suspect']}" for p in doc["pairs"] for v in entries(p)
               if variant_status(v)[0] == "SUSPECT"]
    two_modes = [f"- {pair_key(p)} {v['name']}: two levels of per-call time, {m['low_ms']:.4g} ms and "
                 f"{m['high_ms']:.4g} ms ({100 * m['high_share']:.0f}% of samples at the upper one); "
                 f"its baseline's samples in the same rounds have one"
                 + (", or two at other levels" if v.get("baseline_two_modes") else "")
                 for p in doc["pairs"] for v in p.get("variants") or []
                 if (m := v.get("two_modes")) and v.get("two_modes_flag")]
    waited = [f"- {pair_key(p)} {v['name']}: the GPU had caught up with the host in {h['caught_up_rounds']} of "
              f"{h['rounds']} rounds (issue time {h['median_host_over_span']:.2f} of the span): the host set the pace "
              f"(the harness's feed and scrub between samples, or the call's own launches and syncs), so a span "
              f"holds host time and on a faster host this {p['bound']}-bound time reads lower"
              + (f"; the GPU worked {h['gpu_busy_ms']:.4g} ms of its {v['median_ms']:.4g} ms (torch.profiler)"
                 if h.get("gpu_busy_ms") and v.get("median_ms") else "")
              for p in doc["pairs"] if p["bound"] in ("memory", "compute")
              for v in entries(p) if (h := v.get("host_pace")) and h["gpu_waited"]]
    sections = [("Failures", failures), ("Suspect (not presented as results)", suspect),
                ("Two modes (the median hides one)", two_modes), ("The GPU waited on the host", waited)]
    return [line for title, lines in sections if lines for line in ["", f"## {title}", ""] + lines]


def write_report(doc: dict, outdir: Path, figures: bool = True) -> list[Path]:
    """summary.md, recommendations.md, the figures (none with `figures=False` or without matplotlib, said once),
    then results.json: written last, its presence means the run finished (the command line holds a signal off the
    whole of it: common/cli.py, _report)."""
    doc = finite(doc)
    if problems := validate_results(doc):
        raise ValueError("results do not follow the schema: " + "; ".join(problems[:5]))
    outdir = Path(outdir)
    atomic_write(outdir / "summary.md", [summary_markdown(doc)])
    atomic_write(outdir / "recommendations.md", [recommendations(doc)])
    written = [outdir / "summary.md", outdir / "recommendations.md"] + (draw_figures(doc, outdir) if figures else [])
    atomic_write_json(outdir / "results.json", doc)
    return written + [outdir / "results.json"]


def draw_figures(doc: dict, outdir: Path) -> list[Path]:
    try:
        from common.figures import write_figures  # matplotlib: heavy, and optional (a report without figures)
    except ImportError:
        print("matplotlib is not installed: no figures drawn (speedup.png, roofline.png, sweep.png)", file=sys.stderr)
        return []
    return write_figures(doc, outdir)


class CompareRefused(Exception):
    """The two runs measured different things (a quick run and a full one); str(e) is one line saying why."""


def compare_runs(old: dict, new: dict, allow_quick_vs_full: bool = False) -> tuple[str, int]:
    """A table of per-variant median changes, and the number of regressions (as its last line says; the intervals:
    `_span`). Raises CompareRefused for a quick run against a full one (different sizes) unless allow_quick_vs_full;
    different devices or hosts are stated at the top."""
    notes = _compare_notes(old, new, allow_quick_vs_full)
    lines = [_run_line("old", old), _run_line("new", new)] + [f"warning: {n}" for n in notes]
    lines.append(f"{'pair / variant':58s} {'old ms':>10s} {'new ms':>10s} {'change':>8s}")
    old_pairs, new_pairs = ({(p["chapter"], p["name"]): p for p in doc["pairs"]} for doc in (old, new))
    rows = [row for key in sorted(set(old_pairs) | set(new_pairs))
            for row in _compare_pair(key, old_pairs.get(key), new_pairs.get(key))]
    regressions = sum(counts for _, counts in rows)
    lines += [text for text, _ in rows]
    lines.append(f"{regressions} regression(s): slower by more than {REGRESSION_PCT:.0f}% with the two intervals "
                 f"apart (a run's 95% interval; several runs': their span), newly failing, or missing from the new run")
    return "\n".join(lines), regressions


_RANK = {"FAILED": 0, "skipped": 1, "SUSPECT": 2}   # a variant's outcome, worst first; any other status is timed


def merge_runs(docs: list[dict], worst: bool = True) -> dict:
    """Several runs of one side of a comparison as one document. A host-bound pair moves more from run to run than
    each run's own interval says, so a variant's interval spans every run's (`runs_ms`) and its median is the median
    of the runs' medians. Where runs disagree on an outcome, the new side (`worst`) takes its worst run's, the old
    side its best run's: a failure the old code had once does not excuse one the new code has every time. A pair or
    variant missing from a run (a rerun of a few pairs) is taken from the others."""
    if len({(d["device"]["name"], bool(d.get("quick"))) for d in docs}) > 1:
        raise CompareRefused("the runs of one side are of different devices, or quick and full runs mixed")
    if len(docs) == 1:
        return docs[0]
    pick = min if worst else max
    records: dict = {}
    for doc in docs:
        for p in doc["pairs"]:
            records.setdefault((p["chapter"], p["name"]), []).append(p)
    pairs = []
    for runs in records.values():
        pair = pick(runs, key=lambda p: (bool(p.get("baseline")), p["status"] == "ok"))
        named: dict = {}
        for e in (e for p in [pair] + [p for p in runs if p is not pair] for e in entries(p)):  # its baseline first
            named.setdefault(e["name"], []).append(e)
        merged = [_merge_entry(same, pick) for same in named.values()]
        pairs.append({**pair, "baseline": merged[0] if pair.get("baseline") else None,
                      "variants": merged[1:] if pair.get("baseline") else []})
    created = sorted(str(d.get("created")) for d in docs)
    return {**docs[0], "pairs": pairs, "runs": len(docs), "created": f"{created[0]} to {created[-1]}",
            "git_commit": ", ".join(dict.fromkeys(str(d.get("git_commit")) for d in docs)),
            "interrupted": all(d.get("interrupted") for d in docs)}   # else the others may hold what it missed


def _merge_entry(same: list[dict], pick) -> dict:
    """One variant over its runs, as merge_runs says: `pick` (min: worst, max: best) in the order of _RANK."""
    rank = lambda e: _RANK.get(variant_status(e)[0], len(_RANK))  # noqa: E731
    chosen = pick(same, key=rank)
    timed = [e for e in same if rank(e) == len(_RANK) and e.get("median_ms")]
    if rank(chosen) < len(_RANK) or len(timed) < 2:
        return chosen
    spans = [_span(e)[:2] for e in timed]
    return {**chosen, "median_ms": statistics.median(e["median_ms"] for e in timed),
            "runs_ms": [min(lo for lo, _ in spans), max(hi for _, hi in spans)]}


def _run_line(label: str, doc: dict) -> str:
    return (f"{label}: " + (f"{doc['runs']} runs, " if doc.get("runs") else "") + f"{doc['device']['name']}, "
            f"{host_text(doc) or 'host not recorded'}, {'quick' if doc.get('quick') else 'full'} run, commit "
            f"{doc.get('git_commit')}, {doc.get('created')}" + (", INTERRUPTED" if doc.get("interrupted") else ""))


def _compare_notes(old: dict, new: dict, allow_quick_vs_full: bool) -> list[str]:
    notes = []
    if bool(old.get("quick")) != bool(new.get("quick")):
        msg = (f"the old run is a {'quick' if old.get('quick') else 'full'} run and the new one a "
               f"{'quick' if new.get('quick') else 'full'} run: their workload sizes differ, so their times "
               f"cannot be compared")
        if not allow_quick_vs_full:
            raise CompareRefused(msg)
        notes.append(msg)
    if old["device"]["name"] != new["device"]["name"]:
        notes.append(f"different devices ({old['device']['name']} vs {new['device']['name']}): "
                     f"changes include the hardware")
    old_cpu, new_cpu = (old.get("host") or {}).get("cpu"), (new.get("host") or {}).get("cpu")
    if old_cpu and new_cpu and old_cpu != new_cpu:
        notes.append(f"different host CPUs ({old_cpu} vs {new_cpu}): launch-bound times depend on the host")
    elif bool(old_cpu) != bool(new_cpu):
        notes.append(f"the {'old' if not old_cpu else 'new'} run does not record its host CPU: hosts may differ")
    if new.get("interrupted"):
        notes.append("the new run was interrupted: pairs it did not reach are listed as missing")
    if {p["name"] for p in old["pairs"] if p.get("point")} != {p["name"] for p in new["pairs"] if p.get("point")}:
        notes.append("the runs cover different sweep points (--sizes, --dtypes): a point of the old run that the "
                     "new one lacks is listed as missing")
    return notes


def _row(label: str, text: str, regression: bool = False) -> tuple[str, int]:
    return f"{label:58s} {text}" + ("  REGRESSION" if regression else ""), int(regression)


def _compare_pair(key, old: dict | None, new: dict | None) -> list[tuple[str, int]]:
    label = f"ch{key[0]}/{key[1]}"
    if new is None:  # a regression only where the old run measured something the new one lacks
        if old["status"] == "skipped" or not old.get("baseline"):
            return [_row(label, f"{'skipped' if old['status'] == 'skipped' else 'FAILED'} in old run, "
                                f"missing from the new run")]
        return [_row(label, "MISSING from the new run", regression=True)]
    if old is None:
        return [_row(label, "new pair")]
    if new["status"] == "skipped":
        if old["status"] == "skipped":
            return [_row(label, "skipped in both runs")]
        return [_row(label, f"skipped in new run: {_cell(new.get('error') or '', 60)}", regression=True)]
    if not new.get("baseline"):
        if not (old.get("baseline") and variant_status(old["baseline"])[0] == "ok"):
            return [_row(label, "FAILED in both runs")]
        return [_row(label, f"FAILED in new run: {_cell(new.get('error') or '', 60)}", regression=True)]
    if old["status"] == "skipped" or not old.get("baseline"):
        return [_row(label, f"{'skipped' if old['status'] == 'skipped' else 'failed'} in old run: nothing to compare")]
    wa, wb = old.get("workload"), new.get("workload")
    if wa and wb and (wa.get("bytes_moved"), wa.get("flops")) != (wb.get("bytes_moved"), wb.get("flops")):
        return [_row(label, "workload changed: not compared")]
    a, b = {v["name"]: v for v in entries(old)}, {v["name"]: v for v in entries(new)}
    return [_compare_variant(f"{label} {name}" if name else label, a.get(name), b.get(name)) for name in a | b]


def _compare_variant(label: str, va: dict | None, vb: dict | None) -> tuple[str, int]:
    if va is None:
        return _row(label, "new variant")
    sa = variant_status(va)[0]
    if vb is None:
        return _row(label, f"{sa} in old run, missing from the new run" if sa in ("skipped", "FAILED")
                    else "MISSING from the new run", regression=sa not in ("skipped", "FAILED"))
    sb, why = variant_status(vb)
    if sb == "skipped":
        if sa in ("skipped", "FAILED"):
            return _row(label, "skipped in both runs" if sa == "skipped" else "FAILED in old run, skipped in new run")
        return _row(label, f"skipped in new run: {_cell(why, 60)}", regression=True)
    if sb == "FAILED":
        if sa == "FAILED":
            return _row(label, "FAILED in both runs")
        return _row(label, f"now FAILS: {_cell(why, 60)}", regression=sa != "skipped")
    ma, mb = va.get("median_ms"), vb.get("median_ms")
    if not ma or not mb:
        return _row(label, "fixed: passes now" if sa == "FAILED" else "no timing")
    (lo_a, hi_a, said_a), (lo_b, hi_b, said_b) = _span(va), _span(vb)
    change = 100 * (mb - ma) / ma
    apart = lo_b > hi_a or hi_b < lo_a
    regression = change > REGRESSION_PCT and apart
    flag = ("  REGRESSION" if regression else "  faster" if change < -REGRESSION_PCT and apart
            else f"  within noise ({said_a} / {said_b})" if abs(change) > REGRESSION_PCT else "")
    flag += "  (new time SUSPECT)" if sb == "SUSPECT" else ""
    return f"{label:58s} {ma:10.4g} {mb:10.4g} {change:+7.1f}%{flag}", int(regression)


def _span(v: dict) -> tuple[float, float, str]:
    """A variant's interval for --compare: its median ± half its 95% CI, or over several runs `runs_ms`."""
    if v.get("runs_ms"):
        lo, hi = v["runs_ms"]
        return lo, hi, f"runs {lo:.4g}–{hi:.4g}"
    h = (v.get("median_ci_pct") or 0) / 200
    return v["median_ms"] * (1 - h), v["median_ms"] * (1 + h), f"±{100 * h:.2g}%"
