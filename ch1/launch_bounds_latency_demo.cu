// launch_bounds_latency_demo.cu: the other side of launch_bounds_demo.cu, a kernel where capping
// registers with __launch_bounds__ pays.
//
// Each thread loads PAYLOAD values and starts a long dependent chain of FMAs from their sum (Horner's
// rule: every step needs the last one's result); only at the end does it fold the payload into its
// output (a ray's payload carried through traversal, a walker's state through its steps). Hopper
// issues one instruction per scheduler per cycle, but a dependent FMA waits about 4 cycles for the
// one before: a scheduler is busy only if it has about 4 warps with an FMA ready. The payload stays live across the chain,
// so compiled freely (CUDA 13.0, sm_90) the kernel takes 137 registers: one 256-thread block per SM,
// 8 warps for 4 schedulers, 2 each, and the schedulers sit idle about half the time.
//
//   1. no __launch_bounds__          all of the payload in registers; 1 block per SM (12.5% occupancy)
//   2. __launch_bounds__(256, 2)     at most 128 registers: 32 bytes of payload go to local memory,
//                                    written before the chain and read after it (L1 hits);
//                                    2 blocks per SM, 4 warps per scheduler: the latency is hidden
//   3. __launch_bounds__(256, 4)     at most 64: 368 bytes spilled, still outside the chain
//   4. __launch_bounds__(256, 8)     at most 32: full occupancy, 560 bytes spilled
//
// The cap pays where the latency the extra warps hide is what the kernel waits on, and the spill is
// small and off the hot loop. launch_bounds_demo.cu is the opposite case: 72 independent loads per
// thread already keep memory busy at 12.5% occupancy, and every spilled byte is traffic it pays for.
// A first try at this sample (a dependent chain of loads through 128 MB, commit 6ef85f4) gained only
// 1.08x from the first cap: 34K chains in flight at 12.5% occupancy already came close to DRAM's rate
// for random 8-byte reads (profiles/h100/ch1-launch-bounds/).
//
// Bound: FMA latency (DEGREE dependent FMAs per thread), not throughput; 500 bytes in, 4 out per thread.
// Build: make -C ch1 launch_bounds_latency_demo   (-Xptxas -v prints registers and spill bytes per kernel)
// Prints, per version: registers, local memory per thread, resident blocks per SM, theoretical
// occupancy, ms, chain FMAs per ns, and speedup; exits 1 if any version's output differs from the CPU's.
// Achieved occupancy and issue-slot use need Nsight Compute (ch1/README.md gives the command).
#include <cstdint>

#include "cuda_check.cuh"

constexpr int THREADS = 256;
constexpr int PAYLOAD = 124;           // values live across the chain: the free kernel needs just over 128 registers
constexpr int DEGREE = 16384;          // dependent FMAs per thread
constexpr int64_t N = (int64_t)1 << 20;  // threads, one output each
constexpr float COEFF = 1.0f / 1024;   // Horner coefficient (|x| <= 0.5, so the value stays bounded)

__device__ __forceinline__ void evaluate(const float* __restrict__ xs, const float* __restrict__ payload,
                                         float* __restrict__ out, int64_t n) {
  const float x = xs[n];
  float q[PAYLOAD], p = 0.0f;
#pragma unroll
  for (int j = 0; j < PAYLOAD; ++j) {
    q[j] = payload[j * N + n];  // coalesced: value j of every thread is contiguous
    p += q[j];                  // the chain starts from all of them, so all are loaded before it
  }
#pragma unroll 32
  for (int k = 0; k < DEGREE; ++k) p = fmaf(p, x, COEFF);  // the long dependent chain
  float total = 0.0f;
#pragma unroll
  for (int j = 0; j < PAYLOAD; ++j) total = fmaf(q[j], p, total);  // the payload is used again only now
  out[n] = total;
}

__global__ void horner_free(const float* __restrict__ xs, const float* __restrict__ payload, float* __restrict__ out) {
  const int64_t n = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (n < N) evaluate(xs, payload, out, n);
}

template <int MIN_BLOCKS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    horner_capped(const float* __restrict__ xs, const float* __restrict__ payload, float* __restrict__ out) {
  const int64_t n = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (n < N) evaluate(xs, payload, out, n);
}

// The same arithmetic on the CPU (std::fmaf rounds once, like the GPU's FFMA): results match bit for bit.
float evaluate_reference(const std::vector<float>& hx, const std::vector<float>& hq, int64_t n) {
  const float x = hx[n];
  float q[PAYLOAD], p = 0.0f;
  for (int j = 0; j < PAYLOAD; ++j) {
    q[j] = hq[j * N + n];
    p += q[j];
  }
  for (int k = 0; k < DEGREE; ++k) p = std::fmaf(p, x, COEFF);
  float total = 0.0f;
  for (int j = 0; j < PAYLOAD; ++j) total = std::fmaf(q[j], p, total);
  return total;
}

int main() {
  print_device();
  std::printf("%lld threads x %d dependent FMAs, each holding %d values across them\n\n", (long long)N, DEGREE,
              PAYLOAD);
  std::vector<float> hx(N), hq(PAYLOAD * N), got(N);
  fill_random(hx, 21);
  fill_random(hq, 22);
  for (auto& v : hx) v *= 0.5f;  // |x| <= 0.5

  float *xs, *payload, *out;
  CUDA_CHECK(cudaMalloc(&xs, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&payload, hq.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&out, N * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(xs, hx.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(payload, hq.data(), hq.size() * sizeof(float), cudaMemcpyHostToDevice));

  const unsigned grid = (unsigned)((N + THREADS - 1) / THREADS);
  struct Version { const char* name; const void* kernel; };
  const Version versions[] = {{"1 no __launch_bounds__", (const void*)horner_free},
                              {"2 __launch_bounds__(256, 2)", (const void*)horner_capped<2>},
                              {"3 __launch_bounds__(256, 4)", (const void*)horner_capped<4>},
                              {"4 __launch_bounds__(256, 8)", (const void*)horner_capped<8>}};
  auto launch = [&](const void* kernel) {
    void* args[] = {&xs, &payload, &out};
    CUDA_CHECK(cudaLaunchKernel(kernel, grid, THREADS, args, 0, 0));
  };

  // Verify every version on every 997th thread (the CPU's 16384-step chains for all 1M would take minutes).
  std::vector<float> ref, sub;
  for (int64_t n = 0; n < N; n += 997) ref.push_back(evaluate_reference(hx, hq, n));
  bool ok = true;
  for (const auto& v : versions) {
    CUDA_CHECK(cudaMemset(out, 0xFF, N * sizeof(float)));  // NaN poison: unwritten outputs fail
    launch(v.kernel);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(got.data(), out, N * sizeof(float), cudaMemcpyDeviceToHost));
    sub.clear();
    for (int64_t n = 0; n < N; n += 997) sub.push_back(got[n]);
    const bool all_written = std::all_of(got.begin(), got.end(), [](float v) { return std::isfinite(v); });
    const double err = rel_error(sub.data(), ref.data(), ref.size());
    const bool pass = all_written && err < 1e-6;  // the same roundings in the same order
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
              "occupancy", "ms", "FMA/ns", "speedup");
  float base = 0.f;
  for (const auto& v : versions) {
    cudaFuncAttributes attr;
    int blocks = 0;
    CUDA_CHECK(cudaFuncGetAttributes(&attr, v.kernel));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, v.kernel, THREADS, 0));
    const float ms = median_ms([&] { launch(v.kernel); }, 3, 30, false);  // 12 bytes per thread: no L2 to scrub
    if (base == 0.f) base = ms;
    std::printf("%-30s %6d %14zu %10d %9.1f%% %9.4f %12.0f %7.2fx\n", v.name, attr.numRegs, attr.localSizeBytes,
                blocks, 100.0 * blocks * THREADS / max_threads, ms, (double)N * DEGREE / (ms * 1e6), base / ms);
  }
  for (void* p : {(void*)xs, (void*)payload, (void*)out}) CUDA_CHECK(cudaFree(p));
  std::printf("PASS\n");
  return 0;
}
