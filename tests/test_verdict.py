"""Verdicts read GPU hardware (tensor cores, SMs, occupancy, L2, HBM): a CPU run gets none of them."""
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from common import verdict as V
from common.report import summary_markdown

GPU_WORDS = ("tensor core", "SM ", "occupancy", "L2", "HBM", "CUDA graph", "GPU")


def result(device_type, pair_device_type=None):
    """A compute-bound pair far below its ceiling, with many small kernels: every GPU rule of the report fires."""
    pair = {"chapter": 1, "name": "tensor_cores", "bound": "compute", "status": "ok",
            "baseline": {"name": "baseline", "median_ms": 2.0, "speedup": 1.0, "verified": True, "pct_of_ceiling": 5.0},
            "variants": [{"name": "optimized_tensor_cores_tf32", "median_ms": 1.0, "speedup": 2.0, "verified": True,
                          "pct_of_ceiling": 12.0, "ceiling": "matmul_tflops.tf32", "kind": "optimized",
                          "kernels_per_call": 400}]}
    if pair_device_type:
        pair["device_type"] = pair_device_type
    return {"schema_version": 1, "device": {"name": "a device", "type": device_type}, "torch": "2", "cuda": None,
            "driver": None, "git_commit": "abc", "created": "now", "pairs": [pair]}


def test_a_gpu_result_below_its_ceiling_gets_the_tensor_core_verdict():
    """The control: the same document as the CPU tests below, on a GPU, does get the verdict."""
    text = V.results_verdicts(result("cuda"))
    assert "tensor cores" in text and "many small kernels" in text
    assert "tensor cores" in summary_markdown(result("cuda"))


def test_a_cpu_result_gets_no_tensor_core_verdict():
    for doc in (result("cpu"), result("cuda", pair_device_type="cpu")):
        assert V.results_verdicts(doc, always=False) == ""
        md = summary_markdown(doc)
        assert "## Verdicts" not in md and "tensor cores" not in md
        neutral = V.results_verdicts(doc)          # the script's output: says why there is none
        assert "CPU" in neutral and "not results" in neutral
        assert not any(word in neutral.split("None.")[1] for word in ("tensor core", "occupancy", "L2", "HBM"))


def test_the_rules_give_a_cpu_only_what_does_not_read_gpu_hardware():
    metrics = {"bound": "compute", "pct_of_ceiling": 12, "sm_throughput_pct": 20, "memory_throughput_pct": 10,
               "achieved_occupancy_pct": 10, "registers_per_thread": 200, "l2_hit_rate_pct": 10,
               "gpu_idle_pct": 50, "kernels_per_step": 600, "mean_kernel_us": 3, "alloc_cpu_pct": 30}
    on_gpu = V.verdict(dict(metrics, device_type="cuda"))
    assert len(on_gpu) >= 5 and on_gpu == V.verdict(metrics)   # no device type: a profiler's GPU metrics
    on_cpu = V.verdict(dict(metrics, device_type="cpu"))
    assert [f.rule for f in on_cpu] == ["allocation on the host"]
    assert V.verdict(metrics, device_type="cpu") == on_cpu           # the argument, as the walkthrough passes it
    assert V.verdict(dict(metrics, device_type="cpu"), device_type="cuda") == on_gpu   # the argument wins
    for f in on_cpu:
        assert not any(word in f.line() for word in GPU_WORDS), f.line()


def test_a_mixed_document_keeps_the_gpu_pairs_verdicts_only():
    doc = result("cuda")
    cpu_pair = copy.deepcopy(doc["pairs"][0])
    cpu_pair.update(name="on_cpu", device_type="cpu")
    doc["pairs"].append(cpu_pair)
    text = V.results_verdicts(doc)
    assert "ch1/tensor_cores" in text and "ch1/on_cpu" not in text


@pytest.mark.parametrize("args, says", [(["nope.json"], "cannot read nope.json"), ([], "usage"),
                                        (["a", "b"], "usage"), (["list.json"], "not a harness report"),
                                        (["broken.json"], "cannot read broken.json"), (["."], "cannot read .")])
def test_the_script_fails_in_one_line(tmp_path, args, says):
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "broken.json").write_text("{")
    script = Path(V.__file__).resolve()
    r = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_the_script_prints_the_verdicts(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(result("cuda")))
    r = subprocess.run([sys.executable, str(Path(V.__file__).resolve()), str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "tensor cores" in r.stdout and not r.stderr
    r = subprocess.run([sys.executable, str(Path(V.__file__).resolve()), "--recommend", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == V.recommendations(result("cuda")) + "\n" and not r.stderr


def ranked_pairs(doc: dict) -> list[str]:
    """The pair keys of recommendations.md's ranking, in its order."""
    text = V.recommendations(doc)
    ranking = text.split("## Furthest from the ceiling")[1].split("## ")[0] if "## Furthest" in text else ""
    return [line.split("**")[1] for line in ranking.splitlines() if line[:1].isdigit()]


def test_recommendations_rank_the_fastest_verified_variant_furthest_from_its_ceiling_first():
    """Three GPU pairs: the one whose best verified variant reaches the smallest share of its ceiling comes first,
    each line quoting that share and the milliseconds a call above the floor it implies; a faster variant that
    failed verification neither counts as the pair's best nor escapes the untrusted list."""
    doc = result("cuda")
    far = copy.deepcopy(doc["pairs"][0])            # best verified variant at 12% (tf32, 1.0 ms)
    near = copy.deepcopy(far)
    near.update(name="near")
    near["variants"][0].update(pct_of_ceiling=92.0, median_ms=0.5)
    wrong = copy.deepcopy(far)
    wrong.update(name="wrong")
    wrong["variants"][0].update(pct_of_ceiling=40.0)
    wrong["variants"].append({"name": "optimized_wrong_fast", "median_ms": 0.1, "verified": False, "kind": "optimized",
                              "pct_of_ceiling": 99.0, "verification": {"message": "relative error 3e-2"}})
    doc["pairs"] = [near, wrong, far]
    assert ranked_pairs(doc) == ["ch1/tensor_cores", "ch1/wrong", "ch1/near"]
    text = V.recommendations(doc)
    assert "optimized_tensor_cores_tf32 at 12.0% of matmul_tflops.tf32 (compute-bound), 1 ms a call, 0.88 ms above" in text
    untrusted = text.split("## Furthest")[0]
    assert "**ch1/wrong** optimized_wrong_fast: FAILED, failed verification: relative error 3e-2" in untrusted
    assert "optimized_wrong_fast at" not in text.split("## Furthest")[1]
    assert "many small kernels" in text        # the profiler's kernel count, where the run has one


def test_recommendations_rank_no_cpu_pair_and_list_pairs_without_a_ceiling_apart():
    """A CPU run's figures are not results: nothing is ranked, and it says why. A GPU pair without a share of a
    ceiling is listed apart with the harness's reason, never ranked."""
    assert ranked_pairs(result("cpu")) == []
    assert "Pairs run on a CPU are not ranked" in V.recommendations(result("cpu"))
    doc = result("cuda")
    v = doc["pairs"][0]["variants"][0]
    v.update(pct_of_ceiling=None, ceiling_note="working set under 4x the cache")
    doc["pairs"][0]["baseline"]["pct_of_ceiling"] = None
    assert ranked_pairs(doc) == []
    assert "no share of a ceiling: working set under 4x the cache" in V.recommendations(doc)


def test_launch_bound_pairs_are_ranked_apart_and_transfer_pairs_get_no_triton_grade():
    """A launch-bound pair's share of its floor is small by nature: it gets its own list, not the head of the
    common one. A transfer-bound pair is told about the link, never graded by Triton's memory/compute bars."""
    doc = result("cuda")
    launch, transfer = copy.deepcopy(doc["pairs"][0]), copy.deepcopy(doc["pairs"][0])
    launch.update(name="graphs", bound="launch")
    launch["variants"][0].update(pct_of_ceiling=0.5, ceiling="roofline_floor_ms", kernels_per_call=None)
    transfer.update(name="copy", bound="transfer")
    transfer["variants"][0].update(pct_of_ceiling=70.0, ceiling="h2d_gbps", kernels_per_call=None)
    doc["pairs"] += [launch, transfer]
    text = V.recommendations(doc)
    assert ranked_pairs(doc) == ["ch1/tensor_cores", "ch1/copy"]
    apart = text.split("## Launch-bound, ranked apart")[1]
    assert "**ch1/graphs**: optimized_tensor_cores_tf32 at 0.5% of roofline_floor_ms" in apart
    copy_item = text.split("**ch1/copy**")[1].split("\n2.")[0].split("##")[0]
    assert "Next: the link" in copy_item and "Triton" not in copy_item


def test_a_skipped_pair_is_not_listed_as_untrusted_and_a_crashed_one_is():
    """A pair skipped on this machine (it needs a GPU) has an error, its reason, and no variants, like a pair
    that crashed before its first variant: only the crash belongs under "Not trusted"."""
    doc = result("cpu")
    skipped = {"chapter": 11, "name": "stream_alloc", "bound": "launch", "status": "skipped",
               "error": "needs CUDA; this run is on CPU", "baseline": None, "variants": []}
    crashed = {**skipped, "name": "kv_prefetch", "status": "failed", "error": "crashed (exit code -9)"}
    doc["pairs"] += [skipped, crashed]
    untrusted = V.recommendations(doc).split("## Not trusted")[1].split("## ")[0]
    assert "ch11/kv_prefetch** did not run to the end: crashed (exit code -9)" in untrusted
    assert "stream_alloc" not in untrusted


def test_recommendations_name_a_cpu_run_by_its_cpu_as_summary_md_does():
    doc = result("cpu")
    doc["host"] = {"cpu": "AMD EPYC 9654 96-Core Processor", "cores": 192}
    assert "From the run on AMD EPYC 9654 96-Core Processor (CPU) at commit" in V.recommendations(doc)
    assert "From the run on a device at commit" in V.recommendations(result("cuda"))
