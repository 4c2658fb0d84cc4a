import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT))

# Ceilings measured while the suite loads the machine are too low: they go to a folder of the
# suite's own (inherited by every process it starts), never to the user's profiles/peaks/. Under
# pytest-xdist (`make test`) the controller picks the folder and its workers inherit it.
if "PYTEST_XDIST_WORKER" not in os.environ or not os.environ.get("PERF_PEAKS_DIR"):
    os.environ["PERF_PEAKS_DIR"] = tempfile.mkdtemp(prefix="test-peaks-")


def alive(pid: int) -> bool:
    """Is the process running? A zombie (killed, not yet reaped) is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def still_running(pids: list[int], within_s: float = 10.0) -> list[int]:
    """The processes among `pids` still running after up to `within_s`. SIGKILL is sent at once, but a killed child
    that is not the one reaped (and was stopped first: common.launch._stop) dies when it is next scheduled, which on
    a loaded 2-core machine was after the check (CI at 5c1ecfc); a process nobody killed runs on."""
    deadline = time.monotonic() + within_s
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def stand_ins(tmp_path, tools: dict[str, str]) -> str:
    """A PATH whose first folder, tmp_path/bin, holds a shell script for each tool (name: its body), so that a
    script under test starts these instead of the real python3, make, ncu..."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in tools.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def pytest_configure(config):
    config.addinivalue_line("markers", "serial: times the harness against itself; `make test` runs these files "
                                       "alone on the machine, after the others")
    if (getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ
            and not config.option.collectonly):
        # Before the workers load the machine: the CPU's ceilings, once, for all of them. Measured under the
        # workers' load they would read low, and a pair timed a moment later on an idle core would read
        # faster than its ceiling (SUSPECT). Load after this only makes a pair slower.
        try:
            proc = subprocess.run([sys.executable, str(ROOT / "benchmark.py"), "--peaks", "--device", "cpu"],
                                  cwd=ROOT, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise pytest.UsageError("measuring the CPU's ceilings took over 300 s") from None
        if proc.returncode != 0:
            raise pytest.UsageError(f"measuring the CPU's ceilings failed: {proc.stderr.strip()[-500:]}")


def bench(*args, timeout=600):
    """Run benchmark.py as a user would (`python benchmark.py ARGS` from the repository); the CompletedProcess."""
    return run_script(ROOT / "benchmark.py", *args, timeout=timeout)


# A fork server: one process that imported torch, numpy and matplotlib once, forking a child per script. On the
# 2-core CI host a torch import costs about 2.5 s, and the suite runs scripts a hundred times over, mostly to see
# them refuse bad input. Each child starts as `python SCRIPT ARGS` would: its argv, sys.path[0] the script's folder,
# the caller's environment and folder, no stdin, run as __main__; it ends as the interpreter would (SystemExit's
# status and message, an uncaught exception's traceback and 1, Ctrl-C's SIGINT; non-daemon threads joined, then the
# atexit handlers). What the imports printed (a warning) is added to each child's stderr; a change to a setting read
# at start-up (PYTHON*, *_NUM_THREADS) starts a new server.
FORK_SERVER = r"""
import atexit, json, os, runpy, shutil, signal, sys, tempfile, threading, traceback
import matplotlib, numpy, torch  # noqa: F401 - imported once, before the forks
site = [p for p in sys.path if p not in ("", os.getcwd())]
tmp = tempfile.mkdtemp(prefix="fork-server-")
out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
print(json.dumps("ready"), flush=True)
try:
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                for fd, path in ((1, out), (2, err)):
                    os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
                os.chdir(req["cwd"])
                os.environ.clear()
                os.environ.update(req["env"])
                sys.argv, sys.path[:] = req["argv"], [os.path.dirname(req["argv"][0]), *site]
                signal.alarm(req["timeout"])  # SIGALRM ends a script that outlives its timeout
                try:
                    runpy.run_path(req["argv"][0], run_name="__main__")
                    code = 0
                except SystemExit as e:
                    if e.code is not None and not isinstance(e.code, int):
                        print(e.code, file=sys.stderr)
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                except KeyboardInterrupt:
                    traceback.print_exc()
                    sys.stderr.flush()
                    signal.signal(signal.SIGINT, signal.SIG_DFL)
                    os.kill(os.getpid(), signal.SIGINT)
                except BaseException:
                    traceback.print_exc()
                threading._shutdown()
                atexit._run_exitfuncs()
                sys.stdout.flush(); sys.stderr.flush()
            finally:
                os._exit(code)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        print(json.dumps([status, open(out).read(), open(err).read()]), flush=True)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
"""
_server: dict = {}


def _start_up_settings(env: dict) -> dict:
    return {k: v for k, v in env.items() if k.startswith("PYTHON") or k.endswith("_NUM_THREADS")}


def _stop_server() -> None:
    """End the server: at once when it is between scripts (it removes its folder), killed otherwise."""
    proc = _server.pop("proc", None)
    if proc is not None:
        try:
            proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()


def run_script(script, *args, timeout=600, cwd=ROOT, env=None):
    """`python SCRIPT ARGS` run from `cwd` with `env` (default: this process's), forked from the fork server
    (FORK_SERVER); returns a CompletedProcess, or raises subprocess.TimeoutExpired as subprocess.run would."""
    env = dict(os.environ if env is None else env)
    settings = _start_up_settings(env)
    if not _server or _server["proc"].poll() is not None or _server["settings"] != settings:
        _stop_server()
        log = tempfile.TemporaryFile("w+")   # the server's stderr: what its imports print
        proc = subprocess.Popen([sys.executable, "-c", FORK_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=log, text=True, cwd="/", env=env)
        ready = proc.stdout.readline()
        log.seek(0)
        if not ready:
            raise RuntimeError(f"the fork server did not start: {log.read()[-2000:]}")
        _server.update(proc=proc, settings=settings, said=log.read())
        atexit.register(_stop_server)
    argv = [str(script), *map(str, args)]
    try:
        _server["proc"].stdin.write(json.dumps({"argv": argv, "cwd": str(cwd), "env": env,
                                                "timeout": max(1, int(timeout))}) + "\n")
        _server["proc"].stdin.flush()
        line = _server["proc"].stdout.readline()
    except BaseException:  # interrupted between request and answer: the next call must not read this answer
        _stop_server()
        raise
    if not line:
        _stop_server()
        raise RuntimeError("the fork server ended; run the script with subprocess to see why")
    code, out, err = json.loads(line)
    if code == -signal.SIGALRM:
        raise subprocess.TimeoutExpired([sys.executable, *argv], timeout, out, _server["said"] + err)
    return subprocess.CompletedProcess([sys.executable, *argv], code, out, _server["said"] + err)


@pytest.fixture
def run_bench():
    return bench
