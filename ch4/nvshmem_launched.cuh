// nvshmem_launched.cuh: refuse, in one line, a run that no launcher started.
//
// nvshmem_init() needs a bootstrap: a launcher (mpirun, nvshmrun, srun) that tells every PE the others.
// Started by hand, it fails deep inside NVSHMEM ("nvshmem common init failed ... status 7"). These
// variables are set by the launchers, or by scripts/nvshmem_launch_multinode.sh (NVSHMEM_BOOTSTRAP).
#pragma once
#include <cstdio>
#include <cstdlib>

inline bool launched_by_a_launcher() {
  const char* names[] = {"NVSHMEM_BOOTSTRAP", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                         "SLURM_PROCID"};
  for (const char* name : names)
    if (std::getenv(name)) return true;
  return false;
}

// Call first in main(): returns 2 (the exit status for bad input) after one line, or 0 to go on.
inline int refuse_unless_launched(const char* argv0) {
  if (launched_by_a_launcher()) return 0;
  std::fprintf(stderr, "error: start %s through a launcher, e.g. scripts/nvshmem_launch_multinode.sh 1 2 %s\n",
               argv0, argv0);
  return 2;
}
