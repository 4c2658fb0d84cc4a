"""Run a Python script under torch.profiler and write a Chrome/Perfetto trace.

    python -m common.profiling.torch_trace OUT.json SCRIPT [ARGS...]

Used by profile_pytorch.sh when Nsight Systems is not installed. The whole script runs inside one
profiler session, in an NVTX range named after it."""
import runpy
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from common import nvtx


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: python -m common.profiling.torch_trace OUT.json SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    out, script = Path(sys.argv[1]), sys.argv[2]
    if not Path(script).exists():
        print(f"error: {script} does not exist", file=sys.stderr)
        return 2
    sys.argv = sys.argv[2:]
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts, record_shapes=True) as prof:
        with record_function(Path(script).name), nvtx.range(Path(script).name):
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as e:
                if e.code not in (0, None):
                    raise
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    out.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out))
    print(prof.key_averages().table(sort_by="cuda_time_total" if torch.cuda.is_available() else "cpu_time_total",
                                    row_limit=15))
    print(f"trace: {out} (open in https://ui.perfetto.dev or chrome://tracing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
