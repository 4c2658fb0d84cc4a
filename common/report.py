"""Write a run's results: results.json, summary.md and two figures, each written atomically.

Atomic means: written to a temporary file in the same folder, flushed to
disk, then renamed over the target. A run killed at any moment leaves either
the previous file or the new one, never half of one.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Iterable

SCHEMA_VERSION = 1


def atomic_write(path: Path, chunks: Iterable[str | bytes]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk.encode() if isinstance(chunk, str) else chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, obj) -> None:
    atomic_write(path, [json.dumps(obj, indent=2, default=_json_default) + "\n"])


def _json_default(o):
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def _finite(obj):
    """JSON has no NaN/Inf: write null instead, so every reader can load the file."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


# ----------------------------------------------------------------------------- schema
REQUIRED_TOP = {"schema_version", "device", "torch", "cuda", "driver", "git_commit", "created", "pairs"}
REQUIRED_PAIR = {"chapter", "name", "bound", "status", "baseline", "variants"}
REQUIRED_VARIANT = {"name", "median_ms", "speedup", "verified", "pct_of_ceiling"}


def validate_results(doc: dict) -> list[str]:
    """Every way `doc` departs from the results.json schema (empty when it conforms)."""
    errs = [f"missing top-level key {k!r}" for k in sorted(REQUIRED_TOP - doc.keys())]
    if not isinstance(doc.get("device"), dict) or "name" not in doc.get("device", {}):
        errs.append("device must be an object with a name")
    for i, p in enumerate(doc.get("pairs", [])):
        errs += [f"pairs[{i}] missing {k!r}" for k in sorted(REQUIRED_PAIR - p.keys())]
        if p.get("status") not in ("ok", "failed", "skipped"):
            errs.append(f"pairs[{i}].status {p.get('status')!r}")
        if p.get("status") == "skipped":
            continue
        for j, v in enumerate(([p["baseline"]] if p.get("baseline") else []) + p.get("variants", [])):
            errs += [f"pairs[{i}] variant {j} missing {k!r}" for k in sorted(REQUIRED_VARIANT - v.keys())]
            if v.get("verified") is False and v.get("speedup") is not None:
                errs.append(f"pairs[{i}] variant {v.get('name')} failed verification but has a speedup")
    return errs


# ----------------------------------------------------------------------------- markdown
def _fmt(x, spec=".3f", none="–"):
    return none if x is None else format(x, spec)


def summary_markdown(doc: dict) -> str:
    dev = doc["device"]
    lines = [f"# Results on {dev['name']}", "",
             f"torch {doc['torch']}, CUDA {doc['cuda'] or '–'}, driver {doc['driver'] or '–'}, "
             f"commit `{doc['git_commit']}`, {doc['created']}" + (" — quick run" if doc.get("quick") else ""), ""]
    peaks = dev.get("ceilings") or {}
    if peaks:
        mm = peaks.get("matmul_tflops", {})
        lines += ["Measured ceilings: copy {} GB/s, host→device {} GB/s, matmul fp32/tf32/bf16/fp16 {} TFLOP/s, "
                  "launch {} µs.".format(_fmt(peaks.get("copy_gbps"), ".0f"), _fmt(peaks.get("h2d_gbps"), ".1f"),
                                         " / ".join(_fmt(mm.get(k), ".3g") for k in ("fp32", "tf32", "bf16", "fp16")),
                                         _fmt(peaks.get("launch_us"), ".2f")), ""]
    lines += ["| pair | bound | variant | median ms | p10–p90 ms | speedup | verified | TFLOP/s | GB/s | % of ceiling |",
              "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for p in doc["pairs"]:
        key = f"ch{p['chapter']}/{p['name']}"
        if p["status"] == "skipped":
            lines.append(f"| {key} | {p['bound']} | skipped: {p.get('error', '')} | | | | | | | |")
            continue
        if p["status"] == "failed" and not p.get("baseline"):
            lines.append(f"| {key} | {p['bound']} | **FAILED**: {p.get('error', '')} | | | | | | | |")
            continue
        for v in [p["baseline"]] + p["variants"]:
            if v.get("skipped"):
                lines.append(f"| {key} | {p['bound']} | {v['name']} | skipped: {v['skipped']} | | | | | | |")
                continue
            if v.get("error"):
                lines.append(f"| {key} | {p['bound']} | {v['name']} | **FAILED**: {v['error']} | | | | | | |")
                continue
            verified = "yes" if v["verified"] else f"**FAILED** ({v.get('verification', {}).get('message', '')})"
            spd = "–" if v["speedup"] is None else f"{v['speedup']:.2f}×"
            spread = f"{_fmt(v.get('p10_ms'), '.4g')}–{_fmt(v.get('p90_ms'), '.4g')}" if v.get("median_ms") else "–"
            name = v["name"] + (" ⚠ escaped stream" if (v.get("wall_check") or {}).get("escaped") else "")
            lines.append(f"| {key} | {p['bound']} | {name} | {_fmt(v.get('median_ms'), '.4g')} | {spread} | {spd} | "
                         f"{verified} | {_fmt(v.get('tflops'), '.2f')} | {_fmt(v.get('gbps'), '.1f')} | "
                         f"{_fmt(v.get('pct_of_ceiling'), '.1f')} |")
    overlap = [p for p in doc["pairs"] if p.get("stages") and p.get("baseline")]
    if overlap:
        lines += ["", "## Overlap", "",
                  "Serial = chunks × the sum of one chunk's stages, each timed alone; ideal = the longest stage "
                  "per chunk plus one chunk to fill and drain the pipeline. A variant's overlap is where its "
                  "time lands between them (0% serial, 100% ideal).", "",
                  "| pair | stages per chunk (ms) | serial ms | ideal ms | variant | median ms | overlap | timeline |",
                  "| --- | --- | ---: | ---: | --- | ---: | ---: | --- |"]
        for p in overlap:
            st = p["stages"]
            stage_text = ", ".join(f"{k} {v:.3f}" for k, v in st["stage_ms"].items()) + f" (× {st['chunks']})"
            for v in [p["baseline"]] + p["variants"]:
                if not v.get("median_ms"):
                    continue
                tl = f"[png]({v['timeline']})" if v.get("timeline") else "–"
                lines.append(f"| ch{p['chapter']}/{p['name']} | {stage_text} | {st['serial_ms']:.3f} | "
                             f"{st['ideal_ms']:.3f} | {v['name']} | {v['median_ms']:.4g} | "
                             f"{_fmt(v.get('overlap_pct_of_ideal'), '.0f')}% | {tl} |")
    failed = [p for p in doc["pairs"] if p["status"] == "failed"]
    if failed:
        lines += ["", "## Failures", ""] + [f"- ch{p['chapter']}/{p['name']}: {p.get('error', '')}" for p in failed]
    lines += ["", "Times are medians of CUDA-event (or, on a CPU, wall-clock) samples over back-to-back calls; "
              "% of ceiling compares the achieved rate with this device's measured ceiling for the pair's bound "
              "(launch-bound pairs: the roofline floor time over the measured time).", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- figures
def plot_speedups(doc: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = []
    for p in doc["pairs"]:
        for v in p.get("variants", []):
            label = f"ch{p['chapter']}/{p['name']}: {v['name'].replace('optimized_' + p['name'], 'opt').strip('_')}"
            if not v.get("skipped"):
                rows.append((label, v.get("speedup"), bool(v.get("verified"))))
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(rows) + 1.5))
    ys = range(len(rows))
    vals = [r[1] if r[1] else 0 for r in rows]
    ax.barh(list(ys), vals, color=["tab:green" if r[2] and r[1] else "tab:red" for r in rows])
    for y, (label, spd, ok) in zip(ys, rows):
        ax.text(max(spd or 0, 1e-3) * 1.05 if spd else 1.0, y, f"{spd:.2f}×" if spd else "FAILED", va="center", fontsize=8)
    ax.set_yticks(list(ys), [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="k", lw=0.8)
    if any(vals):
        ax.set_xscale("log")
    ax.set_xlabel("speedup over baseline (median time ratio, log scale)")
    ax.set_title(f"Speedups on {doc['device']['name']}")
    save_figure(fig, path)


def roofline_axes(peaks: dict, title: str, precisions=None, ridges: bool = False):
    """A figure with the measured roofs drawn: min(bandwidth x AI, matmul rate) for each precision."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    bw, rates = peaks.get("copy_gbps"), peaks.get("matmul_tflops") or {}
    xs = [2.0 ** e for e in range(-6, 13)]
    if bw:
        for prec in sorted(precisions or rates, key=lambda p: rates[p]):
            rate = rates[prec]
            pts = sorted(xs + [rate * 1e3 / bw])  # include the ridge point so the corner is exact
            ax.plot(pts, [min(bw * 1e9 * x, rate * 1e12) / 1e12 for x in pts], lw=1,
                    label=f"{prec} roof: {bw:.0f} GB/s, {rate:.3g} TFLOP/s")
            if ridges:
                ax.axvline(rate * 1e3 / bw, ls=":", lw=0.8, color="gray")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of device memory)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", lw=0.3)
    return fig, ax


def plot_roofline(doc: dict, path: Path) -> None:
    peaks = doc["device"].get("ceilings") or {}
    fig, ax = roofline_axes(peaks, f"Roofline with measured ceilings, {doc['device']['name']}")
    markers = iter("os^vD<>pPX*h" * 5)
    for p in doc["pairs"]:
        pts = [v for v in [p.get("baseline") or {}] + p.get("variants", [])
               if v.get("tflops") and v.get("arithmetic_intensity")]
        if pts:
            m = next(markers)
            for v in pts:
                ax.scatter(v["arithmetic_intensity"], v["tflops"], marker=m,
                           facecolors="none" if v["name"] == "baseline" else None,
                           label=f"ch{p['chapter']}/{p['name']} {'baseline' if v['name'] == 'baseline' else v['name'][len('optimized_'):]}")
    ax.legend(fontsize=6, loc="lower right")
    save_figure(fig, path)


def save_figure(fig, path: Path) -> None:
    """Render to memory, then write atomically (a killed run leaves no half-written PNG)."""
    import io

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    atomic_write(path, [buf.getvalue()])
    import matplotlib.pyplot as plt
    plt.close(fig)


def write_report(doc: dict, outdir: Path) -> list[Path]:
    """results.json, summary.md, speedup.png, roofline.png. JSON last: its presence means the run finished."""
    doc = _finite(doc)
    problems = validate_results(doc)
    if problems:
        raise ValueError("results do not follow the schema: " + "; ".join(problems[:5]))
    outdir = Path(outdir)
    written = []
    atomic_write(outdir / "summary.md", [summary_markdown(doc)])
    written.append(outdir / "summary.md")
    for name, plot in (("speedup.png", plot_speedups), ("roofline.png", plot_roofline)):
        try:
            plot(doc, outdir / name)
            written.append(outdir / name)
        except ImportError:
            print(f"matplotlib is not installed: {name} not drawn")
    atomic_write_json(outdir / "results.json", doc)
    written.append(outdir / "results.json")
    return written


# ----------------------------------------------------------------------------- compare
REGRESSION_PCT = 5.0


def compare_runs(old: dict, new: dict) -> tuple[str, int]:
    """A table of per-variant median changes and the number of regressions (slower by > 5% or newly failing)."""
    def index(doc):
        return {(p["chapter"], p["name"], v["name"]): v for p in doc["pairs"]
                for v in ([p["baseline"]] if p.get("baseline") else []) + p.get("variants", [])}

    a, b = index(old), index(new)
    lines = [f"old: {old['device']['name']} {old['created']}  new: {new['device']['name']} {new['created']}"]
    if old["device"]["name"] != new["device"]["name"]:
        lines.append("warning: different devices; changes include the hardware")
    lines.append(f"{'pair / variant':58s} {'old ms':>10s} {'new ms':>10s} {'change':>8s}")
    regressions = 0
    for key in sorted(set(a) | set(b)):
        label = f"ch{key[0]}/{key[1]} {key[2]}"
        va, vb = a.get(key), b.get(key)
        if va is None or vb is None:
            lines.append(f"{label:58s} {'only in ' + ('new' if va is None else 'old'):>30s}")
            continue
        if va.get("verified") and not vb.get("verified"):
            regressions += 1
            lines.append(f"{label:58s} {'now FAILS verification':>30s}  REGRESSION")
            continue
        ma, mb = va.get("median_ms"), vb.get("median_ms")
        if not ma or not mb:
            lines.append(f"{label:58s} {'no timing':>30s}")
            continue
        change = 100 * (mb - ma) / ma
        flag = ""
        if change > REGRESSION_PCT:
            regressions += 1
            flag = "  REGRESSION"
        elif change < -REGRESSION_PCT:
            flag = "  faster"
        lines.append(f"{label:58s} {ma:10.4g} {mb:10.4g} {change:+7.1f}%{flag}")
    lines.append(f"{regressions} regression(s) (slower by more than {REGRESSION_PCT:.0f}% or newly failing)")
    return "\n".join(lines), regressions
