"""Chapter 4's pairs on Gloo: two processes, every baseline against its single-process reference,
every CPU variant verified by the harness; the symmetric-memory variants are skipped (CUDA only).

The two-process part starts torchrun once on this file (run as a script it is the driver: every
chapter-4 pair through common.run.run_pair in one process group), rather than once per pair. The
driver also checks that destroy_process_group() really ends the group: a group still referenced
somewhere keeps its Gloo worker threads past the interpreter's finalization, where one that drops a
finished collective's tensors aborts the rank ("terminate called without an active exception"), in
about one run of six; counting the threads catches it every time.
"""
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CUDA_ONLY = {"optimized_small_allreduce_symm_mem", "optimized_small_allreduce_nvshmem",
             "optimized_large_allreduce_symm_mem", "optimized_pipeline_handoff_symm_mem",
             "optimized_fsdp_prefetch_copy_engine"}


# ---------------------------------------------------------------- single process: the references
def test_bucket_plan_covers_every_gradient_once_from_the_last():
    from ch4.baseline_grad_bucketing import make_inputs
    from ch4.dist_common import bucket_cap, bucket_views, plan_buckets
    grads = list(make_inputs(1, 0, "cpu", quick=True).values())
    plan = plan_buckets(grads, bucket_cap(grads))
    flat_order = [i for b in plan for i in b]
    assert sorted(flat_order) == list(range(len(grads))) and flat_order[0] == len(grads) - 1
    assert len(plan) >= 4
    cap = bucket_cap(grads)
    for b in plan:  # a bucket goes over the cap only when one tensor alone does
        size = sum(grads[i].numel() * 4 for i in b)
        assert size <= cap or len(b) == 1
    flats, views = bucket_views(grads, plan)
    torch._foreach_copy_(views, grads)
    assert all(torch.equal(v, g) for v, g in zip(views, grads))
    assert sum(f.numel() for f in flats) == sum(g.numel() for g in grads)


def test_allreduce_references_are_the_sum_of_every_ranks_input():
    from ch4 import baseline_grad_bucketing as gb, baseline_large_allreduce as la, baseline_small_allreduce as sa
    xs = [sa.make_inputs(5, r, "cpu", False)["x"] for r in range(2)]
    assert torch.equal(sa.reference(5, 1, 2), (xs[0].float() + xs[1].float()).to(torch.bfloat16))
    assert not torch.equal(xs[0], xs[1])   # ranks draw different inputs
    assert la.reference(5, 0, 2, quick=True).numel() * 2 == la.QUICK_MESSAGE_BYTES
    g = [gb.make_inputs(5, r, "cpu", True) for r in range(2)]
    ref = gb.reference(5, 0, 2, quick=True)
    assert len(ref) == len(g[0]) >= 190
    assert torch.equal(ref[3], list(g[0].values())[3] + list(g[1].values())[3])


def test_sharded_and_pipeline_references_follow_the_unsharded_model():
    from ch4 import baseline_fsdp_prefetch as fs, baseline_grad_overlap as go, baseline_pipeline_handoff as pp
    # the shards of every rank put together are the full weights
    shards = [fs.make_inputs(3, r, 2, "cpu", True)["shards"] for r in range(2)]
    assert torch.equal(torch.cat(shards, dim=1), fs.full_weights(3, True))
    # sharding does not change the answer: one rank holding everything gets the same output
    assert torch.equal(fs.reference(3, 0, 2, True), fs.reference(3, 0, 1, True))
    # the summed gradient is the sum of each rank's gradient
    one = [go.reference(3, 0, 1, True)]  # rank 0's alone
    both = go.reference(3, 0, 2, True)
    assert len(both) == len(one[0]) == 8 and not torch.allclose(both[0], one[0][0])
    # stage 1's output is stage 0's output through stage 1
    acts, loss = pp.reference(3, 0, 2, True), pp.reference(3, 1, 2, True)
    s1 = pp.make_inputs(3, 1, "cpu", True)
    assert torch.allclose(loss, pp.row_loss(pp.stage(acts.float(), s1["w"].float()).to(pp.DTYPE), s1["target"]))


# ---------------------------------------------------------------- two processes: the harness on Gloo
def test_every_ch4_pair_verifies_on_gloo_with_two_processes(tmp_path):
    out = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(Path(__file__)), str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    # a rank's own complaint first: torchrun's report after it would push it out of the tail
    said = "".join(line + "\n" for line in proc.stderr.splitlines() if "destroy_process_group() left" in line)
    assert proc.returncode == 0 and out.exists(), said + proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    names = {p["name"] for p in doc["pairs"]}
    assert names >= {"grad_bucketing", "grad_overlap", "small_allreduce", "small_allreduce_nvshmem",
                     "large_allreduce", "pipeline_handoff", "fsdp_prefetch"}, names
    for p in doc["pairs"]:
        assert p["world_size"] == 2 and p["backend"] == "gloo", p
        assert p["status"] == "ok", (p["name"], p["error"])
        assert p["baseline"]["verified"], (p["name"], p["baseline"])
        # our own check, beside the harness's: each rank's baseline output equals reference()
        assert p["reference_check"] == ["ok", "ok"], (p["name"], p["reference_check"])
        for v in p["variants"]:
            if v["name"] in CUDA_ONLY:
                assert "CUDA" in v.get("skipped", ""), (p["name"], v)
            else:
                assert v["verified"] and v["error"] is None, (p["name"], v["name"], v["error"])
    overlap = {p["name"]: p for p in doc["pairs"]}
    assert overlap["fsdp_prefetch"]["stages"]["chunks"] == 4
    assert overlap["pipeline_handoff"]["stages"]["chunks"] == 4


# Threads that live as long as the process by design, wherever a GPU is visible: the CUDA driver's (named
# cuda<hex digits>, started by the first CUDA query) and the autograd engine's per-device workers (pt_autograd_<n>,
# started by the first backward). On an H100 these two were all a rank had left besides its main thread.
LIFELONG = ("cuda", "pt_autograd_")


def _threads() -> list[str] | None:
    """The names of this process's threads (Linux), or None where /proc cannot tell. A thread that ends while
    they are read, and the lifelong ones above, are left out."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    names = []
    for t in tids:
        try:
            names.append(Path(f"/proc/self/task/{t}/comm").read_text().strip())
        except OSError:
            pass
    return [n for n in names if not n.startswith(LIFELONG)]


def _driver(out: str) -> int:
    """Under torchrun: every chapter-4 pair through the harness's run_pair, in one Gloo group."""
    import torch.distributed as dist

    from common.discover import load_pair, select
    from common.inputs import SEEDS
    from common.run import run_pair
    from common.verify import DTYPE_PRECISION, as_tensors, snapshot, verify_outputs

    import common.overlap
    import common.timing
    # What this test checks is verification; CPU timings mean nothing (and the machine is shared).
    # Shorter warm-ups and stage timings keep the whole chapter within a few seconds a pair.
    common.timing.WARMUP_MIN_S, common.timing.MIN_SAMPLES = 0.02, 3
    timed = common.overlap.time_call
    common.overlap.time_call = lambda fn, device, **kw: timed(fn, device, **{**kw, "budget_s": 0.02})

    threads_before = _threads()
    dist.init_process_group("gloo")
    results = []
    for chapter, name, base, opts in select(chapters=[4], root=ROOT):
        pair = load_pair(chapter, name, base, opts)
        t0 = time.perf_counter()
        result = run_pair(pair, torch.device("cpu"), quick=True, budget_s=0.05)
        result["elapsed_s"] = round(time.perf_counter() - t0, 2)
        mod = pair.baseline.module
        w = mod.workload(SEEDS[0], "cpu", quick=True)
        got = snapshot(mod.prepare(w)())
        want = as_tensors(mod.reference(SEEDS[0], dist.get_rank(), dist.get_world_size(), quick=True))
        verdict = verify_outputs(want, got, w.precision or DTYPE_PRECISION.get(got[0].dtype, "fp32"))
        checks = [None, None]
        dist.all_gather_object(checks, "ok" if verdict.ok else verdict.message)
        result["reference_check"] = checks
        results.append(result)
    if dist.get_rank() == 0:
        Path(out).write_text(json.dumps({"pairs": results}, default=str))
    dist.destroy_process_group()
    after = _threads()
    left = None if None in (threads_before, after) else list((Counter(after) - Counter(threads_before)).elements())
    if left:
        print(f"rank {dist.get_rank() if dist.is_initialized() else os.environ.get('RANK')}: "
              f"destroy_process_group() left {len(left)} thread(s) running ({', '.join(left)}). If they are Gloo's, "
              f"the group is still referenced, and its workers outlive the interpreter and can abort the rank at "
              f"exit (known cause: importing torch._dynamo while the group exists, e.g. through "
              f"torch.use_deterministic_algorithms in common/numerics.apply_flags)", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_driver(sys.argv[1]))
