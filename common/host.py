"""The host CPU a run happened on: a CPU run is labelled by it, and a GPU run's launch-bound figures depend on it."""
from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's marketing name ("model name" on x86, "Model"/"Hardware" on some ARM boards), else platform's."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware", "cpu model") and value.strip():
                return value.strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine() or "unknown"


def host_info() -> dict:
    """{"cpu": model, "cores": logical CPUs, "cores_usable": the ones this process may run on}."""
    cores = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        usable = cores
    return {"cpu": cpu_model(), "cores": cores, "cores_usable": usable}
