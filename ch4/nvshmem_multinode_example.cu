// nvshmem_multinode_example.cu: node-local teams and a hierarchical all-reduce on NVSHMEM, checked
// against a flat all-reduce and against the sum computed on the CPU.
//
// Across nodes the links are ~10x slower than NVLink inside one (InfiniBand ~50 GB/s per GPU
// against NVLink's hundreds), so a multi-node all-reduce keeps as much traffic as it can inside
// each node. With P PEs per node and N nodes:
//   1. reduce-scatter inside the node: PE i of the node ends with slice i of the node's sum;
//   2. all-reduce slice i across the nodes, among the N PEs that hold slice i (one per node):
//      only 1/P of the data leaves each GPU, in parallel over the P GPUs' network cards;
//   3. all-gather inside the node: every PE gets every slice.
// The teams: `node` (the P PEs of one node) and `slice` (the N PEs with the same index in their
// node) come from nvshmem_team_split_strided of NVSHMEM_TEAM_WORLD, one call per team; a PE gets
// a valid handle only for the teams it belongs to. On one machine, --pes-per-node P (or env
// PES_PER_NODE) splits its GPUs into several "nodes", so the hierarchy runs on 2 GPUs as 2 nodes of 1.
//
// Each step is one of NVSHMEM's team collectives: nvshmem_float_sum_reducescatter over the node team,
// nvshmem_float_sum_reduce over the slice team, nvshmem_float_fcollect over the node team. The flat
// comparison is nvshmem_float_sum_reduce over NVSHMEM_TEAM_WORLD.
//
// Build: make -C ch4 nvshmem (see nvshmem_pipeline_patterns.cu for the nvcc line).
// Run:   scripts/nvshmem_launch_multinode.sh 1 2 ch4/bin/nvshmem_multinode_example_sm90 --pes-per-node 1
//        scripts/nvshmem_launch_multinode.sh 2 8 ch4/bin/nvshmem_multinode_example_sm90   (2 nodes x 8 GPUs)
// Prints the teams, both all-reduces' times and bus bandwidth, then PASS or FAIL.
#include <nvshmem.h>
#include <nvshmemx.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_check.cuh"
#include "nvshmem_launched.cuh"

constexpr size_t COUNT = 16u << 20;   // floats per PE: 64 MiB
constexpr int REPS = 10;

__global__ void fill(float* x, size_t n, int pe) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = (float)((i * 7 + pe * 13) % 64) - 32.0f;   // small integers: every sum is exact in fp32
}

static float expected(size_t i, int npes) {
  float s = 0;
  for (int pe = 0; pe < npes; ++pe) s += (float)((i * 7 + pe * 13) % 64) - 32.0f;
  return s;
}

static size_t check(const float* d, size_t n, int npes) {
  std::vector<float> h(n);
  CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += h[i] != expected(i, npes);
  return wrong;
}

static double seconds(void (*fn)(void*), void* arg) {
  fn(arg);                                                     // warm-up
  nvshmem_barrier_all();
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < REPS; ++r) fn(arg);
  CUDA_CHECK(cudaDeviceSynchronize());
  nvshmem_barrier_all();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / REPS;
}

struct Ctx {
  nvshmem_team_t node, slice;
  int ppn, nodes, local;
  float *src, *dst, *part, *part_sum;
  size_t slice_count;
};

static void flat(void* p) {
  Ctx* c = (Ctx*)p;
  nvshmem_float_sum_reduce(NVSHMEM_TEAM_WORLD, c->dst, c->src, COUNT);
}

static void hierarchical(void* p) {
  Ctx* c = (Ctx*)p;
  if (c->ppn > 1) nvshmem_float_sum_reducescatter(c->node, c->part, c->src, c->slice_count);   // 1
  else CUDA_CHECK(cudaMemcpy(c->part, c->src, COUNT * sizeof(float), cudaMemcpyDeviceToDevice));
  if (c->nodes > 1) nvshmem_float_sum_reduce(c->slice, c->part_sum, c->part, c->slice_count);  // 2 (across nodes)
  else CUDA_CHECK(cudaMemcpy(c->part_sum, c->part, c->slice_count * sizeof(float), cudaMemcpyDeviceToDevice));
  if (c->ppn > 1) nvshmem_float_fcollect(c->node, c->dst, c->part_sum, c->slice_count);       // 3
  else CUDA_CHECK(cudaMemcpy(c->dst, c->part_sum, COUNT * sizeof(float), cudaMemcpyDeviceToDevice));
}

int main(int argc, char** argv) {
  if (int bad = refuse_unless_launched(argv[0])) return bad;
  nvshmem_init();
  int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
  CUDA_CHECK(cudaSetDevice(nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE)));
  int ppn = nvshmem_team_n_pes(NVSHMEMX_TEAM_NODE);              // the real node, unless told otherwise
  if (const char* env = std::getenv("PES_PER_NODE")) ppn = std::atoi(env);
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--pes-per-node") == 0) ppn = std::atoi(argv[i + 1]);
  if (ppn < 1 || npes % ppn || COUNT % ppn) {
    if (me == 0) std::printf("--pes-per-node %d must divide the %d PEs (and %zu): FAIL\n", ppn, npes, COUNT);
    nvshmem_finalize();
    return 1;
  }
  if (me == 0) print_device();
  // nvshmem_init() ran before a device was chosen, so NVSHMEM finishes its setup on the first call that
  // needs the GPU. The team splits below refuse to run before that ("called before NVSHMEM initialization
  // has completed"): a barrier on the device just set completes it on every PE first.
  nvshmem_barrier_all();
  Ctx c{};
  c.ppn = ppn, c.nodes = npes / ppn, c.local = me % ppn, c.slice_count = COUNT / ppn;
  // One split per team; every PE takes part in every split and keeps the handle of its own.
  c.node = c.slice = NVSHMEM_TEAM_INVALID;
  for (int n = 0; n < c.nodes; ++n) {
    nvshmem_team_t t;
    nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, n * ppn, 1, ppn, nullptr, 0, &t);
    if (me / ppn == n) c.node = t;
  }
  for (int i = 0; i < ppn; ++i) {
    nvshmem_team_t t;
    nvshmem_team_split_strided(NVSHMEM_TEAM_WORLD, i, ppn, c.nodes, nullptr, 0, &t);
    if (c.local == i) c.slice = t;
  }
  if (c.node == NVSHMEM_TEAM_INVALID || c.slice == NVSHMEM_TEAM_INVALID) {
    std::printf("PE %d: team split failed: FAIL\n", me);
    nvshmem_finalize();
    return 1;
  }
  for (int pe = 0; pe < npes; ++pe) {
    if (pe == me)
      std::printf("PE %d: node %d (team of %d, my index %d), slice team of %d (my index %d)\n", me, me / ppn,
                  nvshmem_team_n_pes(c.node), nvshmem_team_my_pe(c.node), nvshmem_team_n_pes(c.slice),
                  nvshmem_team_my_pe(c.slice));
    std::fflush(stdout);
    nvshmem_barrier_all();
  }
  c.src = (float*)nvshmem_malloc(COUNT * sizeof(float));
  c.dst = (float*)nvshmem_malloc(COUNT * sizeof(float));
  c.part = (float*)nvshmem_malloc(c.slice_count * sizeof(float));
  c.part_sum = (float*)nvshmem_malloc(c.slice_count * sizeof(float));
  fill<<<256, 256>>>(c.src, COUNT, me);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  nvshmem_barrier_all();

  bool ok = true;
  double bytes = COUNT * sizeof(float), factor = 2.0 * (npes - 1) / npes;   // nccl-tests' busbw for all-reduce
  struct { const char* name; void (*fn)(void*); } runs[] = {{"flat (TEAM_WORLD)", flat},
                                                             {"hierarchical (node, slice, node)", hierarchical}};
  for (auto& r : runs) {
    CUDA_CHECK(cudaMemset(c.dst, 0, COUNT * sizeof(float)));
    nvshmem_barrier_all();
    double s = seconds(r.fn, &c);
    size_t wrong = check(c.dst, COUNT, npes);
    ok = ok && wrong == 0;
    if (me == 0)
      std::printf("%-34s %zu MiB per PE, %d PEs as %d node(s) x %d: %9.3f ms, busbw %7.1f GB/s, %zu wrong (PE 0)\n",
                  r.name, (size_t)(bytes / (1 << 20)), npes, c.nodes, ppn, s * 1e3, bytes / s * factor / 1e9, wrong);
  }
  int* flag = (int*)nvshmem_malloc(sizeof(int));
  int* all = (int*)nvshmem_malloc(sizeof(int));
  int mine = ok;
  CUDA_CHECK(cudaMemcpy(flag, &mine, sizeof mine, cudaMemcpyHostToDevice));
  nvshmem_int_min_reduce(NVSHMEM_TEAM_WORLD, all, flag, 1);
  CUDA_CHECK(cudaMemcpy(&mine, all, sizeof mine, cudaMemcpyDeviceToHost));
  if (me == 0) std::printf("%s\n", mine ? "PASS" : "FAIL");
  nvshmem_free(all);
  nvshmem_free(flag);
  nvshmem_free(c.part_sum);
  nvshmem_free(c.part);
  nvshmem_free(c.dst);
  nvshmem_free(c.src);
  nvshmem_finalize();
  return mine ? 0 : 1;
}
