"""common.launch against a fake worker: a small script that writes result files as common.run does, then
hangs, crashes or finishes. No torch in the worker, so each case takes a fraction of a second (but the
torchrun case, which runs scripts/stop_probe.py's two ranks on the CPU)."""
import _thread
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from common.launch import RunSpec, run_in_subprocess, settle, watch, WorkerRun
from common.results import validate_results
from conftest import ROOT, alive, still_running

FAKE_WORKER = r'''
import json, os, subprocess, sys, time
result, mode, pids = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "slow_start":  # as a slow interpreter start and torch import would be
    time.sleep(2.0)
if mode == "never_starts":
    time.sleep(1e6)
# a child in a session of its own, as torchrun starts each rank: out of reach of a kill of the worker's group
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1e6)"], start_new_session=True)
with open(pids, "w") as f:
    f.write(f"{os.getpid()} {child.pid}")

def write(doc, doing):
    with open(result + ".tmp", "w") as f:
        json.dump({**doc, "in_progress": doing}, f)
    os.replace(result + ".tmp", result)

def entry(name, ms):
    return {"name": name, "file": name + ".py", "median_ms": ms, "speedup": 2.0 / ms, "verified": True,
            "pct_of_ceiling": None, "error": None}

doc = {"chapter": 99, "name": "x", "bound": "memory", "status": "ok", "error": None, "errors": [],
       "baseline": None, "variants": []}
write(doc, {"variant": None, "stage": "starting"})
doc["baseline"] = entry("baseline", 2.0)
doc["variants"].append(entry("optimized_x_a", 1.0))
if mode in ("slow_start", "finishes"):
    doc["variants"] += [entry("optimized_x_b", 1.0), entry("optimized_x_c", 1.0)]
    write(doc, None)
    child.kill()
    sys.exit(0)
write(doc, {"variant": "optimized_x_b", "stage": "verify and time"})
if mode == "crashes":
    print("Fatal Python error: Aborted", flush=True)
    os.abort()
time.sleep(1e6)  # hangs
'''

FILES = {"baseline": Path("baseline_x.py"), "optimized_x_a": Path("optimized_x_a.py"),
         "optimized_x_b": Path("optimized_x_b.py"), "optimized_x_c": Path("optimized_x_c.py")}


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    pids = tmp_path / "pids"

    def run(mode, timeout_s=1.0, startup_s=60.0):
        spec = RunSpec(99, "x", "memory", str(FILES["baseline"]), [str(p) for p in list(FILES.values())[1:]],
                       "cpu", quick=True, budget_s=0.1)
        r = run_in_subprocess(spec, timeout_s=timeout_s, startup_s=startup_s,
                              echo=False, command=lambda result: [sys.executable, str(script), str(result), mode,
                                                                  str(pids)])
        return r, [int(p) for p in pids.read_text().split()] if pids.exists() else []
    return run


def doc_of(pair: dict) -> dict:
    return {"schema_version": 1, "device": {"name": "cpu"}, "torch": "x", "cuda": None, "driver": None,
            "git_commit": "x", "created": "x", "pairs": [pair]}


def test_a_hanging_variant_is_named_and_its_neighbours_are_kept(fake):
    r, pids = fake("hangs", timeout_s=1.0)
    assert r["status"] == "failed"
    assert r["error"] == "timed out after 1 s in optimized_x_b (verify and time)"
    assert r["hung_variant"] == "optimized_x_b" and r["error"] in r["errors"]
    assert r["baseline"]["median_ms"] == 2.0
    a, b, c = r["variants"]
    assert (a["name"], a["verified"], a["median_ms"]) == ("optimized_x_a", True, 1.0)
    assert b["name"] == "optimized_x_b" and b["error"] == r["error"] and b["verified"] is False
    assert b["speedup"] is None and b["median_ms"] is None and b["pct_of_ceiling"] is None
    assert c["name"] == "optimized_x_c" and c["skipped"] == "not run: optimized_x_b timed out"
    assert "in_progress" not in r
    assert validate_results(doc_of(r)) == []
    assert pids and not still_running(pids), "the worker or its child outlived the timeout"


def test_the_timeout_starts_when_the_worker_has_loaded_the_pair(fake):
    # 2 s before its first result file (interpreter, imports), then done at once: a 1.5 s timeout is enough.
    r, _ = fake("slow_start", timeout_s=1.5)
    assert r["status"] == "ok", r.get("error")
    assert r["startup_s"] >= 2.0 and len(r["variants"]) == 3


def test_a_worker_that_never_writes_a_result_did_not_start(fake):
    t0 = time.monotonic()
    r, _ = fake("never_starts", timeout_s=600, startup_s=1.0)
    assert time.monotonic() - t0 < 30
    assert r["status"] == "failed" and r["error"].startswith("did not start: no result file after 1 s")


def test_a_crash_keeps_what_finished(fake):
    r, pids = fake("crashes", timeout_s=60)
    assert r["status"] == "failed"
    assert r["error"].startswith("crashed (exit code -6) in optimized_x_b (verify and time)"), r["error"]
    assert "hung_variant" not in r
    assert [v["name"] for v in r["variants"]] == ["optimized_x_a", "optimized_x_b", "optimized_x_c"]
    assert r["variants"][0]["median_ms"] == 1.0 and r["variants"][2]["skipped"] == "not run: optimized_x_b crashed"
    assert validate_results(doc_of(r)) == []


def test_an_interrupt_stops_the_worker_and_its_children(fake, tmp_path):
    timer = threading.Timer(1.5, _thread.interrupt_main)  # a Ctrl-C in the parent while the worker hangs
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fake("hangs", timeout_s=600)
    finally:
        timer.cancel()
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert pids and not still_running(pids)


@pytest.mark.parametrize("stop, survivors", [("common.launch._stop", 0), ("killpg only (before)", 2)])
def test_a_timeout_stops_every_rank_that_torchrun_started(stop, survivors):
    """torchrun starts each rank in a session of its own: killing torchrun's process group alone (the stop before,
    scripts/stop_probe.py's negative control) leaves both ranks running, holding their GPUs while the next pairs are
    timed; the harness's stop leaves none. The probe the H100 ran (profiles/h100/stop-6c46061), on the CPU."""
    probe = subprocess.run([sys.executable, str(ROOT / "scripts" / "stop_probe.py"), "--device", "cpu"]
                           + (["--killpg-only"] if survivors else []), capture_output=True, text=True, timeout=300)
    said = json.loads(probe.stdout.splitlines()[-1])
    assert (said["stop"], said["stopped"], len(said["ranks"])) == (stop, "timeout", 2), probe.stderr[-2000:]
    assert len(said["ranks_alive_after_stop"]) == survivors and probe.returncode == (1 if survivors else 0)


def test_a_finished_result_is_returned_as_written():
    done = {"chapter": 1, "name": "x", "bound": "memory", "status": "ok", "error": None, "baseline": None,
            "variants": [], "in_progress": None}
    run = WorkerRun(rc=0, stopped=None, timeout_s=5, startup_limit_s=60, elapsed_s=1, startup_s=0.5, tail=[],
                    result=done)
    assert settle(run, chapter=1, name="x", bound="memory", files={"baseline": Path("b.py")}) is done
    # the same file, but the process then hung while exiting: the results are complete and kept
    run.stopped = "timeout"
    r = settle(run, chapter=1, name="x", bound="memory", files={"baseline": Path("b.py")})
    assert r["status"] == "failed" and r["error"] == "timed out after 5 s after its last variant, while exiting"


def test_watch_reports_the_exit_status_and_the_last_lines(tmp_path):
    run = watch([sys.executable, "-c", "print('one'); print('two'); raise SystemExit(3)"], tmp_path / "none.json",
                timeout_s=30, echo=False)
    assert run.rc == 3 and run.tail[-2:] == ["one", "two"] and run.result is None and run.stopped is None


def _torchrun_tail(rank, exitcode):
    """The end of what torchrun prints when a worker fails (its "Root Cause" block)."""
    return ["[rank0]: RuntimeError: Read error [127.0.0.1]:7875: Connection reset by peer",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
            "============================================================",
            "common.run FAILED", "------------------------------------------------------------",
            "Failures:", "  <NO_OTHER_FAILURES>", "------------------------------------------------------------",
            "Root Cause (first observed failure):", "[0]:", "  time      : 2026-11-23_10:00:00", "  host      : h",
            f"  rank      : {rank} (local_rank: {rank})", f"  exitcode  : {exitcode} (pid: 1234)"]


ECHO = "baseline failed (verify): RuntimeError: Connection reset by peer"


def _rank0_finished(tail) -> WorkerRun:
    """torchrun exited 1 after rank 0 wrote a finished result: its baseline failed on a reset connection."""
    finished = {"chapter": 82, "name": "x", "bound": "link", "status": "failed", "error": ECHO, "errors": [ECHO],
                "baseline": {"name": "baseline", "error": ECHO}, "variants": [], "in_progress": None}
    return WorkerRun(rc=1, stopped=None, timeout_s=60, startup_limit_s=60, elapsed_s=3, startup_s=1, tail=tail,
                     result=finished)


def test_a_rank_that_died_first_outranks_rank_0s_finished_result():
    """Rank 0 can finish its pair (the baseline failed on a reset connection) before torchrun notices that
    rank 1 died: the report must name the death, not its echo."""
    run = _rank0_finished(_torchrun_tail(1, 7))
    r = settle(run, chapter=82, name="x", bound="link", files={"baseline": Path("b.py")})
    assert r["status"] == "failed" and r["error"].startswith("crashed (exit code 1): rank 1 failed first (exit code 7)")
    assert r["baseline"]["error"] == ECHO  # rank 0's own account is kept beside it
    # rank 0 itself ending a failed pair (exit code 1) is not a crash: its result is the report
    run.tail = _torchrun_tail(0, 1)
    assert settle(run, chapter=82, name="x", bound="link", files={"baseline": Path("b.py")}) is run.result


def test_a_death_is_named_even_when_torchrun_blames_rank_0():
    """torchrun's root cause is the failure with the smallest timestamp in whole seconds: when rank 0 ends
    (exit code 1) in the second rank 1 died, it can be listed first. The death is still the one named."""
    tail = _torchrun_tail(0, 1)
    tail[tail.index("Failures:") + 1:tail.index("Failures:") + 2] = [
        "[1]:", "  time      : 2026-11-23_10:00:00", "  rank      : 1 (local_rank: 1)", "  exitcode  : 7 (pid: 1235)"]
    r = settle(_rank0_finished(tail), chapter=82, name="x", bound="link", files={"baseline": Path("b.py")})
    assert "rank 1 failed first (exit code 7)" in r["error"], r["error"]


def test_a_spare_worker_runs_the_pair_it_is_handed_and_one_that_does_not_fit_is_ended():
    """benchmark.py starts the next pair's worker ahead (common.launch.Spare): it imports torch, then waits.
    Handed the pair, that process runs it; one started with another environment is ended, not leaked, and
    the pair runs in a new process as before."""
    from common.launch import Spare, worker_env
    from conftest import FIXTURES

    class Counted(Spare):
        handed = 0

        def go(self, cmd):
            Counted.handed += 1
            return super().go(cmd)

    base, opts = FIXTURES / "ch84" / "baseline_aa.py", [FIXTURES / "ch84" / "optimized_aa_1.py"]
    chapters = base.parent.parent
    for env, handed in ((worker_env("cpu", chapters), 1), (dict(worker_env("cpu", chapters), ANOTHER_SETTING="1"), 0)):
        Counted.handed, stages = 0, []
        spare = Counted(env)
        spec = RunSpec(84, "aa", "memory", str(base), [str(p) for p in opts], "cpu", quick=True, budget_s=0.1)
        r = run_in_subprocess(spec, timeout_s=300, echo=False, spare=spare, on_stage=stages.append)
        assert Counted.handed == handed
        assert spare.proc.wait(timeout=10) is not None and not alive(spare.proc.pid)
        assert r["status"] == "ok" and r["baseline"]["verified"] and r["variants"][0]["verified"], r.get("error")
        assert stages[0] == "started" and stages[-1] == "exited"


def test_the_worker_rates_against_the_ceilings_in_its_spec_and_reads_no_cache(tmp_path, monkeypatch):
    """The parent decides, the worker measures: the ceilings travel in the RunSpec. With no cache anywhere
    (PERF_PEAKS_DIR empty) and a matmul rate in the spec 1e9 times too low, the launch-bound pair's roofline
    floor is the spec's: far above its time, so no share is printed and the note says what was measured."""
    monkeypatch.setenv("PERF_PEAKS_DIR", str(tmp_path / "no-cache-here"))
    base = ROOT / "ch1" / "baseline_batched_gemm.py"
    peaks = {"device": "spec's ceilings", "device_type": "cpu", "copy_gbps": 50.0, "matmul_tflops": {"fp32": 1e-9}}
    spec = RunSpec(1, "batched_gemm", "launch", str(base), [str(ROOT / "ch1" / "optimized_batched_gemm.py")], "cpu",
                   peaks=peaks, quick=True, budget_s=0.1)
    r = run_in_subprocess(spec, timeout_s=300, echo=False)
    assert r["status"] == "ok", r.get("error")
    assert not (tmp_path / "no-cache-here").exists()
    for v in [r["baseline"], *r["variants"]]:
        assert v["pct_of_ceiling"] is None and v["ceiling"] == "roofline_floor_ms", v
        assert "% of roofline_floor_ms: above the ceiling" in v["ceiling_note"], v["ceiling_note"]


def test_the_worker_takes_one_spec_file_and_says_so_otherwise():
    import subprocess
    proc = subprocess.run([sys.executable, "-m", "common.run", "--chapter", "1"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == ("internal: python -m common.run SPEC.json (benchmark.py writes "
                                                    "SPEC; see common.launch.RunSpec)")


@pytest.mark.parametrize("users", [None, "0", "1"])
def test_a_cuda_worker_tears_cupti_down_after_a_profile_unless_the_user_chose(monkeypatch, users):
    """Kineto leaves CUPTI attached after a profile, slowing every call timed after it in the process (on an H100
    a graph replay 3%, eager launches 1.4x: profiles/h100/cupti-8e0b8a1). A CUDA run's worker gets
    TEARDOWN_CUPTI=1. A CPU run's does not: Kineto finishes the teardown in the process's next CUDA call, and a
    CPU run on a machine with a GPU, making none, did not exit (profiles/h100/cupti-cpu-fbde333). A user who set it
    keeps theirs, either way."""
    from common.launch import worker_env
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    if users is not None:
        monkeypatch.setenv("TEARDOWN_CUPTI", users)
    assert worker_env("cuda").get("TEARDOWN_CUPTI") == (users or "1")
    assert worker_env("cpu").get("TEARDOWN_CUPTI") == users
