"""ch16/symmetric_memory_inference.py on Gloo: 1, 2 and 8 processes serve a request and match one process.

The processes are forked from this one after torch is imported (no CUDA here), so eight ranks start
in a few seconds instead of paying eight torch imports on a 2-core machine. Each rank runs the same
`main()` a torchrun launch runs; rank 0 compares the served tokens, the target's teacher-forced
logits and the KV cache read back from every rank's pages with a single-process run of the same
model (common/decode_check.py's logits-and-margin rule) and writes its report.
"""
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys

import pytest
import torch

from ch16 import symmetric_memory_inference as smi


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(main, rank: int, world: int, port: int, argv: list[str]) -> None:
    # One torch thread a rank, first. Forked from a pytest process whose earlier test ran torch's CPU thread pool
    # (test_graph_memory, under plain `pytest`; `make test` sets OMP_NUM_THREADS=1), both ranks of the
    # breakdown test never returned. With this line they pass.
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    code = 1
    try:
        code = main(argv)
    finally:
        os._exit(code)


def on_ranks(main, world: int, argv: list[str]) -> list:
    """main(argv) in `world` forked processes, as torchrun would start them; their exit codes."""
    ctx, port = mp.get_context("fork"), _free_port()
    procs = [ctx.Process(target=_rank_main, args=(main, r, world, port, argv)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
    return codes


def serve(world: int, tmp_path, *extra) -> dict:
    out = tmp_path / f"report{world}.json"
    argv = ["--device", "cpu", "--out", str(out), *extra]
    if world == 1:
        assert smi.main(argv) == 0
    else:
        codes = on_ranks(smi.main, world, argv)
        assert codes == [0] * world, f"exit codes {codes}"
    return json.loads(out.read_text())


def _check(report: dict, world: int) -> None:
    assert report["ok"] and report["world_size"] == world
    assert report["decode"]["ok"] and report["kv"]["ok"], report
    assert report["decode"]["token_agreement"] == 1.0          # fp32: no near-ties expected on this prompt
    assert report["tokens"] == report["reference_tokens"]
    assert len(report["tokens"][0]) == report["n_new"] == 12
    assert 0.0 < report["acceptance"] < 1.0 and report["rounds"] < 12  # the draft both helped and was rejected


@pytest.mark.parametrize("world", [2, 8])
def test_server_on_gloo_matches_one_process(world, tmp_path):
    report = serve(world, tmp_path)
    _check(report, world)
    half = world // 2
    assert report["roles"] == ["target"] * half + ["draft"] * half
    assert report["use_symmetric_kv"] is True and report["symmetric"] is False  # Gloo: ordinary tensors


def test_one_rank_serves_both_models_from_one_pool(tmp_path):
    report = serve(1, tmp_path, "--no-symmetric", "--requests", "3")
    _check(report, 1)
    assert report["roles"] == ["target+draft"]
    # three different prompts, each served, timed and checked against its own one-process run
    reqs = report["per_request"]
    assert report["requests"] == len(reqs) == 3 and len({str(r["reference_tokens"]) for r in reqs}) == 3
    assert all(r["decode"]["ok"] and r["tokens"] == r["reference_tokens"] for r in reqs)
    assert report["identical_token_requests"] == 3
    assert report["p99_latency_s"] == max(r["latency_s"] for r in reqs) >= report["p50_latency_s"] > 0


def test_asking_for_cuda_without_a_gpu_is_one_line_and_exit_2():
    import torch
    from conftest import ROOT, run_script
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    proc = run_script(ROOT / "ch16" / "symmetric_memory_inference.py", "--device", "cuda", timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith("error:") and "needs a CUDA GPU; none is visible to PyTorch" in lines[0]


def test_tp_breakdown_on_two_gloo_ranks_parts_the_step_into_compute_and_all_reduces(tmp_path):
    """ch16/tp_decode_breakdown.py --quick on 2 ranks: the step, the step without its all-reduces and the
    all-reduces alone are each timed, and the report is written once, by rank 0 (which of them is faster
    is the GPU run's finding, not a CPU test's)."""
    from ch16 import tp_decode_breakdown as tpb
    out = tmp_path / "breakdown"
    codes = on_ranks(tpb.main, 2, ["--quick", "--device", "cpu", "--budget", "0.1", "--output", str(out)])
    assert codes == [0, 0], f"exit codes {codes}"
    report = json.loads((out / "breakdown.json").read_text())
    rows = report["rows"]
    assert set(rows) == {"step_nccl", "compute_only", "allreduce_nccl"}     # no symmetric memory on Gloo
    assert report["world_size"] == 2 and report["allreduces_per_step"] == 8   # the small model's 4 layers, x2
    step = rows["step_nccl"]
    assert all(r["ms"] > 0 and r["samples"] > 0 for r in rows.values())
    assert {"allreduce_share", "per_allreduce_us"} <= set(step) and "per_allreduce_us" in rows["allreduce_nccl"]
    # the negative control: without its all-reduces the step's answer is wrong, and the check says so
    assert report["control"].startswith("compute_only against step_nccl, which must fail: failed, ")
    assert "| step_nccl |" in (out / "breakdown.md").read_text()


# ch16/tp_decode_breakdown.py under torchrun with measure() failing: on every rank as a step that differs from
# step_nccl does (rank 0 raising 3 s after the other rank), or on rank 1 alone while rank 0 sleeps, as a rank
# waiting in a collective that rank 1 never joins would.
FAILING_BREAKDOWN = """
import os, sys, time
import ch16.tp_decode_breakdown as tpb
rank, where = int(os.environ["RANK"]), sys.argv.pop()

def measure(*args, **kwargs):
    if where == "everywhere":
        time.sleep(3 if rank == 0 else 0)
        raise tpb.StepsDiffer("step_symm differs from step_nccl: relative error 1.0e+00")
    if rank == 1:
        raise MemoryError("rank 1 ran out")
    time.sleep(60)

tpb.measure = measure
sys.exit(tpb.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("where", ["everywhere", "rank 1"])
def test_tp_breakdown_that_fails_says_so_in_one_line_and_writes_no_report(tmp_path, where):
    """An error every rank raises is printed once, by rank 0, though the other rank is done first (while every rank
    exited 1, torchrun stopped rank 0 before it printed); an error of rank 1's own, rank 1 prints. Either way
    torchrun fails at once and no report is written."""
    from conftest import ROOT
    shim, out = tmp_path / "failing.py", tmp_path / "breakdown"
    shim.write_text(FAILING_BREAKDOWN)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(shim), "--quick", "--device", "cpu", "--output", str(out), where],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=100)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    want = ("error: StepsDiffer: step_symm differs from step_nccl" if where == "everywhere"
            else "error: rank 1: MemoryError: rank 1 ran out")
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith(want), proc.stderr[-3000:]
    assert not out.exists()


def test_a_ranks_bytes_are_its_shard_plus_what_every_rank_reads_whole():
    """rank_work against the one-GPU count (ch16.decode.step_work): on one rank the same bytes but the embedding
    row, and over two ranks every sharded weight once and the replicated ones (output head, norms, embedding
    row) twice."""
    import torch

    from ch16 import baseline_tp_decode as tp
    from ch16.decode import step_work
    from ch16.model import CONFIGS, build_model
    from ch16.symmetric_memory_inference import shard_model
    full = build_model(CONFIGS["small"], 0, "cpu", torch.bfloat16)
    cfg, keys = full.cfg, 128
    one = tp.rank_work(full, shard_model(full, 1, 0), 1, keys)
    assert one[1] == step_work(full, 1, keys)[1] + cfg.dim * 2           # + the embedding row, bf16
    two = [tp.rank_work(full, shard_model(full, 2, r), 2, keys) for r in (0, 1)]
    replicated = (full.output.weight.numel() + full.norm.weight.numel() + cfg.dim
                  + sum(layer.attention_norm.weight.numel() + layer.ffn_norm.weight.numel() for layer in full.layers))
    assert two[0] == two[1] and sum(b for _, b in two) == one[1] + replicated * 2


def test_tp_breakdown_in_one_process_is_one_line_and_exit_2(capsys, monkeypatch):
    from ch16 import tp_decode_breakdown as tpb
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert tpb.main(["--quick"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "torchrun --nproc-per-node 2" in err[0]


def test_tp_breakdown_on_cuda_with_too_few_gpus_is_one_line_and_exit_2(capsys, monkeypatch):
    """--device cuda with fewer GPUs than ranks: one line that says what is missing and where the CPU path is."""
    from ch16 import tp_decode_breakdown as tpb
    if torch.cuda.device_count() >= 2:
        pytest.skip("2 GPUs are visible: the run would start")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert tpb.main(["--quick", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: 2 processes need 2 GPUs") and "--device cpu" in err[0], err
