"""scripts/nvshmem_launch_multinode.sh --dry-run: the launch command for one node and for several."""
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "nvshmem_launch_multinode.sh"


def launch(*args, unset=(), **env):
    base = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=30,
                          env={**base, **env})


def exports(stdout: str) -> dict:
    cmd = shlex.split(stdout)
    return {cmd[i + 1].split("=", 1)[0]: cmd[i + 1].split("=", 1)[1] for i, a in enumerate(cmd) if a == "-x"}


def fake_python(tmp_path, body: str):
    """What the script runs as $PYTHON to find NVSHMEM's pip package (nvidia.nvshmem)."""
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_one_node_two_gpus_with_mpirun_uses_the_mpi_bootstrap_and_keeps_multicast_off():
    proc = launch("--dry-run", "1", "2", "ch4/bin/prog", "--pes-per-node", "1", NVSHMEM_LAUNCHER="mpirun",
                  NVSHMEM_REMOTE_TRANSPORT="ibrc")
    assert proc.returncode == 0, proc.stderr
    cmd = shlex.split(proc.stdout)
    assert cmd[0] == "mpirun" and cmd[cmd.index("-np") + 1] == "2" and "ppr:2:node" in cmd
    exported = exports(proc.stdout)
    assert exported["NVSHMEM_BOOTSTRAP"] == "MPI" and exported["NVSHMEM_DISABLE_NVLS"] == "1"
    assert exported["NCCL_NVLS_ENABLE"] == "0" and exported["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert exported["NVSHMEM_REMOTE_TRANSPORT"] == "ibrc"          # the caller's NVSHMEM_* settings travel
    assert "NVSHMEM_LAUNCHER" not in exported and "--hostfile" not in cmd
    assert cmd[-3:] == ["ch4/bin/prog", "--pes-per-node", "1"]


def test_several_nodes_need_a_hostfile_and_get_one_pe_per_gpu(tmp_path):
    proc = launch("2", "8", "prog", NVSHMEM_LAUNCHER="mpirun")
    assert proc.returncode == 2 and "hostfile" in proc.stderr
    hosts = tmp_path / "hosts"
    hosts.write_text("node-a slots=8\nnode-b slots=8\n")
    cmd = shlex.split(launch("--dry-run", "--hostfile", str(hosts), "2", "8", "prog", NVSHMEM_LAUNCHER="mpirun").stdout)
    assert cmd[cmd.index("-np") + 1] == "16" and cmd[cmd.index("--hostfile") + 1] == str(hosts)
    cmd = shlex.split(launch("--dry-run", "--hostfile", str(hosts), "2", "8", "prog", NVSHMEM_LAUNCHER="nvshmrun").stdout)
    assert cmd[:5] == ["nvshmrun", "-n", "16", "-ppn", "8"] and cmd[cmd.index("-f") + 1] == str(hosts)
    genv = {cmd[i + 1]: cmd[i + 2] for i, a in enumerate(cmd) if a == "-genv"}
    assert genv["NVSHMEM_DISABLE_NVLS"] == "1" and "NVSHMEM_BOOTSTRAP" not in genv


def test_bad_arguments_are_refused():
    """Exit 2 with one line that says what was wrong: the counts, the missing binary, the launcher."""
    for proc, says in ((launch("0", "2", "prog"), "must be positive integers, got '0' and '2'"),
                       (launch("1", "2"), "<nodes> <gpus_per_node> <binary>"),
                       (launch("--dry-run", "1", "2", "prog", NVSHMEM_LAUNCHER="srun"), "NVSHMEM_LAUNCHER=srun; choose")):
        (line,) = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and says in line and not proc.stdout, (proc.returncode, proc.stderr)


def test_a_fresh_shell_without_nvshmem_passes_no_ld_library_path(tmp_path):
    # LD_LIBRARY_PATH unset and a python without site-packages (so no nvidia.nvshmem): nothing to put
    # on the library path, and set -u must not trip over the unset variable (it did: "!v: unbound variable").
    no_nvshmem = fake_python(tmp_path, f'exec "{sys.executable}" -I -S "$@"')
    hosts = tmp_path / "hosts"
    for launcher, flag in (("mpirun", "-x"), ("nvshmrun", "-genv")):
        proc = launch("--dry-run", "--hostfile", str(hosts), "2", "8", "prog", unset=("LD_LIBRARY_PATH",),
                      PYTHON=no_nvshmem, NVSHMEM_LAUNCHER=launcher)
        assert proc.returncode == 0, proc.stderr
        cmd = shlex.split(proc.stdout)
        assert cmd[0] == launcher and cmd[-1] == "prog"
        passed = [cmd[i + 1] for i, a in enumerate(cmd) if a == flag]
        assert passed and not any(p.startswith("LD_LIBRARY_PATH") for p in passed), cmd
        assert any(p.startswith("NVSHMEM_DISABLE_NVLS") for p in passed)


def test_nvshmem_library_folder_goes_first_on_ld_library_path(tmp_path):
    lib = tmp_path / "nvshmem" / "lib"
    lib.mkdir(parents=True)
    finds_lib = fake_python(tmp_path, f'echo "{lib}"')
    proc = launch("--dry-run", "1", "2", "prog", unset=("LD_LIBRARY_PATH",), PYTHON=finds_lib,
                  NVSHMEM_LAUNCHER="mpirun")
    assert proc.returncode == 0, proc.stderr
    assert exports(proc.stdout)["LD_LIBRARY_PATH"] == str(lib)
    proc = launch("--dry-run", "1", "2", "prog", PYTHON=finds_lib, NVSHMEM_LAUNCHER="mpirun", LD_LIBRARY_PATH="/opt/x")
    assert exports(proc.stdout)["LD_LIBRARY_PATH"] == f"{lib}:/opt/x"
