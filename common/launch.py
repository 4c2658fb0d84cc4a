"""Start one process per pair, with a timeout, and collect what each one reports.

A pair that crashes, raises a CUDA error, runs out of memory or outlives its
timeout is recorded as failed with the last lines it printed; the next pair
still runs. Pairs with NPROC > 1 start through torchrun.
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common.pair import REPO_ROOT

TAIL_LINES = 12


def _pump(stream, prefix: str, tail: collections.deque, echo: bool):
    for line in iter(stream.readline, ""):
        tail.append(line.rstrip())
        if echo:
            print(prefix + line.rstrip(), file=sys.stderr, flush=True)
    stream.close()


def worker_command(chapter: int, name: str, baseline: Path, optimized: list[Path], device: str,
                   result: Path, peaks: Path | None, quick: bool, budget: float, nproc: int,
                   profile: str | None, outdir: Path | None) -> list[str]:
    args = ["--chapter", str(chapter), "--name", name, "--baseline", str(baseline),
            "--optimized", *map(str, optimized), "--device", device, "--result", str(result),
            "--budget", str(budget)]
    if peaks:
        args += ["--peaks", str(peaks)]
    if quick:
        args.append("--quick")
    if profile:
        args += ["--profile", profile]
    if outdir:
        args += ["--outdir", str(outdir)]
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "common.run", *args]
    else:
        cmd = [sys.executable, "-m", "common.run", *args]
    label = f"{chapter}_{name}"
    if profile == "nsys":
        cmd = ["nsys", "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "-t", "cuda,nvtx",
               "--force-overwrite=true", "-o", str(Path(outdir) / f"ch{label}"), *cmd]
    elif profile == "ncu":
        cmd = ["ncu", "--profile-from-start", "off", "--nvtx", "--launch-count", "50", "--target-processes", "all",
               "--force-overwrite", "-o", str(Path(outdir) / f"ch{label}"), *cmd]
    return cmd


def run_in_subprocess(chapter: int, name: str, bound: str, baseline: Path, optimized: list[Path], *,
                      device: str, peaks: Path | None, quick: bool, budget: float, timeout_s: float,
                      nproc: int = 1, profile: str | None = None, outdir: Path | None = None,
                      echo: bool = True) -> dict:
    with tempfile.TemporaryDirectory(prefix="pair-") as tmp:
        result_path = Path(tmp) / "result.json"
        cmd = worker_command(chapter, name, baseline, optimized, device, result_path, peaks, quick, budget,
                             nproc, profile, outdir)
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(Path(baseline).parent.parent)]
                                              + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        tail: collections.deque = collections.deque(maxlen=TAIL_LINES)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        pump = threading.Thread(target=_pump, args=(proc.stdout, "    ", tail, echo), daemon=True)
        pump.start()
        try:
            rc = proc.wait(timeout=timeout_s)
            error = None
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            rc, error = None, f"timed out after {timeout_s:.0f} s"
        pump.join(timeout=5)
        elapsed = time.perf_counter() - t0
        if result_path.exists():
            result = json.loads(result_path.read_text())
        else:
            if error is None:
                last = next((l for l in reversed(tail) if l.strip()), "")
                kind = "out of memory" if "out of memory" in last.lower() else f"exit code {rc}"
                error = f"crashed ({kind}): {last.strip()[-300:]}"
            result = {"chapter": chapter, "name": name, "bound": bound, "status": "failed", "error": error,
                      "baseline": None, "variants": [], "log_tail": list(tail)}
        result["elapsed_s"] = round(elapsed, 2)
        return result


def tool_missing(profile: str | None) -> str | None:
    """The one-line complaint for a profiler that is not installed, or None."""
    if profile in ("nsys", "ncu") and shutil.which(profile) is None:
        return f"--profile {profile}: '{profile}' is not on PATH; install Nsight {'Systems' if profile == 'nsys' else 'Compute'} or use --profile torch"
    return None
