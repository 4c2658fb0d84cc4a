"""The H200 run's speedups beside the H100's: for each pair, the newest full-size H100 report under profiles/h100/
that holds it (by its `created` stamp), against profiles/h200/chN-4b9d8fe/. Run from the repository root:
python3 profiles/h200/calls/side_by_side.py > profiles/h200/side_by_side.md"""
import glob
import json

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
            newest[k] = (d["created"], f, d["git_commit"][:7], {v["name"]: v.get("speedup") for v in p.get("variants", [])})
print("| pair | variant | kind | H100 | H200 | H100 report |\n| --- | --- | --- | ---: | ---: | --- |")
for ch in (1, 11, 13, 16):
    for p in json.load(open(f"profiles/h200/ch{ch}-4b9d8fe/results.json"))["pairs"]:
        _, f, commit, sp = newest.get((ch, p["name"]), (None, "", "", {}))
        for v in p["variants"]:
            a, b = sp.get(v["name"]), v.get("speedup")
            print(f"| ch{ch}/{p['name']} | {v['name']} | {v['kind']} | {'–' if a is None else f'{a:.3g}×'} | "
                  f"{'–' if b is None else f'{b:.3g}×'} | `{commit}` {f.removeprefix('profiles/h100/')} |")
