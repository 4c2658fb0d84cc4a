"""A pair's timeout on the GPU: are all of a torchrun pair's ranks stopped, and their GPU memory freed?

torchrun starts each rank in a session of its own, so killing torchrun's process group alone (common.launch
before it also killed what it found below the worker) leaves the ranks running, each holding its GPU memory and
a CPU core while the next pairs are timed. This starts torchrun with 2 ranks on GPU 0 (each allocates 1 GiB and
sleeps), lets common.launch.watch time it out, then says which ranks are still alive and how much GPU memory
is in use. `--killpg-only` stops the way the harness used to, as the negative control; this script then kills the
survivors itself. `--device cpu` runs the same ranks without a GPU (what CI tests). Prints one JSON line; exit 1
where a rank outlived the stop.

    python3 scripts/stop_probe.py && python3 scripts/stop_probe.py --killpg-only
"""
import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import launch  # noqa: E402

RANK = r'''
import json, os, sys, time
import torch
folder, result, device = sys.argv[1], sys.argv[2], sys.argv[3]
held = torch.zeros(1 << 28 if device != "cpu" else 1 << 18, device=device)   # every rank: 1 GiB on GPU 0
if device != "cpu":
    torch.cuda.synchronize()
with open(os.path.join(folder, f"rank{os.environ['RANK']}"), "w") as f:
    f.write(str(os.getpid()))
while os.environ["RANK"] == "0" and len([n for n in os.listdir(folder) if n.startswith("rank")]) < 2:
    time.sleep(0.05)
if os.environ["RANK"] == "0":  # both ranks hold their memory: the pair has loaded, the timeout clock starts
    with open(result, "w") as f:
        json.dump({"in_progress": {"variant": "baseline", "stage": "verify"}}, f)
time.sleep(1e6)  # hangs
'''


def gpu0_used_mib(device: str) -> int | None:
    if device == "cpu":
        return None
    out = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=30).stdout
    return int(out.split()[0])


def alive(pid: int) -> bool:
    """Running (a zombie, killed and not yet reaped, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def killpg_only(proc: subprocess.Popen) -> None:
    """The stop before: the worker's process group, which torchrun's ranks are not in."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--killpg-only", action="store_true", help="stop as the harness used to (negative control)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="where the ranks allocate (default cuda)")
    args = ap.parse_args()
    if args.killpg_only:
        launch._stop = killpg_only
    device = "cuda:0" if args.device == "cuda" else "cpu"
    idle = gpu0_used_mib(device)
    seen: dict = {}
    with tempfile.TemporaryDirectory(prefix="stop-probe-") as tmp:
        folder, result = Path(tmp), Path(tmp) / "result.json"
        (folder / "gpu_rank.py").write_text(RANK)
        run = launch.watch(launch.torchrun(2, "gpu_rank", str(folder), str(result), device), result, timeout_s=2.0,
                           startup_s=180, env=dict(os.environ, PYTHONPATH=str(folder)), echo=False,
                           on_stage=lambda stage: seen.setdefault(stage, gpu0_used_mib(device)))
        ranks = sorted(int(f.read_text()) for f in folder.glob("rank*"))
    if device != "cpu":
        time.sleep(3)  # what the killed ranks held on the GPU is freed by now
    # A killed process is alive until the kernel has run its exit (tens of ms for a process with torch loaded, more
    # on a busy machine): a rank counts as a survivor only if it is still running 5 s after the stop
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in ranks if alive(pid)]
    after = gpu0_used_mib(device)
    for pid in survivors:  # leave the machine as it was
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    print(json.dumps({"stop": "killpg only (before)" if args.killpg_only else "common.launch._stop",
                      "stopped": run.stopped, "ranks": ranks, "ranks_alive_after_stop": survivors,
                      "gpu0_used_mib": {"before": idle, "ranks_running": seen.get("started"), "after_stop": after}}))
    return 1 if survivors or len(ranks) != 2 else 0


if __name__ == "__main__":
    sys.exit(main())
