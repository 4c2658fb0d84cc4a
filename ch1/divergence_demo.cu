// divergence_demo.cu: warp divergence, and grouping work so that the 32 threads of a warp agree.
//
// Each of 8M elements takes one of two long computations, chosen by its key (a material, a particle type,
// a token's expert): path A is a chain of 1024 FMAs, path B a chain of 1024 multiply-then-FMA steps. A warp
// issues one instruction for all its 32 threads; when they disagree, it runs path A with the B threads
// masked off, then path B with the A threads masked off. With random keys nearly every warp holds both
// kinds, so it pays for A + B where each thread needed only one of them.
//
//   1. divergent               thread i computes element i, keys random: every warp runs both paths
//   2. grouped (list given)    the elements in an order where all A come first, then all B (an index list,
//                              made before the call: the work arrived grouped, e.g. sorted upstream); thread
//                              j computes element idx[j]: warps agree, except the one warp at the boundary
//   3. grouped, list per call  2 with the list built inside the timed call by cub::DevicePartition::If: what
//                              grouping costs when it must be redone every call (the keys are the same each
//                              call here; their 32 MiB and the indices' 32 MiB do not fit the 50 MiB L2 together)
//
// The loads through idx are gathers and the stores scatters, but each element does about 1,600 instructions of
// work (Nsight Compute: 420M warp instructions for 8M elements, grouped) for 12 bytes, so the kernel stays bound
// by issue, not by memory. Nsight Compute's "average active threads per
// instruction" (smsp__thread_inst_executed_per_inst_executed.ratio, 32 at best) shows the divergence:
// ch1/README.md has the command.
//
// Build: make -C ch1 divergence_demo
// Prints, per version: ms, speedup over version 1, and Gelem/s; exits 1 if any version disagrees with the
// CPU (every 101st element, computed with the same fmaf steps) or with version 1 anywhere. Built with
// -DINJECT_FAULT, one element of version 3 is off by one ulp, and the run must say MISMATCH and FAIL.
// Bound: compute (fp32 issue): 8M x (1024 + 2048) / 2 instructions a thread on average, without divergence.
#include <cub/device/device_partition.cuh>
#include <functional>

#include "cuda_check.cuh"

constexpr int THREADS = 256;
constexpr int N = 1 << 23;
constexpr int STEPS = 1024;

// Path A: y = 0.999 y + 0.0005 x, 1024 times. Path B: y = (y y + x) / 2, 1024 times. Both stay in [-1, 1.5].
__host__ __device__ inline float path_a(float x) {
  float y = x;
  for (int s = 0; s < STEPS; ++s) y = fmaf(y, 0.999f, 0.0005f * x);
  return y;
}
__host__ __device__ inline float path_b(float x) {
  float y = x;
  for (int s = 0; s < STEPS; ++s) y = 0.5f * fmaf(y, y, x);
  return y;
}
__host__ __device__ inline float work(float x, int key) { return (key & 1) ? path_b(x) : path_a(x); }

// 1. Element i on thread i.
__global__ void divergent(const float* __restrict__ x, const int* __restrict__ key, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = work(x[i], key[i]);
}

// 2 and 3. Element idx[j] on thread j: the list puts every A before every B.
__global__ void grouped(const float* __restrict__ x, const int* __restrict__ key, const int* __restrict__ idx,
                        float* __restrict__ out, int n) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < n) {
    int e = idx[j];
    out[e] = work(x[e], key[e]);
  }
}

struct IsPathA {
  const int* key;
  __device__ bool operator()(int e) const { return (key[e] & 1) == 0; }
};

int main() {
  print_device();
  std::vector<float> hx(N);
  fill_random(hx, 3);
  std::vector<int> hkey(N), hiota(N);
  unsigned s = 12345u;
  for (int i = 0; i < N; ++i) {
    s = s * 1664525u + 1013904223u;
    hkey[i] = (int)(s >> 16) & 1;  // A or B, at random
    hiota[i] = i;
  }
  float *x, *out;
  int *key, *iota, *idx, *num_a;
  CUDA_CHECK(cudaMalloc(&x, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&out, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&key, N * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&iota, N * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&idx, N * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&num_a, sizeof(int)));
  CUDA_CHECK(cudaMemcpy(x, hx.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(key, hkey.data(), N * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(iota, hiota.data(), N * sizeof(int), cudaMemcpyHostToDevice));

  // cub's partition: the A elements' indices first (in order), the B elements' after them; scratch once.
  size_t temp_bytes = 0;
  void* temp = nullptr;
  CUDA_CHECK(cub::DevicePartition::If(temp, temp_bytes, iota, idx, num_a, N, IsPathA{key}));
  CUDA_CHECK(cudaMalloc(&temp, temp_bytes));
  auto partition = [&] { CUDA_CHECK(cub::DevicePartition::If(temp, temp_bytes, iota, idx, num_a, N, IsPathA{key})); };
  partition();  // the list version 2 is given

  const unsigned blocks = (N + THREADS - 1) / THREADS;
  auto run_divergent = [&] { divergent<<<blocks, THREADS>>>(x, key, out, N); };
  auto run_grouped = [&] { grouped<<<blocks, THREADS>>>(x, key, idx, out, N); };
  auto run_grouped_per_call = [&] { partition(); grouped<<<blocks, THREADS>>>(x, key, idx, out, N); };
  struct Version { const char* name; std::function<void()> run; };
  const Version versions[] = {{"1. divergent", run_divergent},
                              {"2. grouped (list given)", run_grouped},
                              {"3. grouped, list per call", run_grouped_per_call}};

  // Verify every version before timing any: against the CPU on a sample, and against version 1 everywhere.
  bool ok = true;
  std::vector<float> first(N), got(N);
  for (int v = 0; v < 3; ++v) {
    CUDA_CHECK(cudaMemset(out, 0xFF, N * sizeof(float)));  // NaNs: an unwritten element fails
    versions[v].run();
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(got.data(), out, N * sizeof(float), cudaMemcpyDeviceToHost));
    if (v == 0) first = got;
#ifdef INJECT_FAULT  // the check's negative control: nvcc -DINJECT_FAULT moves one element of version 3 by one ulp
    if (v == 2) got[N / 2 + 1] = std::nextafter(got[N / 2 + 1], INFINITY);
#endif
    double worst = 0.0;
    for (int i = 0; i < N; i += 101) {
      double ref = work(hx[i], hkey[i]);
      worst = std::max(worst, std::fabs(got[i] - ref) / std::max(std::fabs(ref), 1e-6));
    }
    size_t differ = 0;
    for (int i = 0; i < N; ++i) differ += !(got[i] == first[i]);  // NaN != NaN counts too
    bool pass = worst < 1e-5 && differ == 0;
    std::printf("check %-28s worst rel. error vs CPU %.1e, %zu elements differ from version 1  %s\n",
                versions[v].name, worst, differ, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  }
  if (!ok) {
    std::printf("FAIL\n");
    return 1;
  }

  std::printf("\n%-28s %9s %9s %9s\n", "version", "ms", "speedup", "Gelem/s");
  float first_ms = 0.0f;
  for (const auto& v : versions) {
    float ms = median_ms(v.run, 3, 30, false);  // compute-bound: no L2 scrub needed
    if (first_ms == 0.0f) first_ms = ms;
    std::printf("%-28s %9.3f %8.2fx %9.2f\n", v.name, ms, first_ms / ms, N / (ms * 1e-3) / 1e9);
  }
  float part_ms = median_ms(partition, 3, 30, false);
  std::printf("%-28s %9.3f   (the partition alone)\n", "cub::DevicePartition::If", part_ms);
  for (void* p : {(void*)x, (void*)out, (void*)key, (void*)iota, (void*)idx, (void*)num_a, temp}) CUDA_CHECK(cudaFree(p));
  std::printf("PASS\n");
  return 0;
}
