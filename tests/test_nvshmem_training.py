"""ch4/nvshmem_training_example.py on Gloo with two processes, checked against our own single-process
reference: one process trains the same MLP on the whole global batch (every rank's rows in one
tensor), with plain autograd and SGD, and applies both pipeline stages to every micro-batch."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import run_script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def global_batch_training(seed, cfg, world, steps):
    """The reference, written differently from the example's: the batches concatenated, one loss."""
    from ch4.nvshmem_training_example import batch, init_params
    params = [p.clone().requires_grad_(True) for p in init_params(seed, cfg)]
    for step in range(steps):
        xs, ys = zip(*(batch(seed, step, r, cfg) for r in range(world)))
        h = torch.cat(xs)
        for w, b in zip(params[0::2], params[1::2]):
            h = torch.tanh(h @ w.T + b)
        # the mean over ranks of (sum of squares / rows per rank) = sum of squares / all rows x world / world
        loss = ((h - torch.cat(ys)) ** 2).sum() / cfg["rows"] / world
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= cfg["lr"] * p.grad
                p.grad = None
    return [p.detach() for p in params]


def close(a, b, tol):
    num = sum(float((x.double() - y.double()).norm() ** 2) for x, y in zip(a, b)) ** 0.5
    return num / sum(float(y.double().norm() ** 2) for y in b) ** 0.5 <= tol


def run_example(tmp_path, name, *extra, late_rank0=False, script=ROOT / "ch4" / "nvshmem_training_example.py"):
    """Start `script` (the example) under torchrun (two Gloo processes), rank 0 started 3 s late if `late_rank0`;
    returns (process, log path, saved path, json path)."""
    saved, measured = tmp_path / f"{name}.pt", tmp_path / f"{name}.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")  # the Gloo path, even on a GPU machine
    log = tmp_path / f"{name}.log"
    late = [str(ROOT / "tests" / "fixtures" / "late_rank0.py")] if late_rank0 else []
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *late,
                             str(script), "--quick", "--steps", "3",
                             "--shard-size", "2", "1", "--save", str(saved), "--json", str(measured), *extra],
                            cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True)
    return proc, log, saved, measured


def test_training_example_on_gloo_matches_one_process(tmp_path):
    # Gloo collectives, and (at the same time) the symmetric-memory code with peers emulated over Gloo.
    runs = {name: run_example(tmp_path, name, *extra) for name, extra in (("gloo", ()), ("emulated", ("--emulate-symm",)))}
    try:
        for proc, *_ in runs.values():
            proc.wait(timeout=180)
    finally:
        for proc, *_ in runs.values():
            if proc.poll() is None:
                proc.kill()
    for name, (proc, log, saved, measured) in runs.items():
        text = log.read_text()
        assert proc.returncode == 0, (name, text[-4000:])
        assert "\nPASS\n" in text, text[-4000:]
        check_saved(torch.load(saved), json.loads(measured.read_text()), name)


def check_saved(out, report, name):
    from ch4 import baseline_pipeline_handoff as pipe
    from ch4.nvshmem_training_example import config, init_params
    cfg = config(quick=True)
    want = global_batch_training(0, cfg, world=2, steps=3)
    start = init_params(0, cfg)
    assert not close(start, want, 1e-3)       # the steps moved the weights: the comparison has teeth
    # every part ran and its numbers are the reference's (nothing returned early)
    assert report["world_size"] == 2 and report["data_parallel"]["buckets"] >= 2
    kind = "symm_mem emulated on gloo" if name == "emulated" else "gloo"
    assert report["data_parallel"]["comm"] == kind and report["hybrid_sharded"]["2"]["intra"] == kind
    assert close(out["data_parallel"], want, 1e-5)
    assert set(out["hybrid_sharded"]) == {1, 2}
    for shard_size, params in out["hybrid_sharded"].items():
        assert close(params, want, 1e-5), shard_size
        r = report["hybrid_sharded"][str(shard_size)]
        assert r["verified"] and r["replicas"] == 2 // shard_size and len(r["step_ms"]) == 3
    # the pipeline: stage 0 returns its activations, stage 1 each row's loss, for both hand-offs
    assert len(out["pipeline"]) == 2
    s0, s1 = pipe.make_inputs(0, 0, "cpu", True), pipe.make_inputs(0, 1, "cpu", True)
    acts = torch.tanh(s0["x"].float() @ s0["w"].float())
    losses = ((torch.tanh(acts.to(torch.bfloat16).float() @ s1["w"].float()) - s1["target"].float()) ** 2).mean(-1)
    for name, (rank0, rank1) in out["pipeline"].items():
        assert close([rank0.float()], [acts], 2e-2), name
        assert close([rank1.float()], [losses], 2e-2), name


@pytest.mark.parametrize("late_rank0", [False, True], ids=["as started", "rank 0 late"])
def test_a_shard_size_that_does_not_divide_the_world_stops_before_any_part(tmp_path, late_rank0):
    # rank 0 late: the other rank is done first, and rank 0 must still be let to say why (an H200 run lost the line)
    proc, log, saved, measured = run_example(tmp_path, "bad", "--shard-size", "3", late_rank0=late_rank0)
    assert proc.wait(timeout=300) != 0
    text = log.read_text()
    assert text.count("error: --shard-size 3 does not divide the world size 2") == 1, text   # rank 0 only
    assert "1. data parallel" not in text and not measured.exists(), text             # nothing ran


def test_a_failed_check_is_reported_whole_when_the_other_rank_finishes_first(tmp_path):
    # every check fails and rank 0 saves 3 s late (tests/fixtures/training_fails.py): while every rank returned 1,
    # the other rank's exit had torchrun stop rank 0 before it wrote --save and --json
    fixture = ROOT / "tests" / "fixtures" / "training_fails.py"
    proc, log, saved, measured = run_example(tmp_path, "fails", script=fixture)
    assert proc.wait(timeout=300) != 0
    text = log.read_text()
    assert "\nFAIL\n" in text and "\nPASS\n" not in text, text[-4000:]
    report = json.loads(measured.read_text())
    assert report["verified"] is False and all(not r["verified"] for r in report["pipeline"].values()), report
    assert set(torch.load(saved)["pipeline"]) == set(report["pipeline"])


def test_started_without_torchrun_it_says_how_in_one_line():
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    proc = run_script(ROOT / "ch4" / "nvshmem_training_example.py", timeout=120, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and proc.stdout == "" and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("error: ") and "torchrun --nproc_per_node=2" in lines[0]
