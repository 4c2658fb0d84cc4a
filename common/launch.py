"""Start one process per pair (through torchrun where NPROC > 1), with a timeout, and collect what each reports.

benchmark.py decides a pair's run once, as a `RunSpec`; the worker (`python -m common.run SPEC.json`) writes the
spec's result file once its pair is loaded and again after every stage, with the variants finished so far and
`in_progress` naming the variant and stage it is in. So:
- the timeout clock starts when that file first appears (interpreter, torch import and pair files get STARTUP_S
  on their own; a worker that gets no further "did not start");
- a pair that crashes, runs out of memory or times out keeps the variants it finished; the one it was in fails,
  the ones it never reached are not run;
- the worker has its own session, so a terminal's Ctrl-C never hits it mid-write; this module stops its whole
  process group (torchrun's ranks, nsys, ncu) on a timeout or an interrupt.

A worker's own start (interpreter, torch import: about 5 s on an H100 host) is spent ahead where it cannot disturb
a measurement: `Spare` starts the next pair's worker, which imports and waits on stdin for its spec (`SPARE_AFTER`)."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from common.files import atomic_write_json
from common.pair import REPO_ROOT, Pair, pair_record, point_name, variant_record
from common.timing import BUDGET_S

TAIL_LINES = 40
STARTUP_S = 120.0   # interpreter, torch import, pair files: before the worker's first result file
POLL_S = 0.2
WORKER = [sys.executable, "-m", "common.run"]
# The worker's stages after which a pair timed by the host's clock or issued from the host (launch- and transfer-bound
# pairs, any on a CPU) is past its rounds: the next pair's spare may start.
ROUNDS_OVER = "rounds over"
SPARE_AFTER = (ROUNDS_OVER, "verify after timing")
# NVLink multicast (NVLS) stays off in every worker unless the user turns it on explicitly: on the
# shared machines this project is measured on it is not ours to use.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
# A worker profiles a variant (a launch-bound pair's kernel counts, --profile torch), then times the next one in the
# same process. Kineto leaves CUPTI attached after a profile unless TEARDOWN_CUPTI=1 (pytorch/pytorch#144455): on an
# H100 a graph replay timed after a profile read 0.0871 ms attached, 0.0844 ms torn down, 0.0845 ms never profiled
# (profiles/h100/cupti-8e0b8a1/; README.md, --profile, has the rest). A CPU run's worker does not get it: Kineto ends
# the teardown in the process's next CUDA call, and one profiled with it had not exited after 150 s (cupti-cpu-fbde333).
CUPTI_TEARDOWN = {"TEARDOWN_CUPTI": "1"}
# The profilers that run a worker inside them. They need a GPU, and they hold CUPTI: torch.profiler sees no GPU
# work under them, so a run under them takes no kernel counts and no gpu_busy_ms, and starts no spare worker.
TOOL_PROFILERS = ("nsys", "ncu")
# Exit codes that say no rank died: 1, a worker's verdict on a failed pair; -15, torchrun stopping the survivors.
_ECHO_EXIT_CODES = ("1", "-15")


@dataclasses.dataclass
class RunSpec:
    """One pair's run, as benchmark.py decided it (the ceilings are the measured values, not a cache to re-read);
    `python -m common.run SPEC.json` loads the pair files, applies the point and runs it, deriving nothing again."""
    chapter: int
    pair: str                  # the pair's name, without its sweep point
    bound: str
    baseline: str
    optimized: list[str]
    device: str                # "cuda" or "cpu"
    nproc: int = 1             # > 1: torchrun starts that many workers
    point: dict = dataclasses.field(default_factory=dict)   # {"size": 4096, "dtype": "bfloat16"} in a sweep
    peaks: dict | None = None  # the device's ceilings (common.peaks)
    quick: bool = False
    budget_s: float = BUDGET_S
    profile: str | None = None  # "torch", "nsys" or "ncu"
    outdir: str | None = None   # the report's folder: traces and profiles go beside it
    result: str = ""           # where the worker writes its result (set by run_in_subprocess)

    @classmethod
    def of(cls, pair: Pair, device: str, **decided) -> "RunSpec":
        return cls(pair.chapter, pair.name.split("@")[0], pair.bound, str(pair.baseline.path),
                   [str(v.path) for v in pair.variants], device, pair.nproc, dict(pair.point), **decided)

    @property
    def name(self) -> str:
        """The name the report gives this run: the pair's, with its sweep point (softmax@4096-bfloat16)."""
        return point_name(self.pair, self.point)

    def files(self) -> dict[str, Path]:
        """{variant name: its file}, the baseline first."""
        return {"baseline": Path(self.baseline), **{Path(p).stem: Path(p) for p in self.optimized}}


def worker_command(spec: RunSpec, spec_path: Path) -> list[str]:
    """`python -m common.run SPEC`, through torchrun for several processes, under nsys or ncu when asked."""
    cmd = torchrun(spec.nproc, "common.run", str(spec_path)) if spec.nproc > 1 else [*WORKER, str(spec_path)]
    out = str(Path(spec.outdir or ".") / f"ch{spec.chapter}_{spec.name}")
    if spec.profile == "nsys":
        cmd = ["nsys", "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "-t", "cuda,nvtx",
               "--force-overwrite=true", "-o", out, *cmd]
    elif spec.profile == "ncu":
        cmd = ["ncu", "--profile-from-start", "off", "--nvtx", "--launch-count", "50", "--target-processes", "all",
               "--force-overwrite", "-o", out, *cmd]
    return cmd


def torchrun(nproc: int, module: str, *args: str) -> list[str]:
    """`module` in `nproc` processes on this machine, through torchrun (the harness's only launcher of several)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            "-m", module, *args]


@dataclasses.dataclass
class WorkerRun:
    """How one worker process ended, and the last result file it wrote (None if none)."""
    rc: int | None             # exit status; None when we stopped it
    stopped: str | None        # "timeout" or "startup" when we stopped it
    timeout_s: float
    startup_limit_s: float
    elapsed_s: float           # from the process's start
    startup_s: float | None    # until the first result file appeared
    tail: list[str]
    result: dict | None


def _stop(proc: subprocess.Popen) -> None:
    """Kill the worker, every process below it, and reap it. The worker's process group is not enough: torchrun
    starts each rank in a session of its own, and a rank outlives torchrun's death, holding its GPU and its CPU while
    the next pairs are timed. So the group is frozen first (nothing in it starts another process meanwhile), then
    every process below the worker is found in /proc, and every process group among them is killed."""
    groups = {proc.pid}
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGSTOP)
    for pid in _below(proc.pid):
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(pid))
    groups.discard(os.getpgrp())  # never this process's own group
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    proc.wait()


def _below(pid: int) -> list[int]:
    """Every process descended from `pid`, from /proc's parent links (none where there is no /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):  # a process that ended meanwhile
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def read_result(path: Path) -> dict | None:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):  # not written yet; the worker writes atomically, so never half a file
        return None
    return doc if isinstance(doc, dict) else None


def _written(path: Path) -> int | None:
    """When the file was last written, or None where it is not there (yet)."""
    try:
        return Path(path).stat().st_mtime_ns
    except OSError:
        return None


def _pump(stream, tail: collections.deque, echo: bool):
    for line in iter(stream.readline, ""):
        tail.append(line.rstrip())
        if echo:
            print("    " + line.rstrip(), file=sys.stderr, flush=True)
    stream.close()


class Spare:
    """A worker started ahead: `python -m common.run --spare` imports torch and the harness, then waits on stdin for
    its arguments (a JSON list: the spec's path); an empty line or a closed stdin ends it."""
    def __init__(self, env: dict):
        self.env = env
        self.proc = subprocess.Popen([*WORKER, "--spare"], cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)

    def fits(self, cmd: list[str], env: dict | None) -> bool:
        return self.proc.poll() is None and env == self.env and cmd[:len(WORKER)] == WORKER

    def go(self, cmd: list[str]) -> subprocess.Popen:
        self.proc.stdin.write(json.dumps(cmd[len(WORKER):]) + "\n")
        self.proc.stdin.close()
        return self.proc

    def discard(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            _stop(self.proc)
        if self.proc.stdout:
            self.proc.stdout.close()


def _start(cmd: list[str], env: dict | None, spare: Spare | None) -> subprocess.Popen:
    """The spare, handed `cmd`, where it fits; else a new process (the spare, if any, is ended)."""
    if spare is not None and spare.fits(cmd, env):
        with contextlib.suppress(OSError):  # it ended between the check and the command line: start one as usual
            return spare.go(cmd)
    if spare is not None:
        spare.discard()
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def watch(cmd: list[str], result_path: Path, *, timeout_s: float, startup_s: float = STARTUP_S,
          env: dict | None = None, echo: bool = True, spare: Spare | None = None,
          on_stage: Callable[[str], None] | None = None) -> WorkerRun:
    """Run `cmd` until it exits, outlives `timeout_s` after its first result file, or writes none in `startup_s`.
    `spare`: a worker started ahead with the same environment runs `cmd` instead of a new process. `on_stage`: called
    with "started" when the first result file appears, each stage reported after that, and "exited" at the end.
    On any exception here (KeyboardInterrupt, the SIGTERM handler's) the worker is stopped before it propagates."""
    tail: collections.deque = collections.deque(maxlen=TAIL_LINES)
    t0 = time.monotonic()
    proc = _start(cmd, env, spare)
    pump = threading.Thread(target=_pump, args=(proc.stdout, tail, echo), daemon=True)
    pump.start()
    started = stopped = rc = seen = last_written = None
    tell = on_stage or (lambda stage: None)
    try:
        while rc is None and stopped is None:
            try:
                rc = proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                now, written = time.monotonic(), _written(result_path)
                if started is None and written is not None:
                    started = now
                    tell("started")
                if on_stage is not None and written != last_written:  # no parsing while a pair is timed
                    last_written = written
                    stage = ((read_result(result_path) or {}).get("in_progress") or {}).get("stage")
                    if stage and stage != seen:
                        seen = stage
                        tell(stage)
                if started is None and now - t0 > startup_s:
                    stopped = "startup"
                elif started is not None and now - started > timeout_s:
                    stopped = "timeout"
        if stopped:
            _stop(proc)
    except BaseException:
        _stop(proc)
        pump.join(timeout=2)
        raise
    pump.join(timeout=5)
    if started is None and Path(result_path).exists():
        started = time.monotonic()
    tell("exited")
    return WorkerRun(rc=rc, stopped=stopped, timeout_s=timeout_s, startup_limit_s=startup_s,
                     elapsed_s=time.monotonic() - t0, startup_s=None if started is None else started - t0,
                     tail=list(tail), result=read_result(result_path))


def _failures(lines) -> list[tuple[str, str | None]]:
    """(rank, exit code) of each failure torchrun lists, its "Root Cause (first observed failure)" first."""
    found, root = [], None
    for line in lines:
        if line.startswith("Root Cause"):
            root = len(found)
        if m := re.match(r"rank\s*:\s*(\d+)", line):
            found.append([m.group(1), None])
        if (m := re.match(r"exitcode\s*:\s*(-?\d+)", line)) and found and found[-1][1] is None:
            found[-1][1] = m.group(1)
    found = [tuple(f) for f in found]
    return found[root:root + 1] + found[:root] + found[root + 1:] if root is not None and root < len(found) else found


def first_failure(tail) -> tuple[str, str | None] | None:
    """The rank whose failure ended the run, and its exit code, from torchrun's report (None without one).
    torchrun's root cause is the failure with the smallest timestamp in whole seconds, so a rank that died and
    rank 0 ending in the same second can come out either way: a death (exit code not in _ECHO_EXIT_CODES) wins."""
    found = _failures([line.strip() for line in tail if line.strip()])
    died = [f for f in found if f[1] not in _ECHO_EXIT_CODES]
    return (died or found or [None])[0]


def crash_line(tail) -> str:
    """The line that says why a worker died: for torchrun, the rank that failed first and its exit code
    (and that rank's last exception, if it printed one); otherwise the last line printed."""
    lines = [line.strip() for line in tail if line.strip()]
    first = first_failure(lines)
    if first is None:
        return lines[-1] if lines else ""
    rank, exitcode = first
    said = [line for line in lines if line.startswith(f"[rank{rank}]:") and ("Error" in line or "error" in line)]
    return f"rank {rank} failed first (exit code {exitcode})" + (f": {said[-1].split(':', 1)[1].strip()}" if said else
                                                                  ", without an error message")


def another_rank_died(run: WorkerRun) -> bool:
    """Rank 0 wrote a finished result, but a rank died: rank 0's errors are then that death's echo (a reset
    connection, say), not its cause, and the report names the death."""
    first = first_failure(run.tail) if run.rc else None
    return first is not None and first[1] not in _ECHO_EXIT_CODES


def settle(run: WorkerRun, *, chapter: int, name: str, bound: str, files: dict[str, Path]) -> dict:
    """The pair's result from how its worker ended: the worker's own when it finished, else what it finished plus
    a failed entry for the variant it was in and a not-run one for each it never reached. `files` as RunSpec.files."""
    partial = run.result
    if partial is not None and partial.get("in_progress") is None and run.stopped is None \
            and not another_rank_died(run):
        return partial
    where = (partial or {}).get("in_progress") or {}
    variant, stage = where.get("variant"), where.get("stage")
    at = (f" in {variant}" if variant else "") + (f" ({stage})" if stage else "")
    if partial is not None and "in_progress" in partial and partial["in_progress"] is None:
        # every result is in: the process did not end, or another rank died and rank 0 finished around it
        at = "" if run.stopped is None else " after its last variant, while exiting"
    if run.stopped == "timeout":
        error, ended = f"timed out after {run.timeout_s:.0f} s{at}", "timed out"
    elif run.stopped == "startup":
        error, ended = (f"did not start: no result file after {run.startup_limit_s:.0f} s "
                        f"(interpreter, torch import, loading the pair files)"), "did not start"
    else:
        last = crash_line(run.tail)
        kind = "out of memory" if "out of memory" in last.lower() else f"exit code {run.rc}"
        error, ended = f"crashed ({kind}){at}: {last.strip()[-300:]}", "crashed"
    result = dict(partial) if partial else pair_record(chapter, name, bound)
    result.pop("in_progress", None)
    result.update(status="failed", error=error, log_tail=run.tail)
    if isinstance(result.get("errors"), list):
        result["errors"] = [*result["errors"], error]
    if partial is None:  # it never got going: nothing to keep, nothing to list
        return result
    if variant and run.stopped == "timeout":
        result["hung_variant"] = variant
    names = {n: Path(p).name for n, p in files.items()}
    done = {v["name"]: v for v in ([result["baseline"]] if result.get("baseline") else []) + result["variants"]}
    if variant in done:  # it had an entry already (verified, say) and stopped in a later stage
        done[variant]["error"] = done[variant].get("error") or error
    elif variant == "baseline":
        result["baseline"] = variant_record("baseline", names.get("baseline"), error=error)
    elif variant:
        result["variants"].append(variant_record(variant, names.get(variant), error=error))
    why = f"not run: {variant + ' ' if variant else 'the pair '}{ended}"
    result["variants"] += [variant_record(n, file, skipped=why) for n, file in names.items()
                           if n != "baseline" and n != variant and n not in done]
    order = {n: i for i, n in enumerate(names)}
    result["variants"].sort(key=lambda v: order.get(v["name"], len(order)))
    return result


def run_in_subprocess(spec: RunSpec, *, timeout_s: float, echo: bool = True, startup_s: float = STARTUP_S,
                      command: Callable[[Path], list[str]] | None = None, spare: Spare | None = None,
                      on_stage: Callable[[str], None] | None = None) -> dict:
    """Run one pair as `spec` says, in its own process, and return its result, finished or not.
    `command(result_path)` replaces the worker's command (the tests' fake worker); `spare`, `on_stage` as in watch."""
    with tempfile.TemporaryDirectory(prefix="pair-") as tmp:
        spec = dataclasses.replace(spec, result=str(Path(tmp) / "result.json"))
        spec_path = Path(tmp) / "spec.json"
        atomic_write_json(spec_path, dataclasses.asdict(spec))
        cmd = command(Path(spec.result)) if command else worker_command(spec, spec_path)
        run = watch(cmd, Path(spec.result), env=worker_env(spec.device, Path(spec.baseline).parent.parent),
                    timeout_s=timeout_s, startup_s=startup_s, echo=echo, spare=spare, on_stage=on_stage)
    result = settle(run, chapter=spec.chapter, name=spec.name, bound=spec.bound, files=spec.files())
    result["elapsed_s"] = round(run.elapsed_s, 2)
    if run.startup_s is not None:
        result["startup_s"] = round(run.startup_s, 2)  # before the timeout clock started
    if spec.profile == "ncu" and spec.outdir is not None:   # beside the .ncu-rep: its speed-of-light rows, as text
        sol = ncu_speed_of_light(Path(spec.outdir) / f"ch{spec.chapter}_{spec.name}.ncu-rep")
        if sol is not None:
            result["ncu_sol_csv"] = sol.name
    return result


def worker_env(device: str, chapters: Path = REPO_ROOT) -> dict:
    """A worker's environment: this one, multicast off and (a CUDA run) CUPTI torn down after a profile unless set,
    and the repository and the folder that holds the pair's chapters (tests keep theirs elsewhere) on PYTHONPATH."""
    teardown = CUPTI_TEARDOWN if device == "cuda" else {}
    env = {**MULTICAST_OFF, **teardown, **os.environ}  # the user's explicit setting wins
    env.update(PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(dict.fromkeys([str(REPO_ROOT), str(chapters)]
                                                        + [p for p in [os.environ.get("PYTHONPATH")] if p])))
    return env


def tool_missing(profile: str | None) -> str | None:
    """The one-line complaint for a profiler that is not installed, or None."""
    if profile in TOOL_PROFILERS and shutil.which(profile) is None:
        return (f"--profile {profile}: '{profile}' is not on PATH; install Nsight "
                f"{'Systems' if profile == 'nsys' else 'Compute'} or use --profile torch")
    return None


def ncu_speed_of_light(report: Path) -> Path | None:
    """report's speed-of-light section (SM and memory throughput as % of peak, duration, per launch) as CSV beside
    it (<name>.sol.csv), via `ncu --import`; None where ncu or the report is missing or the export fails."""
    report = Path(report)
    if shutil.which("ncu") is None or not report.is_file():
        return None
    try:
        r = subprocess.run(["ncu", "--import", str(report), "--csv", "--page", "details", "--section", "SpeedOfLight",
                            "--print-units", "base"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0 or not r.stdout.strip():
        return None
    out = report.with_name(report.name.removesuffix(".ncu-rep") + ".sol.csv")
    out.write_text(r.stdout)
    return out
