// launch_bounds_chase_demo.cu: the other side of launch_bounds_demo.cu, a kernel where capping
// registers with __launch_bounds__ pays.
//
// Each thread follows a chain of dependent loads (the next address is known only when the last load
// returns: the shape of tree traversal, graph walks, hash-chain probes) and folds every value it
// reads into STATE running sums that stay live for the whole walk (a ray tracer's ray and stack, a
// walker's features). One thread has one load in flight at a time, so an SM hides DRAM latency only
// with many resident warps: throughput is resident chains / latency (Little's law), not bytes / copy
// rate. Compiled freely (CUDA 13.0, sm_90), the 124 sums and the loop's addresses take 134 registers,
// so only one 256-thread block fits in an SM's 64K registers (8 warps of 64, 12.5% occupancy).
//
//   1. no __launch_bounds__          the compiler's choice: all state in registers, 1 block per SM
//   2. __launch_bounds__(256, 2)     at most 128 registers: 40 bytes per thread spilled to local
//                                    memory, 2 blocks per SM, twice the chains in flight
//   3. __launch_bounds__(256, 3)     at most 80: 296 bytes spilled, 3 blocks per SM
//   4. __launch_bounds__(256, 4)     at most 64: 360 bytes spilled, 4 blocks per SM
//
// Measured on an H100 (profiles/h100/ch1-launch-bounds/): the first cap pays, 1.08x (1.008 -> 0.936
// ms; ncu: achieved occupancy 12.2% -> 23.3%, 1.02 -> 0.919 ms), and no more than that because the
// uncapped kernel already keeps L2 at 74% of its peak (each 8-byte read moves a 32-byte sector) and
// the capped one at 96%: the extra chains find the next limit. Caps 3 and 4 spill state the loop
// touches every step; the spill traffic takes L2 and DRAM, and they run at 0.28x and 0.13x.
// launch_bounds_demo.cu is the case where the kernel already has 72 independent loads in flight per
// thread at 12.5% occupancy and every cap loses. Bound: latency (a dependent chain per thread) until
// enough chains are in flight, then L2 throughput: 8 bytes per step.
//
// Build: make -C ch1 launch_bounds_chase_demo   (-Xptxas -v prints registers and spill bytes per kernel)
// Prints, per version: registers, local memory per thread, resident blocks per SM, theoretical
// occupancy, ms, steps per microsecond and speedup; exits 1 if any version disagrees with the CPU.
// Achieved occupancy and local-memory traffic need Nsight Compute (ch1/README.md gives the command).
#include <cstdint>
#include <numeric>

#include "cuda_check.cuh"

constexpr int THREADS = 256;
constexpr int STATE = 124;           // live running sums per thread: the free kernel needs just over 128 registers
constexpr int STEPS = 32;            // dependent loads per walker
constexpr int64_t WALKERS = 1 << 20;  // one thread each
constexpr int64_t NODES = 1 << 24;    // 16M nodes x 8 bytes = 128 MB, 2.5x the H100's L2: every step misses L2

struct Node {
  int next;   // a single random cycle through all nodes (Sattolo's algorithm)
  float val;  // in [0, 1)
};

// Decay of sum j: distinct per sum, so no two sums can be merged; all below 1, so the sums stay bounded.
__host__ __device__ constexpr float decay(int j) { return 0.5f + j / 512.0f; }

__device__ __forceinline__ void walk(const Node* __restrict__ nodes, float* __restrict__ out, int64_t w) {
  float s[STATE];
#pragma unroll
  for (int j = 0; j < STATE; ++j) s[j] = 0.0f;
  int i = (int)((w * 2654435761ll) & (NODES - 1));  // a scattered start per walker
  for (int k = 0; k < STEPS; ++k) {
    const Node n = nodes[i];  // the one load in flight: its address came from the previous one
    i = n.next;
#pragma unroll
    for (int j = 0; j < STATE; ++j) s[j] = fmaf(s[j], decay(j), n.val);
  }
  float total = 0.0f;
#pragma unroll
  for (int j = 0; j < STATE; ++j) total += s[j];
  out[w] = total;
}

__global__ void chase_free(const Node* __restrict__ nodes, float* __restrict__ out) {
  const int64_t w = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (w < WALKERS) walk(nodes, out, w);
}

template <int MIN_BLOCKS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) chase_capped(const Node* __restrict__ nodes, float* __restrict__ out) {
  const int64_t w = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (w < WALKERS) walk(nodes, out, w);
}

// The same walk on the CPU, in float with the same fmaf order, for every 1021st walker.
float walk_reference(const std::vector<Node>& nodes, int64_t w) {
  std::vector<float> s(STATE, 0.0f);
  int i = (int)((w * 2654435761ll) & (NODES - 1));
  for (int k = 0; k < STEPS; ++k) {
    const Node n = nodes[i];
    i = n.next;
    for (int j = 0; j < STATE; ++j) s[j] = std::fmaf(s[j], decay(j), n.val);
  }
  float total = 0.0f;
  for (int j = 0; j < STATE; ++j) total += s[j];
  return total;
}

int main() {
  print_device();
  std::printf("%lld walkers x %d dependent loads over %lld MB of nodes; %d running sums per walker\n\n",
              (long long)WALKERS, STEPS, (long long)(NODES * sizeof(Node) >> 20), STATE);

  std::vector<Node> h(NODES);
  std::vector<int> perm(NODES);
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t r = 12345;
  for (int64_t k = NODES - 1; k > 0; --k) {  // Sattolo: a uniformly random single cycle
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(perm[k], perm[(r >> 33) % k]);
  }
  std::vector<float> vals(NODES);
  fill_random(vals, 7);
  for (int64_t k = 0; k < NODES; ++k) h[k] = {perm[k], 0.5f * (vals[k] + 1.0f)};

  Node* nodes;
  float* out;
  CUDA_CHECK(cudaMalloc(&nodes, NODES * sizeof(Node)));
  CUDA_CHECK(cudaMalloc(&out, WALKERS * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(nodes, h.data(), NODES * sizeof(Node), cudaMemcpyHostToDevice));

  struct Version { const char* name; const void* kernel; void (*launch)(const Node*, float*); };
  const unsigned grid = (unsigned)((WALKERS + THREADS - 1) / THREADS);
  static unsigned g;  // captured by the launch functions below
  g = grid;
  const Version versions[] = {
      {"1 no __launch_bounds__", (const void*)chase_free, [](const Node* n, float* o) { chase_free<<<g, THREADS>>>(n, o); }},
      {"2 __launch_bounds__(256, 2)", (const void*)chase_capped<2>,
       [](const Node* n, float* o) { chase_capped<2><<<g, THREADS>>>(n, o); }},
      {"3 __launch_bounds__(256, 3)", (const void*)chase_capped<3>,
       [](const Node* n, float* o) { chase_capped<3><<<g, THREADS>>>(n, o); }},
      {"4 __launch_bounds__(256, 4)", (const void*)chase_capped<4>,
       [](const Node* n, float* o) { chase_capped<4><<<g, THREADS>>>(n, o); }},
  };

  // Verify every version on a sample of walkers (the CPU walk of all 1M would take a while).
  std::vector<float> got(WALKERS), ref, sub;
  for (int64_t w = 0; w < WALKERS; w += 1021) ref.push_back(walk_reference(h, w));
  bool ok = true;
  for (const auto& v : versions) {
    CUDA_CHECK(cudaMemset(out, 0xFF, WALKERS * sizeof(float)));  // NaN poison: unwritten outputs fail
    v.launch(nodes, out);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(got.data(), out, WALKERS * sizeof(float), cudaMemcpyDeviceToHost));
    sub.clear();
    for (int64_t w = 0; w < WALKERS; w += 1021) sub.push_back(got[w]);
    bool all_written = std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); });
    double err = rel_error(sub.data(), ref.data(), ref.size());
    bool pass = all_written && err < 1e-6;  // the same float operations in the same order
    std::printf("verify %-30s rel err %.2e%s %s\n", v.name, err, all_written ? "" : ", unwritten outputs",
                pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  }
  if (!ok) {
    std::printf("FAIL\n");
    return 1;
  }

  int dev = 0, max_threads = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerMultiProcessor, dev));
  std::printf("\n%-30s %6s %14s %10s %10s %9s %12s %8s\n", "version", "regs", "local B/thread", "blocks/SM",
              "occupancy", "ms", "steps/us", "speedup");
  float base = 0.f;
  for (const auto& v : versions) {
    cudaFuncAttributes attr;
    int blocks = 0;
    CUDA_CHECK(cudaFuncGetAttributes(&attr, v.kernel));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, v.kernel, THREADS, 0));
    float ms = median_ms([&] { v.launch(nodes, out); CUDA_CHECK_LAUNCH(); }, 3, 30, true);
    if (base == 0.f) base = ms;
    std::printf("%-30s %6d %14zu %10d %9.1f%% %9.4f %12.0f %7.2fx\n", v.name, attr.numRegs, attr.localSizeBytes,
                blocks, 100.0 * blocks * THREADS / max_threads, ms, (double)WALKERS * STEPS / (ms * 1e3), base / ms);
  }
  CUDA_CHECK(cudaFree(nodes));
  CUDA_CHECK(cudaFree(out));
  std::printf("PASS\n");
  return 0;
}
