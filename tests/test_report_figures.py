"""summary.md, --compare and the figures, on documents shaped like the harness's: every status a variant can have."""
import copy
import json
import os
import re
import stat
import struct
import zlib

import pytest

from common import figures
from common.files import atomic_write
from common.report import CompareRefused, compare_runs, merge_runs, summary_markdown, write_report
from common.results import (entries, format_with_ci, pair_key, speedup_interval, speedup_text, validate_results,
                            variant_status)

H100_CEILINGS = {"copy_gbps": 3008.0, "h2d_gbps": 55.0, "launch_us": 9.2,
                 "matmul_tflops": {"fp32": 51.7, "tf32": 355.0, "bf16": 658.0, "fp16": 636.0}}
CPU_CEILINGS = {"copy_gbps": 11.2, "launch_us": 2.6,
                "matmul_tflops": {"fp32": 0.0896, "tf32": 0.0896, "bf16": 0.0896, "fp16": 0.0896}}


def entry(name, median_ms, ci_pct=1.0, speedup=None, **more):
    v = {"name": name, "median_ms": median_ms, "p10_ms": median_ms * 0.99 if median_ms else None,
         "p90_ms": median_ms * 1.01 if median_ms else None, "median_ci_pct": ci_pct if median_ms else None,
         "speedup": speedup, "verified": True, "pct_of_ceiling": 50.0, "error": None, "suspect": None,
         "tflops": 0.005 / median_ms if median_ms else None, "arithmetic_intensity": 4.0}   # 5 GFLOP, 1.25 GB
    v.update(more)
    return v


def failed(name, error=None, message=None):
    v = entry(name, None, verified=False, tflops=None, arithmetic_intensity=None, pct_of_ceiling=None, error=error)
    if message:
        v["verification"] = {"ok": False, "message": message}
    return v


def pair(name, baseline, variants, status="ok", **more):
    p = {"chapter": 1, "name": name, "bound": "memory", "status": status, "error": None,
         "baseline": baseline, "variants": variants}
    p.update(more)
    return p


def document(pairs, ceilings=H100_CEILINGS, device="NVIDIA H100 80GB HBM3", **more):
    doc = {"schema_version": 1, "device": {"name": device, "type": "cuda" if ceilings is H100_CEILINGS else "cpu",
                                           "ceilings": ceilings},
           "torch": "2.13", "cuda": "13.0", "driver": "580", "git_commit": "abc1234",
           "created": "2026-11-23T00:00:00+00:00", "quick": False,
           "host": {"cpu": "AMD EPYC 9654 96-Core Processor", "cores": 192}, "pairs": pairs}
    doc.update(more)
    return doc


def all_pass_run():
    base = entry("baseline", 2.0, ci_pct=0.4, speedup=1.0, peak_memory_mb=512.0)
    fast = entry("optimized_copy", 0.25, ci_pct=0.4, speedup=7.9123, speedup_ci=[7.6, 8.2], peak_memory_mb=256.0)
    return document([pair("copy", base, [fast])])


def run_with_failures():
    """Every way a pair or a variant can end, in one run."""
    base = entry("baseline", 1.0, ci_pct=0.5, speedup=1.0, peak_memory_mb=100.0)
    mixed = pair("mixed", base, [
        entry("optimized_mixed_fast", 0.025, speedup=40.1234, speedup_ci=[40.119, 40.127], peak_memory_mb=80.0),
        entry("optimized_mixed_slow", 1 / 0.23, speedup=0.23),
        entry("optimized_mixed_pitfall", 1 / 0.41, ci_pct=10.0, speedup=0.41, kind="pitfall"),
        entry("optimized_mixed_tradeoff", 1 / 0.8, speedup=0.8, kind="tradeoff", peak_memory_mb=10.0),
        entry("optimized_mixed_suspect", 0.001, speedup=None,
              suspect="0.001 ms beats the 0.09 ms floor of 268 MB at 3008 GB/s (copy_gbps)"),
        failed("optimized_mixed_wrong", message="relative error 4.41e-03 over fp32 tolerance 1e-05"),
        failed("optimized_mixed_raises", error="RuntimeError: planted failure"),
        failed("optimized_mixed_inplace", error="modified input x"),
        failed("optimized_mixed_stale", error="returns a result computed before the call"),
        dict(failed("optimized_mixed_gpu"), skipped="needs CUDA", verified=False),
    ], status="failed", error="optimized_mixed_wrong failed (verify): relative error 4.41e-03 over fp32 tolerance 1e-05",
        errors=["optimized_mixed_wrong failed (verify): relative error 4.41e-03 over fp32 tolerance 1e-05",
                "optimized_mixed_raises failed (verify): RuntimeError: planted failure",
                "optimized_mixed_inplace failed (verify): modified input x",
                "optimized_mixed_stale failed (verify): returns a result computed before the call"])
    hung = pair("hangs", entry("baseline", 3.0, speedup=1.0), [
        entry("optimized_hangs_a", 1.5, speedup=2.0),
        failed("optimized_hangs_b", error="timed out after 600 s in optimized_hangs_b (time)"),
        dict(failed("optimized_hangs_c"), skipped="not run: optimized_hangs_b timed out")],
        status="failed", error="timed out after 600 s in optimized_hangs_b (time)", hung_variant="optimized_hangs_b")
    crashed = pair("crashes", None, [], status="failed", error="crashed (exit code -11): Segmentation fault")
    timed_out = pair("stuck", None, [], status="failed", error="timed out after 600 s", hung_variant="baseline")
    skipped = pair("gpu_only", None, [], status="skipped", error="needs CUDA; this run is on CPU")
    return document([mixed, hung, crashed, timed_out, skipped], interrupted=True)


def all_timeout_run():
    return document([pair(n, None, [], status="failed", error="timed out after 600 s", hung_variant="baseline")
                     for n in ("a", "b", "c")])


def table_rows(md, variant):
    """The rows of `variant` in the main results table."""
    main = md.split("## ")[0]
    return [line for line in main.splitlines() if line.startswith("| ch1/") and f"| {variant} |" in line]


# ----------------------------------------------------------------------------- digits
@pytest.mark.parametrize("value, rel, text", [
    (7.9123, 0.3 / 7.9, "7.9"),        # ±0.3: the tenths are the last digit it supports
    (40.1234, 1e-4, "40.12"),          # ±0.004 supports more, but 4 significant digits is the most printed
    (7.87, 0.15 / 7.87, "7.87"),       # an interval starting with 1 keeps two digits
    (123.4, 0.2, "120"),               # ±25: to the tens
    (0.2345, 0.9, "0.2"),              # ±0.21
    (0.2345, 0.5, "0.23"),             # ±0.12: a leading 1, two digits
    (40.1024, None, "40.1"),           # unknown interval: three significant digits
    (None, 0.1, "–"),
])
def test_speedups_carry_the_digits_their_interval_supports(value, rel, text):
    assert format_with_ci(value, rel) == text


# ----------------------------------------------------------------------------- summary.md
def test_summary_has_one_status_column_a_ci_column_and_the_host():
    md = summary_markdown(all_pass_run())
    header = next(line for line in md.splitlines() if line.startswith("| pair |"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells.count("status") == 1 and "verified" not in cells
    assert any("CI" in c for c in cells) and "peak memory MB" in cells
    assert "AMD EPYC 9654 96-Core Processor, 192 cores" in md
    (row,) = table_rows(md, "optimized_copy")
    assert "| ok |" in row and "7.9× (7.6–8.2)" in row and "±0.2%" in row and "| 256.0 |" in row
    assert "Interrupted" not in md


def test_summary_lists_every_failure_and_gives_each_variant_one_status():
    doc = run_with_failures()
    md = summary_markdown(doc)
    assert md.index("Interrupted") < md.index("| pair |")
    failures = md.split("## Failures")[1]
    for reason in ("4.41e-03", "planted failure", "modified input x", "returns a result computed before the call",
                   "timed out after 600 s in optimized_hangs_b", "Segmentation fault", "hung in baseline"):
        assert reason in failures, reason
    status_col = 3
    def status(variant):
        (row,) = table_rows(md, variant)
        return [c.strip() for c in row.strip("|").split("|")][status_col]
    assert status("optimized_mixed_raises") == "**FAILED**: RuntimeError: planted failure"
    assert status("optimized_mixed_wrong").startswith("**FAILED**: failed verification: relative error")
    assert status("optimized_mixed_gpu") == "skipped: needs CUDA"
    assert status("optimized_mixed_pitfall") == "pitfall (slower by design)"
    assert status("optimized_mixed_tradeoff") == "tradeoff (slower by design)"
    assert status("optimized_mixed_suspect").startswith("**SUSPECT**: 0.001 ms beats")
    assert status("optimized_mixed_fast") == "ok" and "40.12×" in table_rows(md, "optimized_mixed_fast")[0]
    # a pair that failed as a whole has its own row; the skipped pair says why
    assert any("ch1/crashes" in line and "**FAILED**: crashed" in line for line in md.splitlines())
    assert any("ch1/gpu_only" in line and "skipped: needs CUDA" in line for line in md.splitlines())


def test_a_declared_pitfall_that_wins_is_not_called_slower():
    """A pitfall or trade-off whose whole interval lies above 1.0 is mislabelled: the summary and the chart say
    so instead of "slower by design"; one whose interval reaches 1.0 keeps the label."""
    base = entry("baseline", 0.0453, ci_pct=0.4, speedup=1.0)
    wins = entry("optimized_wins", 0.0399, speedup=1.132, speedup_ci=[1.127, 1.139], kind="pitfall")
    tie = entry("optimized_tie", 0.0450, speedup=1.007, speedup_ci=[0.99, 1.02], kind="tradeoff")
    doc = document([pair("prealloc", base, [wins, tie])])
    md = summary_markdown(doc)
    (row,) = table_rows(md, "optimized_wins")
    assert "pitfall (declared slower, measured faster)" in row and "slower by design" not in row
    (row,) = table_rows(md, "optimized_tie")
    assert "tradeoff (slower by design)" in row
    rows = {r.label: r for r in figures.speedup_rows(doc)}
    assert rows["ch1/prealloc: wins"].text == "pitfall: 1.132× (declared slower, measured faster)"
    assert rows["ch1/prealloc: tie"].text.endswith("(slower by design)")


def test_a_suspect_time_has_no_speedup_and_a_pitfall_is_no_failure():
    md = summary_markdown(run_with_failures())
    (suspect,) = table_rows(md, "optimized_mixed_suspect")
    assert "×" not in suspect.split("|")[7] and "SUSPECT" in md.split("## Suspect")[1]
    (pitfall,) = table_rows(md, "optimized_mixed_pitfall")
    assert "FAILED" not in pitfall and "0.41×" in pitfall
    assert "pitfall" not in md.split("## Failures")[1].split("##")[0]


def test_old_results_without_the_new_fields_still_summarise():
    old = all_pass_run()
    del old["host"]
    for v in [old["pairs"][0]["baseline"]] + old["pairs"][0]["variants"]:
        for k in ("suspect", "peak_memory_mb", "speedup_ci"):
            v.pop(k, None)
    md = summary_markdown(old)
    assert "Host CPU" not in md and "peak memory" not in md
    # the interval derived from both medians' ±0.2%: 8.0 × (1 ∓ 0.002) / (1 ± 0.002)
    (row,) = table_rows(md, "optimized_copy")
    assert "7.91× (7.88–7.94)" in row


# ----------------------------------------------------------------------------- compare
def noisy(doc, factor, ci_pct):
    doc = copy.deepcopy(doc)
    for p in doc["pairs"]:
        for v in ([p["baseline"]] if p.get("baseline") else []) + p["variants"]:
            if v.get("median_ms"):
                v["median_ms"] *= factor
                v["median_ci_pct"] = ci_pct
    return doc


def test_identical_runs_have_no_regressions():
    doc = run_with_failures()
    text, n = compare_runs(doc, copy.deepcopy(doc))
    assert n == 0 and "REGRESSION" not in text


def test_a_change_inside_both_intervals_is_noise_and_one_beyond_them_is_a_regression():
    old = noisy(all_pass_run(), 1.0, ci_pct=30.0)         # ±15%
    text, n = compare_runs(old, noisy(old, 1.2, ci_pct=30.0))
    assert n == 0 and "within noise" in text
    tight = noisy(all_pass_run(), 1.0, ci_pct=1.0)
    text, n = compare_runs(tight, noisy(tight, 1.2, ci_pct=1.0))
    assert n == 2 and text.count("REGRESSION") == 2         # baseline and variant, each 20% slower
    _, n = compare_runs(tight, noisy(tight, 1.03, ci_pct=0.1))   # beyond the intervals, under 5%
    assert n == 0


def test_several_runs_a_side_span_the_spread_between_runs():
    # The H100's host-bound pairs: each run's interval about ±0.5%, the runs up to 65% apart (profiles/h100/issue25-5bf146f)
    base = all_pass_run()
    old = [noisy(base, f, ci_pct=1.0) for f in (1.0, 1.25, 0.95)]
    new = [noisy(base, f, ci_pct=1.0) for f in (1.2, 0.98, 1.06)]
    _, n = compare_runs(old[0], new[0])
    assert n == 2                                            # one run each: +20% beyond both tight intervals
    text, n = compare_runs(merge_runs(old), merge_runs(new))
    assert n == 0 and "+6.0%" in text and "within noise (runs 1.89–2.512 / runs 1.95–2.412)" in text
    assert text.startswith("old: 3 runs, ")
    slower = [noisy(base, f, ci_pct=1.0) for f in (1.4, 1.35, 1.5)]   # every new run beyond every old one
    text, n = compare_runs(merge_runs(old), merge_runs(slower))
    assert n == 2 and "+40.0%  REGRESSION" in text


def test_a_failure_in_any_run_stands_and_a_rerun_of_some_pairs_merges():
    full = run_with_failures()
    rerun = copy.deepcopy(full)
    rerun["pairs"] = [p for p in rerun["pairs"] if p["name"] == "mixed"]
    fast = next(v for v in rerun["pairs"][0]["variants"] if v["name"] == "optimized_mixed_fast")
    fast.update(verified=False, speedup=None, error="RuntimeError: planted in one run")
    text, n = compare_runs(full, merge_runs([copy.deepcopy(full), rerun]))
    assert n == 1 and "now FAILS: RuntimeError: planted in one run" in text and "MISSING" not in text


def test_the_new_side_takes_its_worst_run_and_the_old_side_its_best():
    def with_variant(**fields):
        d = all_pass_run()
        d["pairs"][0]["variants"][0].update(fields)
        return d
    failing = dict(verified=False, speedup=None, error="RuntimeError: planted")
    suspect = dict(speedup=None, suspect="beats the floor its workload implies")
    # a failure the old code had once does not excuse one the new code has every time
    text, n = compare_runs(merge_runs([with_variant(**failing), all_pass_run()], worst=False),
                           merge_runs([with_variant(**failing), with_variant(**failing)]))
    assert n == 1 and "now FAILS: RuntimeError: planted" in text
    # FAILED outranks SUSPECT whichever run comes first
    text, n = compare_runs(all_pass_run(), merge_runs([with_variant(**suspect), with_variant(**failing)]))
    assert n == 1 and "now FAILS" in text
    # a run in which the pair failed as a whole (no baseline) stands for the new side
    crashed = all_pass_run()
    crashed["pairs"][0].update(status="failed", baseline=None, variants=[], error="crashed (exit code -9)")
    text, n = compare_runs(all_pass_run(), merge_runs([all_pass_run(), crashed]))
    assert n == 1 and "FAILED in new run: crashed (exit code -9)" in text


def test_the_runs_of_one_side_must_be_of_one_device_and_mode():
    quick = all_pass_run()
    quick["quick"] = True
    with pytest.raises(CompareRefused):
        merge_runs([all_pass_run(), quick])
    other = all_pass_run()
    other["device"]["name"] = "another GPU"
    with pytest.raises(CompareRefused):
        merge_runs([all_pass_run(), other])


def test_quick_against_full_is_refused_unless_allowed():
    full = all_pass_run()
    quick = dict(copy.deepcopy(full), quick=True)
    with pytest.raises(CompareRefused, match="quick"):
        compare_runs(full, quick)
    text, _ = compare_runs(full, quick, allow_quick_vs_full=True)
    assert "warning:" in text.splitlines()[2] and "quick" in text.splitlines()[2]


def test_different_devices_and_hosts_are_stated_at_the_top():
    old = all_pass_run()
    new = copy.deepcopy(old)
    new["device"]["name"] = "NVIDIA A100"
    new["host"]["cpu"] = "Intel Xeon Platinum 8480+"
    head = compare_runs(old, new)[0].split("pair / variant")[0]
    assert "different devices" in head and "different host CPUs" in head


def test_missing_pairs_and_variants_count_as_regressions():
    old = run_with_failures()
    new = copy.deepcopy(old)
    new["pairs"] = [p for p in new["pairs"] if p["name"] != "hangs"]
    mixed = next(p for p in new["pairs"] if p["name"] == "mixed")
    mixed["variants"] = [v for v in mixed["variants"] if v["name"] != "optimized_mixed_fast"]
    text, n = compare_runs(old, new)
    assert n == 2 and text.count("MISSING") == 2
    assert "ch1/hangs" in text and "optimized_mixed_fast" in text


def test_what_the_old_run_never_measured_is_no_regression_when_missing():
    # a full run against a rerun of one pair: the pairs and variants the old run skipped or failed are not lost
    old = run_with_failures()
    new = copy.deepcopy(old)
    new["pairs"] = [p for p in new["pairs"] if p["name"] == "mixed"]
    mixed = new["pairs"][0]
    mixed["variants"] = [v for v in mixed["variants"] if v["name"] != "optimized_mixed_gpu"]
    text, n = compare_runs(old, new)
    row = {label: next(line for line in text.splitlines() if line.startswith(label + " "))
           for label in ("ch1/gpu_only", "ch1/crashes", "ch1/stuck", "ch1/hangs", "ch1/mixed optimized_mixed_gpu")}
    assert row["ch1/gpu_only"].endswith("skipped in old run, missing from the new run")
    assert row["ch1/crashes"].endswith("FAILED in old run, missing from the new run")
    assert row["ch1/stuck"].endswith("FAILED in old run, missing from the new run")
    assert row["ch1/mixed optimized_mixed_gpu"].endswith("skipped in old run, missing from the new run")
    assert row["ch1/hangs"].endswith("MISSING from the new run  REGRESSION")  # its baseline and a variant were timed
    assert n == text.count("REGRESSION") == 1


def test_a_newly_failing_variant_is_a_regression_and_a_pair_that_now_crashes_too():
    old = all_pass_run()
    new = copy.deepcopy(old)
    new["pairs"][0]["variants"][0] = failed("optimized_copy", error="modified input x")
    assert compare_runs(old, new)[1] == 1
    new["pairs"][0] = pair("copy", None, [], status="failed", error="crashed (exit code -11)")
    assert compare_runs(old, new)[1] == 1


# ----------------------------------------------------------------------------- files
@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_report_files_follow_the_umask(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        atomic_write(tmp_path / "summary.md", ["x"])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "summary.md").stat().st_mode) == mode


def png_problem(data: bytes) -> str | None:
    """Why `data` is not a whole PNG (None when it is): the signature, then every chunk's length and CRC up to IEND."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return "no PNG signature"
    at, kinds = 8, []
    while at + 12 <= len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length] or b"\0\0\0\0")
        if len(body) != length or zlib.crc32(kind + body) != crc:
            return f"chunk {kind!r} at byte {at} is cut or corrupt"
        kinds.append(kind)
        at += 12 + length
        if kind == b"IEND":
            break
    if kinds[:1] != [b"IHDR"] or b"IDAT" not in kinds or kinds[-1:] != [b"IEND"]:
        return f"chunks {kinds[:3]}...{kinds[-1:]}: not IHDR ... IDAT ... IEND"
    return None


def test_png_check_catches_a_cut_or_corrupt_file():
    import io
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(1, 1))
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    good = buf.getvalue()
    assert png_problem(good) is None
    assert png_problem(good[:len(good) // 2]) and png_problem(b"GIF89a" + good[6:])
    flipped = bytearray(good)
    flipped[60] ^= 0xFF
    assert png_problem(bytes(flipped))


def test_write_report_writes_every_file_readable(tmp_path):
    """Each file written is read back: results.json parses to the document and follows the schema, summary.md has a
    row for every pair and entry, and both figures are whole PNGs."""
    doc = run_with_failures()
    old = os.umask(0o022)
    try:
        written = write_report(doc, tmp_path)
    finally:
        os.umask(old)
    names = {"summary.md", "recommendations.md", "speedup.png", "roofline.png", "results.json"}
    assert {p.name for p in written} == names and {p.name for p in tmp_path.iterdir()} == names
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in written)

    back = json.loads((tmp_path / "results.json").read_text())
    assert validate_results(back) == [] and back == json.loads(json.dumps(doc))

    md = (tmp_path / "summary.md").read_text()
    assert md == summary_markdown(doc)
    rows = [line for line in md.split("## ")[0].splitlines() if line.startswith("| ch")]
    for p in doc["pairs"]:
        mine = [r for r in rows if r.startswith(f"| {pair_key(p)} |")]
        assert mine, pair_key(p)
        for v in entries(p):
            assert any(f"| {v['name']} |" in r for r in mine), (pair_key(p), v["name"])

    for name in ("speedup.png", "roofline.png"):
        assert png_problem((tmp_path / name).read_bytes()) is None, name

    # recommendations.md lists every failed or SUSPECT variant, and the crashed pair, before any ranking
    rec = (tmp_path / "recommendations.md").read_text()
    untrusted = rec.split("## Furthest")[0]
    for p in doc["pairs"]:
        for v in entries(p):
            if variant_status(v)[0] in ("FAILED", "SUSPECT") and not v.get("skipped"):
                assert f"{v['name']}: {variant_status(v)[0]}" in untrusted, (pair_key(p), v["name"])
    assert "**ch1/crashes** did not run to the end: crashed (exit code -11)" in untrusted


def test_write_report_without_figures_writes_the_summary_and_results_only(tmp_path):
    written = write_report(all_pass_run(), tmp_path, figures=False)
    assert {p.name for p in written} == {"summary.md", "recommendations.md", "results.json"}
    assert not (tmp_path / "speedup.png").exists()


def test_imports_run_downhill_and_reading_results_loads_no_figures(tmp_path):
    """Imports run downhill: files (a leaf) <- results <- report, and results <- figures, which the report
    loads only to draw (no cycle, no callback). Reading, summarising and comparing results (and the
    recommendations) loads neither common.figures nor matplotlib, nor torch."""
    import ast
    import subprocess
    import sys
    from conftest import ROOT
    tree = ast.parse((ROOT / "common" / "files.py").read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + \
        [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m and m.split(".")[0] == "common"], imported
    report_tree = ast.parse((ROOT / "common" / "report.py").read_text())
    top_level = [n for n in report_tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [n for n in top_level if "figures" in ast.dump(n)]
    figures_tree = ast.parse((ROOT / "common" / "figures.py").read_text())
    assert not [n for n in ast.walk(figures_tree) if isinstance(n, ast.ImportFrom) and n.module == "common.report"]
    (tmp_path / "results.json").write_text(json.dumps(run_with_failures()))
    code = ("import json, sys; from common.report import compare_runs, summary_markdown\n"
            "from common.results import validate_results; from common.verdict import recommendations\n"
            f"doc = json.load(open({str(tmp_path / 'results.json')!r}))\n"
            "assert validate_results(doc) == []; summary_markdown(doc); compare_runs(doc, doc); recommendations(doc)\n"
            "print(sorted(m for m in sys.modules if m in ('common.figures', 'torch') or m.startswith('matplotlib')))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr[-2000:]


# ----------------------------------------------------------------------------- numbers that cannot be right
def cpu_run_with_noisy_numbers():
    """What a busy CPU gave: a baseline whose median interval is 250% wide, shares of 265% and 104%."""
    base = entry("baseline", 2.0, ci_pct=250.0, speedup=1.0, pct_of_ceiling=265.0, ceiling="copy_gbps")
    slow = entry("optimized_copy", 20.0, ci_pct=10.0, speedup=0.1, speedup_ci=[-0.3, 1.1], pct_of_ceiling=104.0,
                 ceiling="copy_gbps", ceiling_note="working set under 4x the cache: a rate served from cache")
    below = entry("optimized_copy_neg", 2.0, speedup=1.0, pct_of_ceiling=-3.0, ceiling="copy_gbps")
    return document([pair("copy", base, [slow, below])], ceilings=CPU_CEILINGS, device="cpu")


@pytest.mark.parametrize("base_ci, v_ci", [(0.4, 0.4), (150.0, 1.0), (199.9, 0.0), (200.0, 5.0), (250.0, 10.0),
                                           (1.0, 200.0), (1.0, 400.0), (900.0, 900.0)])
@pytest.mark.parametrize("speedup", [0.1, 1.0, 40.0])
def test_a_speedup_interval_has_two_positive_ends_around_the_speedup(base_ci, v_ci, speedup):
    base = {"median_ms": 1.0, "median_ci_pct": base_ci}
    v = {"median_ms": 1.0 / speedup, "median_ci_pct": v_ci, "speedup": speedup, "verified": True}
    lo, hi = speedup_interval(base, v)
    assert 0 < lo <= speedup <= hi
    assert lo * hi == pytest.approx(speedup ** 2)      # multiplicative: as far below as above, in ratio
    text = speedup_text(v, base)
    ends = re.fullmatch(r"([0-9.]+)× \(([0-9.]+)–([0-9.]+)\)", text)
    assert ends, text                                   # no minus sign, an en dash between the ends
    assert float(ends[1]) > 0 and float(ends[2]) > 0 and float(ends[3]) > 0, text


def test_a_stored_interval_with_a_negative_end_is_rebuilt_from_the_medians():
    doc = cpu_run_with_noisy_numbers()
    p = doc["pairs"][0]
    lo, hi = speedup_interval(p["baseline"], p["variants"][0])
    assert 0 < lo < 0.1 < hi
    (row,) = table_rows(summary_markdown(doc), "optimized_copy")
    assert "0.10× (0.04–0.24)" in row and "-" not in row.split("|")[7]


def test_a_small_interval_end_keeps_a_significant_digit():
    base = {"median_ms": 1.0, "median_ci_pct": 0.0}
    v = {"median_ms": 10.0, "median_ci_pct": 0.0, "speedup": 0.1, "speedup_ci": [0.05, 1.1], "verified": True}
    assert speedup_text(v, base) == "0.1× (0.05–1.1)"


def test_a_speedup_with_a_wide_interval_keeps_its_first_digit():
    # A CPU quick run's batched_gemm: 4.79x with an interval of 1.16-69.7 printed as "0× (1–70)"
    base = {"median_ms": 1.0, "median_ci_pct": 0.0}
    v = {"median_ms": 1 / 4.79, "median_ci_pct": 0.0, "speedup": 4.79, "speedup_ci": [1.16, 69.7], "verified": True}
    assert speedup_text(v, base) == "5× (1–70)"
    assert format_with_ci(4.79, 7.16) == "5"          # the figure's label: the same first digit
    v.update(speedup=0.003, speedup_ci=[0.0001, 0.5])  # the ends at the digits the interval supports, or their own
    assert speedup_text(v, base) == "0.003× (0.0001–0.5)"


def share_cells(md):
    return {c[2]: c[7] for c in ([x.strip() for x in r.strip("|").split("|")] for r in md.split("## ")[0].splitlines()
                                 if r.startswith("| ch1/"))}


def notes_of(md):
    return dict(re.findall(r"^- \[(\d+)\] (.*)$", md, re.M))


def test_shares_outside_0_to_100_percent_are_not_printed_as_shares():
    md = summary_markdown(cpu_run_with_noisy_numbers())
    cells, notes = share_cells(md), notes_of(md)
    # 265%: not printed; the note gives what was measured
    mark = re.fullmatch(r"– \[(\d+)\]", cells["baseline"])
    assert mark and "measured 265% of copy_gbps" in notes[mark[1]]
    # 104%: within the ceilings' noise, printed as measured with a note; and the variant's ceiling_note
    marks = re.fullmatch(r"104\.0 \[(\d+)\] \[(\d+)\]", cells["optimized_copy"])
    assert marks and "noise" in notes[marks[1]] and "served from cache" in notes[marks[2]]
    mark = re.fullmatch(r"– \[(\d+)\]", cells["optimized_copy_neg"])
    assert mark and "below 0%" in notes[mark[1]]
    for cell in cells.values():
        number = re.match(r"[-0-9.]+", cell)
        assert not number or 0 <= float(number[0]) <= 110, cell
    assert "on a CPU is rough" in md
    assert "on a CPU is rough" not in summary_markdown(all_pass_run())


def overlap_run(**variant):
    st = {"chunks": 4, "stage_ms": {"h2d": 1.0, "compute": 2.0}, "serial_ms": 12.0, "ideal_ms": 9.0}
    return document([pair("pipe", entry("baseline", 12.0, speedup=1.0, overlap_pct_of_ideal=0.0),
                          [entry("optimized_pipe", 10.0, speedup=1.2, **variant)], stages=st)])


def overlap_cell(md, variant="optimized_pipe"):
    table = md.split("## Overlap")[1]
    (row,) = [r for r in table.splitlines() if f"| {variant} |" in r]
    return [c.strip() for c in row.strip("|").split("|")][6]


def test_the_overlap_table_shows_the_variants_overlap_note():
    assert overlap_cell(summary_markdown(overlap_run(overlap_pct_of_ideal=66.7))) == "67%"
    note = "the copies share one copy engine, so they serialize"
    assert overlap_cell(summary_markdown(overlap_run(overlap_pct_of_ideal=66.7, overlap_note=note))) == f"67% ({note})"
    assert "engine \\| so" in summary_markdown(overlap_run(overlap_note="engine | so"))   # a | would end the cell
    assert overlap_cell(summary_markdown(overlap_run(overlap_note="no stages apply"))) == "no stages apply"
    md = summary_markdown(overlap_run(overlap_pct_of_ideal=130.0))
    mark = re.fullmatch(r"– \[(\d+)\]", overlap_cell(md))
    assert mark and "measured 130%" in notes_of(md)[mark[1]]
    md = summary_markdown(overlap_run(overlap_pct_of_ideal=-20.0))
    mark = re.fullmatch(r"– \[(\d+)\]", overlap_cell(md))
    assert mark and "slower than its stages run one after another" in notes_of(md)[mark[1]]


# ----------------------------------------------------------------------------- figures
@pytest.fixture
def drawn(monkeypatch):
    """Draw a figure and keep it open for inspection instead of saving it."""
    figs = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path: (fig.canvas.draw(), figs.append(fig)))

    def draw(plot, doc):
        plot(doc, None)
        return figs[-1]
    yield draw
    import matplotlib.pyplot as plt
    plt.close("all")


def test_speedup_chart_has_a_row_for_every_pair_even_when_all_timed_out(drawn):
    rows = figures.speedup_rows(all_timeout_run())
    assert [r.kind for r in rows] == ["FAILED"] * 3 and all("timed out" in r.text for r in rows)
    ax = drawn(figures.plot_speedups, all_timeout_run()).axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert sum("FAILED: timed out after 600 s" in t for t in texts) == 3
    assert [t.get_text() for t in ax.get_yticklabels()] == ["ch1/a", "ch1/b", "ch1/c"]


def test_speedup_chart_colours_say_the_status(drawn):
    rows = {r.label: r for r in figures.speedup_rows(run_with_failures())}
    assert rows["ch1/mixed: fast"].kind == "faster" and rows["ch1/mixed: fast"].text == "40.12×"
    assert rows["ch1/mixed: slow"].kind == "slower" and figures.COLOURS["slower"] != figures.COLOURS["faster"]
    assert rows["ch1/mixed: pitfall"].kind == "by design"
    assert rows["ch1/mixed: pitfall"].text == "pitfall: 0.41× (slower by design)"
    assert rows["ch1/mixed: suspect"].kind == "SUSPECT" and rows["ch1/mixed: suspect"].speedup is None
    assert rows["ch1/mixed: raises"].kind == "FAILED" and rows["ch1/mixed: gpu"].kind == "skipped"
    assert rows["ch1/crashes"].kind == "FAILED" and rows["ch1/gpu_only"].kind == "skipped"
    fig = drawn(figures.plot_speedups, run_with_failures())
    ax = fig.axes[0]
    red = [t for t in ax.texts if t.get_text().startswith("FAILED")]
    assert red and all(t.get_color() == figures.COLOURS["FAILED"] for t in red)


@pytest.mark.parametrize("make", [all_pass_run, run_with_failures, all_timeout_run])
def test_speedup_labels_stay_inside_the_axes_and_ticks_do_not_overlap(drawn, make):
    fig = drawn(figures.plot_speedups, make())
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    for t in ax.texts:
        ext = t.get_window_extent(renderer)
        assert box.x0 - 1 <= ext.x0 and ext.x1 <= box.x1 + 1, t.get_text()
    labels = [t for t in ax.get_xticklabels() if t.get_text() and t.get_visible()]
    assert not [t for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    extents = sorted((t.get_window_extent(renderer) for t in labels), key=lambda e: e.x0)
    assert all(a.x1 < b.x0 for a, b in zip(extents, extents[1:]))


def test_coinciding_roofs_are_drawn_once():
    fig, ax = figures.roofline_axes(CPU_CEILINGS, "cpu")
    assert [line.get_label() for line in ax.get_lines()] == ["fp32 = tf32 = bf16 = fp16 roof: 11 GB/s, 0.0896 TFLOP/s"]
    fig, ax = figures.roofline_axes(H100_CEILINGS, "gpu")
    assert len(ax.get_lines()) == 4


def test_roofline_baselines_are_visible_and_the_legend_is_outside(drawn):
    fig = drawn(figures.plot_roofline, run_with_failures())
    ax = fig.axes[0]
    baselines = [c for c in ax.collections if tuple(c.get_facecolor()[0][:3]) == (1.0, 1.0, 1.0)]
    assert baselines and all(c.get_edgecolor()[0][3] == 1.0 and c.get_linewidths()[0] > 1 for c in baselines)
    renderer = fig.canvas.get_renderer()
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
    # crashed and timed-out pairs, which have no point, are named under the plot
    assert any("ch1/crashes" in t.get_text() for t in ax.texts)


def test_the_committed_h100_reports_still_read(drawn):
    """Old results.json files (no host, kind, suspect or speedup_ci) summarise and draw."""
    import json
    from conftest import ROOT
    doc = json.loads((ROOT / "profiles/h100/archive/ch1-3bfe94c/results.json").read_text())
    md = summary_markdown(doc)
    (row,) = table_rows(md, "optimized_batched_gemm")
    assert "| ok |" in row and "40.1× (" in row
    rows = figures.speedup_rows(doc)
    assert len(rows) == 10 and all(r.kind == "faster" for r in rows)
    ax = drawn(figures.plot_roofline, doc).axes[0]
    assert any("ch1/pinned_memory" in t.get_text() for t in ax.texts)   # a transfer pair has no FLOPs to place


def test_a_suspect_baseline_is_shown_and_its_share_of_the_ceiling_is_not():
    doc = all_pass_run()
    p = doc["pairs"][0]
    p["baseline"]["suspect"] = "0.001 ms is 90x faster than the floor its workload implies"
    p["variants"][0].update(suspect="the baseline's time is suspect", speedup=None, speedup_ci=None)
    rows = figures.speedup_rows(doc)
    assert [(r.label, r.kind) for r in rows] == [("ch1/copy: baseline", "SUSPECT"), ("ch1/copy: optimized", "SUSPECT")]
    (row,) = table_rows(summary_markdown(doc), "baseline")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3].startswith("**SUSPECT**") and cells[6] == "–" and cells[7] == "–"


def test_summary_gives_a_verdict_for_a_variant_below_half_its_ceiling():
    from common.report import summary_markdown
    doc = {"schema_version": 1, "device": {"name": "test GPU", "type": "cuda"}, "torch": "x", "cuda": None,
           "driver": None, "git_commit": "abc", "created": "now", "pairs": [
               {"chapter": 1, "name": "slow", "bound": "memory", "status": "ok", "baseline":
                {"name": "baseline", "median_ms": 2.0, "speedup": 1.0, "verified": True, "pct_of_ceiling": 10.0},
                "variants": [{"name": "optimized_slow", "median_ms": 1.0, "speedup": 2.0, "verified": True,
                              "pct_of_ceiling": 20.0, "ceiling": "copy_gbps", "kind": "optimized"}]},
               {"chapter": 1, "name": "fast", "bound": "memory", "status": "ok", "baseline":
                {"name": "baseline", "median_ms": 2.0, "speedup": 1.0, "verified": True, "pct_of_ceiling": 40.0},
                "variants": [{"name": "optimized_fast", "median_ms": 1.0, "speedup": 2.0, "verified": True,
                              "pct_of_ceiling": 90.0, "ceiling": "copy_gbps", "kind": "optimized"}]}]}
    text = summary_markdown(doc)
    assert "## Verdicts" in text and "ch1/slow optimized_slow" in text and "optimized_fast (" not in text


def test_a_quick_run_says_its_figures_are_not_the_chapters_results():
    full = summary_markdown(all_pass_run())
    quick = all_pass_run()
    quick["quick"] = True
    md = summary_markdown(quick)
    assert "not the chapters' results" in md and "not the chapters' results" not in full


def test_an_interrupted_run_names_what_did_not_run():
    doc = all_pass_run()
    doc.update(interrupted=True, not_run=["ch1/vectorization"])
    assert "not run: ch1/vectorization" in summary_markdown(doc)


@pytest.mark.parametrize("content", ["[1, 2]", "{not json", '{"pairs": []}'])
def test_redraw_figures_refuses_a_file_that_is_not_a_report_in_one_line(tmp_path, content):
    from conftest import ROOT, run_script
    (tmp_path / "results.json").write_text(content)
    proc = run_script(ROOT / "scripts" / "redraw_figures.py", str(tmp_path / "results.json"), timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not (tmp_path / "speedup.png").exists()


def test_the_header_names_only_the_matmul_precisions_that_were_measured():
    """A CPU measures fp32 and lends that rate to tf32, bf16 and fp16 (so the physics check has a ceiling for
    them): the header prints only what `matmul_how` says was measured; a GPU's measures every one."""
    cpu = {**CPU_CEILINGS, "matmul_how": {"fp32": "A·B, sustained"}}
    head = summary_markdown(document([], ceilings=cpu, device="cpu")).split("\n|")[0]
    assert "matmul fp32 0.0896 TFLOP/s" in head and "tf32" not in head
    gpu = document([], ceilings={**CPU_CEILINGS, "matmul_how": dict.fromkeys(("fp32", "tf32", "bf16", "fp16"), "A·B")})
    gpu["device"]["type"] = "cuda"
    assert "matmul fp32/tf32/bf16/fp16" in summary_markdown(gpu)


def test_a_file_that_is_not_a_results_json_is_said_to_be_one_line_each(tmp_path):
    from common.results import read_results
    cases = {"missing.json": None, "summary.md": "# Results on a device\n",
             "latin1.json": "{\"a\": \"é\"}".encode("latin-1"), "list.json": "[1, 2]"}
    said = {}
    for name, content in cases.items():
        if isinstance(content, bytes):
            (tmp_path / name).write_bytes(content)
        elif content is not None:
            (tmp_path / name).write_text(content)
        said[name] = read_results(tmp_path / name)
    assert said["missing.json"].startswith("cannot read") and "No such file" in said["missing.json"]
    assert said["summary.md"].endswith("is not a results.json: not JSON (Expecting value at line 1)")
    assert said["latin1.json"].endswith("is not a results.json: not UTF-8 text")
    assert said["list.json"].endswith("its top level is a list, not an object")
    assert all("\n" not in s for s in said.values())
