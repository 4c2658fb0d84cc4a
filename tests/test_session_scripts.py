"""The GPU session scripts under stand-ins for python3, make and ncu that exit with the status they are told to.
Those built on scripts/steps.sh (every h100_*.sh but h100_compare.sh): every step runs, a failed step fails the
script and is named, and a step that must exit non-zero (a fixture that holds a fault, a refused --pair) fails the
script when it does not; the scripts that archive their logs hold every step's log; h100_issue21.sh refuses an
unknown step, and the scripts with parts an unknown part, before any runs. The 2-GPU h200x2_ch16.sh, with step
functions of its own: the exit status follows the steps'. No GPU: the stand-ins stand for what each step would run
there."""
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import ROOT, stand_ins

# what the stand-in python3 exits with: a fixture run holding faults (chapter 92), a two-process pair asked for on
# one GPU, and anything else
FAKE_PYTHON = """echo "fake python3 $*"
case "$*" in
  *"--chapter 92"*) exit ${FAKE_FIXTURE_RC:-1};;
  *"--pair ch91/allreduce"*) exit ${FAKE_SKIP_PAIR_RC:-2};;
esac
exit ${FAKE_PYTHON_RC:-0}
"""

SCRIPTS = {   # script: (the steps it logs, [(stand-ins' exit statuses, the script's exit status, failed steps)])
    "h100_ch11.sh": ({"probe_concurrency", "benchmark_ch11", "make_run", "escaped", "escaped_caught", "pytest_gpu"},
                     [({}, 0, ""),
                      ({"FAKE_PYTHON_RC": "1"}, 1, "probe_concurrency benchmark_ch11 escaped_caught pytest_gpu"),
                      ({"FAKE_MAKE_RC": "2"}, 1, "make_run"), ({"FAKE_FIXTURE_RC": "0"}, 1, "escaped")]),
    "h100_ch1.sh": ({"benchmark_ch1", "performance_basics", "performance_basics_optimized", "roofline_analysis",
                     "make_run", "ncu_launch_bounds"},
                    [({}, 0, ""), ({"FAKE_MAKE_RC": "2"}, 1, "make_run"),
                     ({"FAKE_NCU_RC": "1"}, 1, "ncu_launch_bounds")]),
    "h100_trust.sh": ({"escape_rounds", "fixtures", "fixtures_caught", "skip_chapter", "skip_pair"},
                      [({}, 0, ""), ({"FAKE_FIXTURE_RC": "0"}, 1, "fixtures"),
                       ({"FAKE_SKIP_PAIR_RC": "0"}, 1, "skip_pair"),
                       ({"FAKE_PYTHON_RC": "1"}, 1, "escape_rounds fixtures_caught skip_chapter")]),
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_session_script_runs_every_step_and_fails_when_one_does(script, tmp_path):
    tools = {"python3": FAKE_PYTHON, "make": 'echo "fake make $*"\nexit ${FAKE_MAKE_RC:-0}\n',
             "ncu": 'echo "fake ncu $*"\nexit ${FAKE_NCU_RC:-0}\n'}
    env = {**os.environ, "PATH": stand_ins(tmp_path, tools)}
    steps, cases = SCRIPTS[script]
    for i, (given, expected, failed) in enumerate(cases):
        out = tmp_path / f"out{i}"
        proc = subprocess.run(["bash", str(ROOT / "scripts" / script), str(out)], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, env={**env, **given})
        assert proc.returncode == expected, (given, proc.stdout[-2000:], proc.stderr[-2000:])
        assert set(p.stem for p in (out / "logs").glob("*.log")) == steps, given
        named = [line for line in proc.stderr.splitlines() if line.startswith("failed:")]
        assert named == ([f"failed: {failed}"] if failed else []), (given, proc.stderr[-2000:])


# a stand-in for python3, make and ncu that exits with FAKE_RC and, given --output DIR, leaves a report there
FAKE_TOOL = """echo "fake $(basename "$0") $*"
prev=
for a in "$@"; do [ "$prev" = --output ] && mkdir -p "$a" && echo '{}' > "$a/results.json"; prev=$a; done
exit ${FAKE_RC:-0}
"""

ARCHIVED = {   # script and parts: the steps it logs into its archive (OUTDIR/<archive>.tar.gz)[, and the verdicts
    # files common/verdict.py writes there]
    ("h100_ch16.sh", "all"): ("ch16_all", {"benchmark_ch16_decode", "decode_profile", "benchmark_ch16_serving",
                                           "paged_probe", "kv_cache_sweep", "kv_cache_sweep_b4", "speculative_sweep",
                                           "batching_sweep", "server_1gpu_small", "server_1gpu_1b",
                                           "pytest_ch16_gpu"}),
    # the kernels part and the CUDA samples run binaries built for a GPU: no stand-in for those
    ("h100_ch13.sh", "walkthrough pairs triton compile"): (
        "ch13_walkthrough-pairs-triton-compile",
        {"walkthrough_block", "walkthrough_block_compiled", "walkthrough_decode", "benchmark_ch13_pairs",
         "verdicts_pairs", "alignment_sweep", "fp8_mlp_probe", "benchmark_ch13_triton", "verdicts_triton",
         "autotune_sweep", "persistent_sweep", "benchmark_ch13_ncu", "benchmark_ch13_compile", "verdicts_compile",
         "graph_memory", "pytest_ch13_gpu"},
        {"ch13_pairs/verdicts.md", "ch13_triton/verdicts.md", "ch13_compile/verdicts.md"}),
    ("h100_topics.sh", "pairs zero_copy sweeps"): (
        "topics_pairs-zero_copy-sweeps", {"pairs", "image_kernels", "zero_copy_sweep", "zero_copy_probe",
                                          "grad_accumulation_sweep", "transpose_sweep", "wave_sweep"}),
    ("h100_cupti.sh", "all"): ("cupti_all", {"probe", "plain0", "profile1", "plain1", "profile2"}),
}


@pytest.mark.parametrize("script,parts", sorted(ARCHIVED))
def test_an_archiving_session_script_runs_every_step_and_names_the_failed_ones(script, parts, tmp_path):
    """The scripts that bring their logs back in one archive, built on scripts/steps.sh: with every tool
    succeeding they exit 0; with every tool failing, every step still runs, is named as failed, and the script
    exits 1. Either way the archive holds each step's log."""
    archive, steps, *verdicts = ARCHIVED[(script, parts)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    env["PATH"] = stand_ins(tmp_path, {tool: FAKE_TOOL for tool in ("python3", "make", "ncu")})
    for rc in (0, 1):
        out = tmp_path / f"out{rc}"
        proc = subprocess.run(["bash", str(ROOT / "scripts" / script), str(out), parts], cwd=ROOT,
                              capture_output=True, text=True, timeout=120, env={**env, "FAKE_RC": str(rc)})
        assert proc.returncode == rc, (rc, proc.stdout[-2000:], proc.stderr[-2000:])
        with tarfile.open(out / f"{archive}.tar.gz") as tar:
            logged = {Path(n).stem for n in tar.getnames() if n.startswith("./logs/") and n.endswith(".log")}
            for name in (verdicts[0] if verdicts else ()):   # beside its report: what verdict.py printed
                assert "fake python3 common/verdict.py" in tar.extractfile(f"./{name}").read().decode(), name
        assert steps <= logged, (rc, steps - logged)
        named = [sorted(line.removeprefix("failed:").split()) for line in (proc.stdout + proc.stderr).splitlines()
                 if line.startswith("failed:")]
        assert named == ([] if rc == 0 else [sorted(steps)]), (rc, named)   # each failed step once, in any order


@pytest.mark.parametrize("script,first", [("h100_ch13.sh", "walkthrough"), ("h100_ch16.sh", "probe"),
                                          ("h100_topics.sh", "pairs")])
def test_a_script_with_parts_refuses_an_unknown_part_before_any_runs(script, first, tmp_path):
    """A misspelt part among good ones: one line naming it, exit 2, and no OUTDIR (no step ran, the good part
    first included)."""
    env = {**os.environ, "PATH": stand_ins(tmp_path, {tool: FAKE_TOOL for tool in ("python3", "make", "ncu")})}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / script), str(tmp_path / "out"), f"{first} sweep"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and not (tmp_path / "out").exists(), (proc.stdout, proc.stderr)
    assert len(proc.stderr.splitlines()) == 1 and "unknown part sweep" in proc.stderr, proc.stderr
    assert "fake" not in proc.stdout + proc.stderr


def test_the_issue21_script_refuses_an_unknown_step_and_fails_with_a_failed_step(tmp_path):
    env = {**os.environ, "PATH": stand_ins(tmp_path, {"python3": FAKE_TOOL})}
    script = str(ROOT / "scripts/h100_issue21.sh")
    steps = ["imports", "peaks", "ceiling", "aa", "ch1", "prealloc", "goodput", "validate"]
    refused = subprocess.run(["bash", script, str(tmp_path / "r"), "peaks", "ch1x"], cwd=ROOT, capture_output=True,
                             text=True, timeout=60, env=env)
    assert refused.returncode == 2 and not (tmp_path / "r").exists(), refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and "unknown step ch1x" in refused.stderr, refused.stderr
    for rc in (0, 1):
        out = tmp_path / f"out{rc}"
        proc = subprocess.run(["bash", script, str(out), *steps], cwd=ROOT, capture_output=True, text=True,
                              timeout=120, env={**env, "FAKE_RC": str(rc)})
        assert proc.returncode == rc, (rc, proc.stderr[-2000:])
        assert {p.stem for p in (out / "logs").glob("*.log")} == {"aa1" if s == "aa" else s for s in steps}
        assert ("failed: " + " ".join("aa1" if s == "aa" else s for s in steps) in proc.stderr) == (rc == 1)


@pytest.mark.parametrize("script,args", [("h100_ch16.sh", ["all"]), ("h200x2_ch16.sh", [])])
def test_the_ch16_session_scripts_exit_1_when_a_step_fails_and_0_when_none_does(tmp_path, script, args):
    """Chapter 16's scripts (h100_ch16.sh on steps.sh, the 2-GPU h200x2_ch16.sh with its own step function): a
    stand-in python3 that exits with the status it is given runs every step, and the script's exit status follows
    the steps' (the archive is written either way)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    env["PATH"] = stand_ins(tmp_path, {"python3": 'echo "fake python3 $*"\nexit ${FAKE_PYTHON_RC:-0}\n'})
    for rc, expected in (("1", 1), ("0", 0)):
        out = tmp_path / f"out{rc}"
        proc = subprocess.run(["bash", str(ROOT / "scripts" / script), str(out), *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, env={**env, "FAKE_PYTHON_RC": rc})
        assert proc.returncode == expected, (rc, proc.stdout[-2000:], proc.stderr[-2000:])
        assert list(out.glob("*.tar.gz")) and "fake python3" in "".join(p.read_text() for p in out.glob("*.log"))
        if expected:
            assert "failed:" in proc.stderr

# the trust script's fixtures run on an H200 (scripts/h100_trust.sh, session 64): the two side-stream variants failed
GPU_FIXTURES = ROOT / "profiles/h200/suite-e2ddd7c/call3-e2ddd7c/trust-e2ddd7c/fixtures"
SIDESTREAM = ["ch92/sidestream/optimized_sidestream_escaped", "ch92/sidestream/optimized_sidestream_partial"]


def expect_failures(report, *named):
    return subprocess.run([sys.executable, str(ROOT / "scripts/expect_failures.py"), str(report), *named],
                          capture_output=True, text=True, timeout=60)


def test_a_fixtures_report_passes_only_with_exactly_its_faults_failed(tmp_path):
    assert expect_failures(GPU_FIXTURES, *SIDESTREAM).returncode == 0
    missed = expect_failures(GPU_FIXTURES, SIDESTREAM[0])   # a failure the caller did not name
    assert missed.returncode == 1 and missed.stderr.splitlines() == [f"failed, though it should have passed: "
                                                                      f"{SIDESTREAM[1]}"], missed.stderr
    # the same run with a correct pair failing too: exit 1 from benchmark.py would not have told it apart
    doc = json.loads((GPU_FIXTURES / "results.json").read_text())
    reuse = next(p for p in doc["pairs"] if p["name"] == "reuse")
    honest = next(v for v in reuse["variants"] if v["name"] == "optimized_reuse_honest")
    honest.update(verified=False, speedup=None, speedup_ci=None)
    (tmp_path / "results.json").write_text(json.dumps(doc))
    broken = expect_failures(tmp_path, *SIDESTREAM)
    assert broken.returncode == 1 and "should have passed: ch83/reuse/optimized_reuse_honest" in broken.stderr
    assert expect_failures(tmp_path / "none", *SIDESTREAM).returncode == 2
