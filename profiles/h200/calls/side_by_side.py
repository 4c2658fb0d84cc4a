"""The H200 run's speedups beside the H100's: for each pair, the newest full-size H100 report under profiles/h100/
that holds it (by its `created` stamp), against profiles/h200/chN-4b9d8fe/. Each speedup comes with its times: the
variant's median and, in brackets, the baseline's level in the rounds timed beside it (a speedup is the median of
per-round ratios, so where the baseline's level moved between variants, rank them by their times). Run from the
repository root:
python3 profiles/h200/calls/side_by_side.py > profiles/h200/side_by_side.md"""
import glob
import json
import statistics


def beside(pair):
    """Each variant's 'variant ms (baseline ms beside it)'. The baseline's level beside a variant is the median of
    its round medians in that variant's rounds: the report's baseline_in_rounds_ms, or, in reports older than
    that field, the variant's share of the baseline's round_ms (its rounds, taken in turn, in variant order)."""
    out, start = {}, 0
    base_rounds = (pair.get("baseline") or {}).get("round_ms") or []
    # only where the variants' rounds add up to the baseline's (a variant dropped while timed has no rounds)
    whole = sum(v.get("rounds") or 0 for v in pair.get("variants", [])) == len(base_rounds)
    for v in pair.get("variants", []):
        n = v.get("rounds") or 0
        level = (v.get("baseline_in_rounds_ms") or [None])[0]
        if level is None and n >= 3 and whole:
            level = statistics.median(base_rounds[start:start + n])
        start += n
        ms = v.get("median_ms")
        out[v["name"]] = "–" if ms is None else f"{ms:.4g}" + ("" if level is None else f" ({level:.4g})")
    return out


newest = {}
for f in glob.glob("profiles/h100/**/results.json", recursive=True):
    try:
        d = json.load(open(f))
    except (OSError, ValueError):
        continue
    if d.get("quick") or not isinstance(d.get("pairs"), list) or d.get("device", {}).get("type") != "cuda":
        continue
    for p in d["pairs"]:
        k = (p["chapter"], p["name"])
        if p.get("status") != "failed" and (k not in newest or d["created"] > newest[k][0]):
            newest[k] = (d["created"], f, d["git_commit"][:7],
                         {v["name"]: v.get("speedup") for v in p.get("variants", [])}, beside(p))
print("| pair | variant | kind | H100 | H200 | H100 ms (baseline) | H200 ms (baseline) | H100 report |\n"
      "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
for ch in (1, 11, 13, 16):
    for p in json.load(open(f"profiles/h200/ch{ch}-4b9d8fe/results.json"))["pairs"]:
        _, f, commit, sp, ms = newest.get((ch, p["name"]), (None, "", "", {}, {}))
        here = beside(p)
        for v in p["variants"]:
            a, b = sp.get(v["name"]), v.get("speedup")
            print(f"| ch{ch}/{p['name']} | {v['name']} | {v['kind']} | {'–' if a is None else f'{a:.3g}×'} | "
                  f"{'–' if b is None else f'{b:.3g}×'} | {ms.get(v['name'], '–')} | {here[v['name']]} | "
                  f"`{commit}` {f.removeprefix('profiles/h100/')} |")
