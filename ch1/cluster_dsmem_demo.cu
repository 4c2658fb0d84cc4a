// cluster_dsmem_demo.cu: blocks of a thread-block cluster exchanging data through each other's shared memory
// (distributed shared memory, Hopper), against the same exchange through global memory.
//
// 128 signals of 32,768 floats each take 1000 steps of a 3-point diffusion stencil,
//     y[i] = 0.25 (x[i-1] + x[i+1]) + 0.5 x[i]      (zero beyond the signal's ends)
// A signal (128 KB) is too long for one block's shared memory to hold twice (double buffered), so it is split
// over 8 blocks of 256 threads, 4096 floats (16 KB) each, and each step every block needs one value from each
// neighbour.
//
//   1. a kernel per step          no block keeps anything: each of 1000 launches reads the signals from global
//                                 memory (L2: 16 MB) and writes them back. The obvious version
//   2. cluster, global exchange   one launch, the 8 blocks of a signal are one cluster (__cluster_dims__(8)):
//                                 each keeps its segment in shared memory for all 1000 steps. Per step, its
//                                 two edge values go out through global memory (a store before the step's
//                                 cluster.sync(), an L2 load by the neighbour after it: __ldcg, since L1 is
//                                 not coherent)
//   3. cluster, DSMEM exchange    2 with the neighbour's edge read straight from its shared memory
//                                 (cluster.map_shared_rank): an SM-to-SM load, no trip through L2
//
// 2 and 3 have the same structure, one cluster.sync() per step; only where the two halo values travel
// differs. 1 -> 2 is what keeping state on chip across steps buys; 2 -> 3 is what DSMEM buys.
//
// Build: make -C ch1 cluster_dsmem_demo
// Prints, per version: ms, µs per step, and the speedup over version 1; exits 1 if a version's signals differ
// from the CPU's (4 signals, same fmaf steps, bit for bit) or from version 1 anywhere. Built with
// -DINJECT_FAULT, version 3 reads a neighbour one element off, and the run must say MISMATCH and FAIL.
// Bound: latency per step (a barrier across 8 SMs and one halo exchange), not bandwidth: 16 elements a thread.
#include <cooperative_groups.h>
#include <cstdint>
#include <cstring>
#include <functional>

#include "cuda_check.cuh"

namespace cg = cooperative_groups;

constexpr int THREADS = 256;
constexpr int CLUSTER = 8;                  // blocks per signal (8: the portable maximum cluster size)
constexpr int SEG = 4096;                   // floats per block
constexpr int PER_THREAD = SEG / THREADS;   // 16
constexpr int LEN = CLUSTER * SEG;          // 32,768 floats per signal
constexpr int SIGNALS = 128;
constexpr int STEPS = 1000;

__host__ __device__ inline float stencil(float l, float c, float r) { return fmaf(0.25f, l + r, 0.5f * c); }

// 1. One step: each block reads its segment and one value either side from global memory.
__global__ void step_global(const float* __restrict__ x, float* __restrict__ y) {
  int sig = blockIdx.x / CLUSTER, rank = blockIdx.x % CLUSTER;
  const float* s = x + (int64_t)sig * LEN;
  for (int k = 0; k < PER_THREAD; ++k) {
    int i = rank * SEG + k * THREADS + threadIdx.x;   // index in the signal: coalesced across the block
    float l = i > 0 ? s[i - 1] : 0.0f, r = i < LEN - 1 ? s[i + 1] : 0.0f;
    y[(int64_t)sig * LEN + i] = stencil(l, s[i], r);
  }
}

// The steps of one block inside a cluster, its segment double-buffered in shared memory. One cluster.sync() a
// step in both versions: after it, this step's values are complete everywhere, and each block fetches its two
// halo values for the next step, from global memory (DSMEM false) or from the neighbours' shared memory.
template <bool DSMEM>
__device__ void run_steps(const float* x, float* y, float* edges, int steps) {
  __shared__ float buf[2][SEG];
  cg::cluster_group cluster = cg::this_cluster();
  int rank = (int)cluster.block_rank(), sig = blockIdx.x / CLUSTER;
  // the global-exchange version's edge slots: [parity][rank][first, last] for this signal; a value for step s
  // lives in parity s % 2, so a fast block writing step s + 2's edges never overwrites ones still to be read
  float* slots = edges + (int64_t)sig * 2 * CLUSTER * 2;
  auto publish = [&](const float* v, int step) {   // the edges of v (this block's values at `step`)
    if (DSMEM) return;                              // DSMEM: the neighbours read them where they are
    float* slot = slots + (step & 1) * CLUSTER * 2;
    if (threadIdx.x == 0) slot[rank * 2] = v[0];                    // this thread computed v[0]...
    if (threadIdx.x == THREADS - 1) slot[rank * 2 + 1] = v[SEG - 1];  // ...and this one v[SEG - 1]
  };
  const float* s = x + (int64_t)sig * LEN + rank * SEG;
  for (int k = 0; k < PER_THREAD; ++k) buf[0][k * THREADS + threadIdx.x] = s[k * THREADS + threadIdx.x];
  publish(buf[0], 0);
  cluster.sync();
  for (int step = 0; step < steps; ++step) {
    float* cur = buf[step & 1];
    float* nxt = buf[(step + 1) & 1];
    float left = 0.0f, right = 0.0f;
    if (DSMEM) {   // an SM-to-SM load from the neighbour's shared memory
#ifdef INJECT_FAULT
      const int off = 1;   // the negative control: one element off
#else
      const int off = 0;
#endif
      if (threadIdx.x == 0 && rank > 0) left = cluster.map_shared_rank(cur, rank - 1)[SEG - 1 - off];
      if (threadIdx.x == THREADS - 1 && rank < CLUSTER - 1) right = cluster.map_shared_rank(cur, rank + 1)[off];
    } else {       // an L2 load of what the neighbour published (L1 is not coherent: __ldcg)
      const float* slot = slots + (step & 1) * CLUSTER * 2;
      if (threadIdx.x == 0 && rank > 0) left = __ldcg(slot + (rank - 1) * 2 + 1);
      if (threadIdx.x == THREADS - 1 && rank < CLUSTER - 1) right = __ldcg(slot + (rank + 1) * 2);
    }
    for (int k = 0; k < PER_THREAD; ++k) {
      int i = k * THREADS + threadIdx.x;
      float l = i > 0 ? cur[i - 1] : left, r = i < SEG - 1 ? cur[i + 1] : right;
      nxt[i] = stencil(l, cur[i], r);
    }
    publish(nxt, step + 1);
    cluster.sync();   // releases this step's values (and edges) at cluster scope; acquires the neighbours'
  }
  float* out = y + (int64_t)sig * LEN + rank * SEG;
  for (int k = 0; k < PER_THREAD; ++k) out[k * THREADS + threadIdx.x] = buf[steps & 1][k * THREADS + threadIdx.x];
}

// 2. Halos through global memory.
__global__ void __cluster_dims__(CLUSTER, 1, 1) cluster_global(const float* x, float* y, float* edges, int steps) {
  run_steps<false>(x, y, edges, steps);
}

// 3. Halos from the neighbours' shared memory.
__global__ void __cluster_dims__(CLUSTER, 1, 1) cluster_dsmem(const float* x, float* y, float* edges, int steps) {
  run_steps<true>(x, y, edges, steps);
}

int main() {
  print_device();
  const size_t n = (size_t)SIGNALS * LEN;
  std::vector<float> hx(n);
  fill_random(hx, 11);
  float *x, *a, *b, *edges;
  CUDA_CHECK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&a, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&edges, (size_t)SIGNALS * 2 * CLUSTER * 2 * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const unsigned blocks = SIGNALS * CLUSTER;

  // Version 1 leaves its answer in a or b by the parity of STEPS; `result` says where each version's is.
  float* result1 = (STEPS % 2) ? a : b;
  auto run1 = [&] {
    const float* in = x;
    for (int s = 0; s < STEPS; ++s) {
      float* out = (s % 2) ? b : a;
      step_global<<<blocks, THREADS>>>(in, out);
      in = out;
    }
  };
  auto run2 = [&] { cluster_global<<<blocks, THREADS>>>(x, a, edges, STEPS); };
  auto run3 = [&] { cluster_dsmem<<<blocks, THREADS>>>(x, a, edges, STEPS); };
  struct Version { const char* name; std::function<void()> run; float* result; };
  const Version versions[] = {{"1. a kernel per step", run1, result1},
                              {"2. cluster, global exchange", run2, a},
                              {"3. cluster, DSMEM exchange", run3, a}};

  // The CPU's answer for the first 4 signals, step by step with the same fmaf.
  const int checked = 4;
  std::vector<float> ref(hx.begin(), hx.begin() + (size_t)checked * LEN), tmp(ref.size());
  for (int s = 0; s < STEPS; ++s) {
    for (int g = 0; g < checked; ++g)
      for (int i = 0; i < LEN; ++i) {
        const float* v = ref.data() + (size_t)g * LEN;
        tmp[(size_t)g * LEN + i] = stencil(i > 0 ? v[i - 1] : 0.0f, v[i], i < LEN - 1 ? v[i + 1] : 0.0f);
      }
    ref.swap(tmp);
  }
  bool ok = true;
  std::vector<float> first(n), got(n);
  for (int v = 0; v < 3; ++v) {
    CUDA_CHECK(cudaMemset(a, 0xFF, n * sizeof(float)));  // NaNs: an unwritten element fails
    CUDA_CHECK(cudaMemset(b, 0xFF, n * sizeof(float)));
    versions[v].run();
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(got.data(), versions[v].result, n * sizeof(float), cudaMemcpyDeviceToHost));
    if (v == 0) first = got;
    bool cpu_same = std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)) == 0;
    bool v1_same = std::memcmp(got.data(), first.data(), n * sizeof(float)) == 0;
    bool pass = cpu_same && v1_same;
    std::printf("check %-30s %s the CPU on %d signals, %s version 1  %s\n", versions[v].name,
                cpu_same ? "equal to" : "DIFFERS from", checked, v1_same ? "equal to" : "DIFFERS from",
                pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  }
  if (!ok) {
    std::printf("FAIL\n");
    return 1;
  }
  std::printf("\n%-30s %9s %10s %9s\n", "version", "ms", "µs/step", "speedup");
  float first_ms = 0.0f;
  for (const auto& v : versions) {
    float ms = median_ms(v.run, 2, 15, false);  // the signals live in L2 or shared memory: no scrub
    if (first_ms == 0.0f) first_ms = ms;
    std::printf("%-30s %9.3f %10.2f %8.2fx\n", v.name, ms, ms * 1e3 / STEPS, first_ms / ms);
  }
  for (float* p : {x, a, b, edges}) CUDA_CHECK(cudaFree(p));
  std::printf("PASS\n");
  return 0;
}
