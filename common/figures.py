"""speedup.png (every pair, every variant, with its status), roofline.png and, for a sweep (--sizes), sweep.png, drawn
from a results.json alone so a committed report can be redrawn (scripts/redraw_figures.py). Colours carry the status,
and the text says it too: green faster, purple slower, grey slower by design (pitfall, tradeoff) or skipped, red
FAILED, orange hatch SUSPECT (its time beat the floor of its workload, so no speedup is drawn)."""
from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402
from matplotlib.transforms import blended_transform_factory, offset_copy  # noqa: E402

from common.files import atomic_write  # noqa: E402
from common.results import (BY_DESIGN, by_design_text, entries, format_with_ci,  # noqa: E402
                            interval_rel_halfwidth, pair_key, pair_level_error, run_label, speedup_interval,
                            variant_status)

COLOURS = {"faster": "#2ca02c", "slower": "#9467bd", "by design": "#9e9e9e", "FAILED": "#d62728",
           "SUSPECT": "#e6850e", "skipped": "#7f7f7f"}
LEGEND = {"faster": "faster than baseline", "slower": "slower than baseline",
          "by design": "slower by design (pitfall, tradeoff)", "FAILED": "FAILED", "SUSPECT": "SUSPECT: no speedup",
          "skipped": "skipped"}
FONT_PT = 8
CHAR_IN = 0.6 * FONT_PT / 72   # average width of one character at FONT_PT, in inches
FIG_WIDTH_IN = 10.0
REASON_CHARS = 95              # a failure reason longer than this is cut in the figure (summary.md has it whole)
ROOF_STYLES = [("#222222", "-"), ("#555555", "--"), ("#777777", "-."), ("#999999", ":")]
TAG_PT = 7
TAG_OFFSETS = [(6, 3, "left", "bottom"), (6, -3, "left", "top"), (-6, 3, "right", "bottom"), (-6, -3, "right", "top")]


def write_figures(doc: dict, outdir: Path) -> list[Path]:
    """speedup.png, roofline.png and, for a sweep over sizes, sweep.png in `outdir`; returns their paths."""
    plots = [("speedup.png", plot_speedups), ("roofline.png", plot_roofline)]
    plots += [("sweep.png", plot_sweep)] if sweep_groups(doc) else []
    for name, plot in plots:
        plot(doc, Path(outdir) / name)
    return [Path(outdir) / name for name, _ in plots]


def save_figure(fig, path: Path) -> None:
    """Render to memory, then write atomically (a killed run leaves no half-written PNG)."""
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight", pad_inches=0.15)  # "tight": keeps outside legends in
    atomic_write(path, [buf.getvalue()])
    plt.close(fig)


def short_variant_name(pair_name: str, variant_name: str) -> str:
    """optimized_tensor_cores_bf16 in pair tensor_cores -> "bf16"; optimized_batched_gemm -> "optimized"."""
    pair_name = pair_name.split("@")[0]  # a sweep point's name: softmax@4096-bfloat16
    rest = variant_name.removeprefix("optimized_")
    return "optimized" if rest == pair_name else rest.removeprefix(pair_name + "_")


def _subtitle(doc: dict) -> str:
    parts = [f"commit {doc.get('git_commit')}", str(doc.get("created", ""))[:10],
             "quick run (small sizes)" if doc.get("quick") else "",
             "INTERRUPTED: only the pairs that finished" if doc.get("interrupted") else ""]
    return ", ".join(p for p in parts if p)


@dataclass
class Row:
    label: str                # the y tick label
    kind: str                 # a key of COLOURS
    text: str                 # what is written on the row
    speedup: float | None = None
    interval: tuple[float, float] | None = None
    first_of_pair: bool = False


def speedup_rows(doc: dict) -> list[Row]:
    """One row per variant, and one per pair that failed or was skipped as a whole: nothing is left out."""
    rows = []
    for p in doc["pairs"]:
        key, base, variants = pair_key(p), p.get("baseline"), p.get("variants") or []
        if p["status"] == "skipped":
            pair_rows = [Row(key, "skipped", f"skipped: {p.get('error') or p.get('skipped') or ''}")]
        else:
            own = pair_level_error(p)
            pair_rows = [Row(key, "FAILED", f"FAILED: {own}")] if own else []
            if base and variant_status(base)[0] in ("FAILED", "SUSPECT", "skipped"):   # every speedup rests on it
                pair_rows.append(_variant_row(f"{key}: baseline", base, None))
            several = len(variants) > 1 or bool(pair_rows)   # name the variant beside other rows
            pair_rows += [_variant_row(f"{key}: {short_variant_name(p['name'], v['name'])}" if several else key,
                                       v, base) for v in variants]
        if pair_rows:
            pair_rows[0].first_of_pair = True
        rows += pair_rows
    return rows


def _variant_row(label: str, v: dict, base: dict | None) -> Row:
    status, why = variant_status(v)
    if status in ("FAILED", "SUSPECT", "skipped"):
        return Row(label, status, f"{status}: {why}")
    s = v.get("speedup")
    if not s:
        return Row(label, "FAILED", "FAILED: no speedup recorded")
    interval = speedup_interval(base, v)
    value = format_with_ci(s, interval_rel_halfwidth(s, interval)) + "×"
    value += " (escaped stream)" if (v.get("wall_check") or {}).get("escaped") else ""
    if status in BY_DESIGN:
        return Row(label, "by design", f"{status}: {value} ({by_design_text(v, base)})", s, interval)
    return Row(label, "faster" if s >= 1 else "slower", value, s, interval)


def _x_axis(rows: list[Row], axes_width_in: float) -> tuple[float, float, list[float]]:
    """Log-axis limits that hold every bar, its interval and the label written after it, and their ticks: 1-2-5
    inside the limits; when those are too many to read, powers of ten, plus 0.2 and 0.5 where no power of ten
    below 1 is in range (so a slower bar still has a tick under it)."""
    ends = [1.0] + [x for r in rows if r.speedup for x in (r.speedup, *(r.interval or ())) if x > 0]
    log_lo, log_hi = math.log10(min(0.5, min(ends) / 1.5)), math.log10(max(2.0, max(ends) * 1.08))
    for r in [r for r in rows if r.speedup]:
        share = min(0.6, (len(r.text) * CHAR_IN + 0.2) / axes_width_in)   # of the axis, for this label
        log_hi = max(log_hi, (math.log10(_label_x(r)) - share * log_lo) / (1 - share))
    lo, hi = 10 ** log_lo, 10 ** log_hi
    ticks = [t for t in (m * 10.0 ** k for k in range(-4, 6) for m in (1, 2, 5)) if lo <= t <= hi]
    decades = [t for t in ticks if math.isclose(math.log10(t), round(math.log10(t)), abs_tol=1e-9)]
    if len(ticks) > 9:
        ticks = decades if any(t < 1 for t in decades) else [t for t in ticks if t < 1][-2:] + decades
    return lo, hi, ticks


def _label_x(r: Row) -> float:
    """Where a bar's label starts: just right of the bar, its whisker and the 1× line."""
    return max(1.0, r.speedup, *(x for x in (r.interval or ()) if x > 0)) * 1.06


def plot_speedups(doc: dict, path: Path) -> None:
    rows = speedup_rows(doc)
    fig, ax = plt.subplots(figsize=(FIG_WIDTH_IN, 0.34 * max(len(rows), 2) + 1.9))
    lo, hi, ticks = _x_axis(rows, FIG_WIDTH_IN - max([len(r.label) for r in rows] + [10]) * CHAR_IN - 0.6)
    ax.set(xscale="log", xlim=(lo, hi), ylim=(len(rows) - 0.5, -0.5), axisbelow=True)
    text_x = blended_transform_factory(ax.transAxes, ax.transData)
    for y, r in enumerate(rows):
        colour = COLOURS[r.kind]
        if r.speedup:
            ax.barh(y, r.speedup - 1.0, left=1.0, height=0.7, color=colour)
            if r.interval and r.interval[0] > 0:  # an interval reaching zero has no place on a log axis
                ax.errorbar(r.speedup, y, xerr=[[r.speedup - r.interval[0]], [r.interval[1] - r.speedup]],
                            fmt="none", ecolor="#333333", elinewidth=0.8, capsize=2.5)
            ax.text(_label_x(r), y, r.text, va="center", fontsize=FONT_PT,
                    color="black" if r.kind != "by design" else "#555555")
        else:
            tint = tuple(1 - 0.14 * (1 - c) for c in matplotlib.colors.to_rgb(colour))  # opaque pale `colour`
            ax.axhspan(y - 0.4, y + 0.4, facecolor=tint, lw=0, zorder=0)
            if r.kind == "SUSPECT":
                ax.axhspan(y - 0.4, y + 0.4, facecolor="none", edgecolor=colour, hatch="///", lw=0, zorder=0)
            text = r.text if len(r.text) <= REASON_CHARS else r.text[:REASON_CHARS - 1] + "…"
            # an opaque box in the band's own tint: the 1× line and the grid do not run through the words
            ax.text(0.01, y, text, transform=text_x, va="center", fontsize=FONT_PT, zorder=4,
                    color=colour if r.kind != "skipped" else "#555555",
                    fontweight="bold" if r.kind in ("FAILED", "SUSPECT") else "normal",
                    bbox=dict(facecolor=tint, edgecolor="none", pad=1.5))
        if r.first_of_pair and y:
            ax.axhline(y - 0.5, color="#dddddd", lw=0.6)
    ax.set_yticks(range(len(rows)), [r.label for r in rows], fontsize=FONT_PT)
    for tick, r in zip(ax.get_yticklabels(), rows):
        if r.kind in ("FAILED", "SUSPECT"):
            tick.set_color(COLOURS[r.kind])
    ax.xaxis.set(major_locator=FixedLocator(ticks), major_formatter=FuncFormatter(lambda t, _pos=None: f"{t:g}×"),
                 minor_locator=NullLocator())
    ax.axvline(1.0, color="black", lw=0.8)
    ax.grid(True, axis="x", lw=0.3, color="#cccccc")
    ax.set_xlabel("speedup over the pair's baseline (median time ratio, log scale; bars from 1×, whiskers: 95% CI)")
    ax.set_title(f"Speedups on {run_label(doc)}\n{_subtitle(doc)}", fontsize=10)
    handles = [Patch(facecolor=COLOURS[k], alpha=1 if k in ("faster", "slower", "by design") else 0.35,
                     hatch="///" if k == "SUSPECT" else None, edgecolor=COLOURS[k], label=LEGEND[k])
               for k in COLOURS if any(r.kind == k for r in rows)]
    if handles:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0), ncol=len(handles), fontsize=FONT_PT,
                  bbox_transform=offset_copy(ax.transAxes, fig=fig, y=-34, units="points"), frameon=False)
    save_figure(fig, path)


def _roof_groups(rates: dict, precisions) -> list[tuple[list[str], float]]:
    """Precisions whose measured rates coincide (within 0.1%; a CPU run fills tf32/bf16/fp16 with fp32's)
    share one roof: [(precisions, TFLOP/s)], fastest first."""
    groups: list[tuple[list[str], float]] = []
    for prec in sorted((p for p in (precisions or rates) if rates.get(p)), key=lambda p: -rates[p]):
        for names, rate in groups:
            if math.isclose(rate, rates[prec], rel_tol=1e-3):
                names.append(prec)
                break
        else:
            groups.append(([prec], rates[prec]))
    return groups


def roofline_axes(peaks: dict, title: str, precisions=None, ridges: bool = False, ai_range=None):
    """A figure with the measured roofs drawn: min(bandwidth x AI, matmul rate), one line per distinct rate,
    from 2^-6 to 2^12 FLOP/byte or wider where `ai_range` (the points' lowest and highest AI) needs it."""
    fig, ax = plt.subplots(figsize=(8, 5.5))
    bw, rates = peaks.get("copy_gbps"), peaks.get("matmul_tflops") or {}
    lo, hi = ai_range or (2.0 ** -5, 2.0 ** 11)
    xs = [2.0 ** e for e in range(min(-6, math.floor(math.log2(lo)) - 1), max(12, math.ceil(math.log2(hi)) + 1) + 1)]
    for i, (names, rate) in enumerate(_roof_groups(rates, precisions) if bw else []):
        colour, style = ROOF_STYLES[i % len(ROOF_STYLES)]
        pts = sorted(xs + [rate * 1e3 / bw])  # include the ridge point so the corner is exact
        ax.plot(pts, [min(bw * 1e9 * x, rate * 1e12) / 1e12 for x in pts], lw=1.2, color=colour, ls=style,
                label=f"{' = '.join(names)} roof: {bw:.0f} GB/s, {rate:.3g} TFLOP/s", zorder=2)
        if ridges:
            ax.axvline(rate * 1e3 / bw, ls=":", lw=0.8, color="gray")
    ax.set_xscale("log", base=2)
    ax.set(yscale="log", xlabel="arithmetic intensity (FLOP per byte of device memory)", ylabel="achieved TFLOP/s",
           title=title)
    ax.grid(True, which="major", lw=0.3)
    return fig, ax


def _placeable(v: dict) -> bool:
    return bool(v.get("tflops") and v.get("arithmetic_intensity")) and variant_status(v)[0] not in ("FAILED", "skipped")


def plot_roofline(doc: dict, path: Path) -> None:
    ais = [v["arithmetic_intensity"] for p in doc["pairs"] for v in entries(p) if _placeable(v)]
    fig, ax = roofline_axes(doc["device"].get("ceilings") or {},
                            f"Roofline with measured ceilings, {run_label(doc)}\n{_subtitle(doc)}",
                            ai_range=(min(ais), max(ais)) if ais else None)
    ax.margins(x=0.03, y=0.08)
    fig.set_size_inches(11, 6)
    ax.title.set_fontsize(10)
    colours, markers = plt.get_cmap("tab10").colors, "osD^vP*Xh<>p"
    pair_handles, unplaced, tags, points = [], [], [], []
    for p in doc["pairs"]:
        pts = [v for v in entries(p) if _placeable(v)]
        if not pts:
            unplaced += [pair_key(p)] if p["status"] != "skipped" else []
            continue
        colour, marker = colours[len(pair_handles) % len(colours)], markers[len(pair_handles) % len(markers)]
        tags += _draw_pair(ax, p, pts, colour, marker)
        points += [(v["arithmetic_intensity"], v["tflops"]) for v in pts]
        pair_handles.append(Line2D([], [], ls="", marker=marker, markersize=7, markerfacecolor=colour,
                                   markeredgecolor="black", markeredgewidth=0.5, label=pair_key(p)))
    _place_tags(ax, tags, points)
    if not pair_handles:
        ax.text(0.5, 0.5, "no variant in this run has both a FLOP count and a time to place",
                transform=ax.transAxes, ha="center", va="center", fontsize=9, color="#555555",
                bbox=dict(facecolor="white", edgecolor="#cccccc", pad=4))
    how = [Line2D([], [], ls="", marker="o", markersize=7, markerfacecolor="white", markeredgecolor="#444444",
                  markeredgewidth=1.6, label="baseline (hollow)"),
           Line2D([], [], ls="", marker="o", markersize=7, markerfacecolor="#444444", markeredgecolor="black",
                  label="optimized (filled), arrow from its baseline")]
    roofs = [h for h in ax.get_lines() if not h.get_label().startswith("_")]
    ax.legend(handles=roofs + (how + pair_handles if pair_handles else []), loc="upper left",
              bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    if unplaced:
        note = "Not placed (no FLOP count, or no verified time): " + ", ".join(unplaced)
        ax.annotate(textwrap.fill(note, 130), xy=(0, 0), xycoords="axes fraction", xytext=(0, -42),
                    textcoords="offset points", va="top", fontsize=7, color="#555555")
    save_figure(fig, path)


def _draw_pair(ax, p: dict, pts: list[dict], colour, marker: str) -> list[tuple]:
    """The baseline hollow with the pair's colour as its edge, each variant filled, an arrow from one to the other;
    returns the tags to write beside the variants [(xy, text, colour)]."""
    base = next((v for v in pts if v["name"] == "baseline"), None)
    named = len([u for u in pts if u is not base]) > 1   # several variants: the tag names each
    labels = []
    for v in pts:
        xy = (v["arithmetic_intensity"], v["tflops"])
        if v is base:
            ax.scatter(*xy, marker=marker, s=60, facecolors="white", edgecolors=[colour], linewidths=1.8, zorder=4)
            continue
        status = variant_status(v)[0]
        suspect = status == "SUSPECT"
        ax.scatter(*xy, marker=marker, s=60, facecolors=[colour], zorder=5,
                   edgecolors="#e6850e" if suspect else "black", linewidths=2.0 if suspect else 0.5)
        if base:
            ax.annotate("", xy=xy, xytext=(base["arithmetic_intensity"], base["tflops"]), zorder=3,
                        arrowprops=dict(arrowstyle="-|>", color=colour, lw=0.9, alpha=0.8, shrinkA=5, shrinkB=5))
        tags = [short_variant_name(p["name"], v["name"])] if named else []
        tags += [status] if status != "ok" and status not in tags else []
        if tags:
            labels.append((xy, ", ".join(tags), COLOURS["SUSPECT"] if suspect else colour))
    return labels


def _place_tags(ax, labels: list[tuple], points: list[tuple[float, float]]) -> None:
    """Write each variant's tag beside its point, on the side where it covers the fewest points and tags."""
    px_per_pt = ax.figure.dpi / 72
    margin = 6 * px_per_pt   # a marker's radius
    ax.autoscale_view()
    where = [ax.transData.transform(p) for p in points]
    taken: list[tuple[float, float, float, float]] = []   # boxes of the tags already written

    def box(x0, y0, w, h, offset):
        dx, dy, ha, va = offset
        left = x0 + dx * px_per_pt - (w if ha == "right" else 0)
        bottom = y0 + dy * px_per_pt - (h if va == "top" else 0)
        return left, bottom, left + w, bottom + h

    def covered(b):   # the points under box b, and twice the tags
        points_under = sum(b[0] - margin < x < b[2] + margin and b[1] - margin < y < b[3] + margin for x, y in where)
        return points_under + 2 * sum(b[0] < t[2] and t[0] < b[2] and b[1] < t[3] and t[1] < b[3] for t in taken)

    for xy, text, colour in labels:
        x0, y0 = ax.transData.transform(xy)
        w, h = len(text) * 0.6 * TAG_PT * px_per_pt, TAG_PT * px_per_pt
        offset = min(TAG_OFFSETS, key=lambda o: covered(box(x0, y0, w, h, o)))
        taken.append(box(x0, y0, w, h, offset))
        dx, dy, ha, va = offset
        ax.annotate(text, xy=xy, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=TAG_PT,
                    color=colour)


def sweep_ceilings(pairs: list[dict], peaks: dict) -> list[tuple[str, float]]:
    """The measured ceilings the report applied to some point of these pairs (the variants' `ceiling`, none for a
    working set that fits in cache), [(name, value)]: "copy_gbps", "matmul_tflops.bf16" for a bf16 run."""
    found = []
    for name in sorted({v["ceiling"] for p in pairs for v in entries(p) if v.get("ceiling")}):
        value = peaks
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, (int, float)):
            found.append((name, float(value)))
    return found


def sweep_groups(doc: dict) -> dict[tuple[str, str], list[dict]]:
    """The pairs of a sweep over sizes, by (pair without its point, dtype), in order of size."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for p in doc["pairs"]:
        if "size" in (p.get("point") or {}):
            groups.setdefault((pair_key(p).split("@")[0], p["point"].get("dtype", "")), []).append(p)
    return {k: sorted(v, key=lambda p: p["point"]["size"]) for k, v in groups.items()}


def plot_sweep(doc: dict, path: Path) -> None:
    """One panel per swept pair and dtype: each variant's GB/s (memory-, transfer-bound) or TFLOP/s against the size,
    verified points only (a failed or SUSPECT point leaves a gap), and the ceilings applied as dashed lines."""
    groups = sweep_groups(doc)
    fig, axes = plt.subplots(len(groups), 1, figsize=(FIG_WIDTH_IN * 0.7, 3.0 * len(groups)), squeeze=False)
    peaks = doc["device"].get("ceilings") or {}
    for ax, ((key, dtype), pairs) in zip(axes[:, 0], groups.items()):
        rate, unit = ("gbps", "GB/s") if pairs[0]["bound"] in ("memory", "transfer") else ("tflops", "TFLOP/s")
        for name in dict.fromkeys(v["name"] for p in pairs for v in entries(p)):
            pts = [(p["point"]["size"], v[rate]) for p in pairs for v in entries(p)
                   if v["name"] == name and v.get("verified") and not v.get("suspect") and v.get(rate)]
            if pts:
                ax.plot(*zip(*pts), marker="o", markersize=4, label=short_variant_name(pairs[0]["name"], name))
        for (name, ceiling), style in zip(sweep_ceilings(pairs, peaks), ("--", ":", "-.")):
            ax.axhline(ceiling, ls=style, lw=1, color="#555555", label=f"measured {name} {ceiling:.4g} {unit}")
        ax.set_xscale("log", base=2)
        ax.set_xticks([p["point"]["size"] for p in pairs], [str(p["point"]["size"]) for p in pairs])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_ylim(bottom=0)
        ax.set_title(f"{key}{', ' + dtype if dtype else ''}", fontsize=FONT_PT + 1, loc="left")
        ax.set_xlabel("size: " + (pairs[0].get("size_counts") or "the pair's own unit"), fontsize=FONT_PT)
        ax.set_ylabel(unit, fontsize=FONT_PT)
        ax.tick_params(labelsize=FONT_PT)
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"Sweep: achieved rate against size. {run_label(doc)}\n{_subtitle(doc)}", fontsize=FONT_PT + 1)
    save_figure(fig, path)


def chart(path: Path, draw, ncols: int = 1, size: tuple[float, float] = (5, 3.5)) -> Path:
    """For the chapter scripts: `ncols` axes side by side, filled by `draw(*axes)`, saved as the report's are."""
    fig, axes = plt.subplots(1, ncols, figsize=size)
    draw(*(axes if ncols > 1 else [axes]))
    save_figure(fig, Path(path))
    return Path(path)
