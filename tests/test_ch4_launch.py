"""scripts/nvshmem_launch_multinode.sh --dry-run: the launch command for one node and for several."""
import os
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "nvshmem_launch_multinode.sh"


def launch(*args, **env):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=30,
                          env={**os.environ, **env})


def test_one_node_two_gpus_with_mpirun_uses_the_mpi_bootstrap_and_keeps_multicast_off():
    proc = launch("--dry-run", "1", "2", "ch4/bin/prog", "--pes-per-node", "1", NVSHMEM_LAUNCHER="mpirun",
                  NVSHMEM_REMOTE_TRANSPORT="ibrc")
    assert proc.returncode == 0, proc.stderr
    cmd = shlex.split(proc.stdout)
    assert cmd[0] == "mpirun" and cmd[cmd.index("-np") + 1] == "2" and "ppr:2:node" in cmd
    exported = {cmd[i + 1].split("=", 1)[0]: cmd[i + 1].split("=", 1)[1] for i, a in enumerate(cmd) if a == "-x"}
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
    assert launch("0", "2", "prog").returncode == 2
    assert launch("1", "2").returncode == 2
    assert launch("--dry-run", "1", "2", "prog", NVSHMEM_LAUNCHER="srun").returncode == 2
