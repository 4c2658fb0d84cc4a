// basic_streams.cu: overlap host-to-device copies, kernels and device-to-host copies with streams.
//
//   1. serial        one stream: for each chunk, copy in, compute, copy out (events between stages
//                    measure each stage)
//   2. N streams     the same chunks round-robin over N = 2..8 streams; H100's copy engines move data
//                    both ways while the SMs compute another chunk
//   3. priorities    a latency-critical small kernel launched while a bulk job occupies the GPU: on a
//                    stream of the same priority it queues behind the bulk blocks; on a high-priority
//                    stream the block scheduler starts it as soon as SM slots free up
//
// Achieved overlap = (serial - t) / (serial - ideal), with ideal = chunks x the longest stage + the
// other stages of one chunk (fill and drain). Everything runs over pinned host memory.
//
// Build: make -C ch11    Prints: a table of ms, speedup and overlap per stream count, then the
// priority demo; verifies every output against a CPU reference and exits 1 on a mismatch.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda_check.cuh"

constexpr int CHUNKS = 16;
constexpr size_t CHUNK = (size_t)4 << 20;  // 4M floats, 16 MiB per chunk
constexpr size_t N = CHUNKS * CHUNK;
constexpr int ITERS = 2160;  // arithmetic per element: sized so compute takes about as long as a copy

__host__ __device__ inline float work(float x) {
  float y = x;
  for (int i = 0; i < ITERS; ++i) y = y * 0.999f + 0.001f * x * x;  // bounded, input-dependent
  return y;
}

__global__ void compute(const float* __restrict__ in, float* __restrict__ out, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = work(in[i]);
}

__global__ void spin(float* p, int iters) {  // the bulk job of the priority demo: long-running blocks
  float v = p[threadIdx.x];
  for (int i = 0; i < iters; ++i) v = v * 0.9999f + 0.0001f;
  p[threadIdx.x] = v;
}

__global__ void urgent(float* p) { p[threadIdx.x] += 1.0f; }

void launch_chunk(const float* h_in, float* h_out, float* d_in, float* d_out, int c, cudaStream_t s) {
  size_t off = (size_t)c * CHUNK;
  CUDA_CHECK(cudaMemcpyAsync(d_in + off, h_in + off, CHUNK * sizeof(float), cudaMemcpyHostToDevice, s));
  compute<<<(unsigned)((CHUNK + 255) / 256), 256, 0, s>>>(d_in + off, d_out + off, CHUNK);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpyAsync(h_out + off, d_out + off, CHUNK * sizeof(float), cudaMemcpyDeviceToHost, s));
}

float run_streams(int nstreams, const float* h_in, float* h_out, float* d_in, float* d_out) {
  std::vector<cudaStream_t> streams(nstreams);
  for (auto& s : streams) CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {  // best of 5: the first pays for the streams' first use
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventRecord(start, streams[0]));
    for (int s = 1; s < nstreams; ++s) CUDA_CHECK(cudaStreamWaitEvent(streams[s], start));
    for (int c = 0; c < CHUNKS; ++c) launch_chunk(h_in, h_out, d_in, d_out, c, streams[c % nstreams]);
    for (int s = 1; s < nstreams; ++s) {  // join every stream into streams[0] before the stop event
      cudaEvent_t done;
      CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventRecord(done, streams[s]));
      CUDA_CHECK(cudaStreamWaitEvent(streams[0], done));
      CUDA_CHECK(cudaEventDestroy(done));
    }
    CUDA_CHECK(cudaEventRecord(stop, streams[0]));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, ms);
  }
  for (auto& s : streams) CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return best;
}

// Per-stage times of one chunk, each stage alone, from events between the stages.
void stage_times(const float* h_in, float* h_out, float* d_in, float* d_out, float ms[3]) {
  cudaEvent_t ev[4];
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  ms[0] = ms[1] = ms[2] = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CUDA_CHECK(cudaEventRecord(ev[0]));
    CUDA_CHECK(cudaMemcpyAsync(d_in, h_in, CHUNK * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaEventRecord(ev[1]));
    compute<<<(unsigned)((CHUNK + 255) / 256), 256>>>(d_in, d_out, CHUNK);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaEventRecord(ev[2]));
    CUDA_CHECK(cudaMemcpyAsync(h_out, d_out, CHUNK * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaEventRecord(ev[3]));
    CUDA_CHECK(cudaEventSynchronize(ev[3]));
    for (int k = 0; k < 3; ++k) {
      float t;
      CUDA_CHECK(cudaEventElapsedTime(&t, ev[k], ev[k + 1]));
      ms[k] = std::min(ms[k], t);
    }
  }
  for (auto& e : ev) CUDA_CHECK(cudaEventDestroy(e));
}

// Latency of one tiny kernel launched while `spin` blocks fill every SM, on a stream of the given priority.
float urgent_latency_ms(int priority, float* d_bulk, float* d_small, int sms) {
  cudaStream_t bulk, fast;
  int lo, hi;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));  // lo = least urgent, hi = most urgent
  CUDA_CHECK(cudaStreamCreateWithPriority(&bulk, cudaStreamNonBlocking, lo));
  CUDA_CHECK(cudaStreamCreateWithPriority(&fast, cudaStreamNonBlocking, priority ? hi : lo));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  // Many waves of long blocks: far more blocks than fit at once, so the queue stays full.
  spin<<<sms * 64, 1024, 0, bulk>>>(d_bulk, 20000);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaEventRecord(a, fast));
  urgent<<<1, 32, 0, fast>>>(d_small);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaEventRecord(b, fast));
  CUDA_CHECK(cudaDeviceSynchronize());
  float ms;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  CUDA_CHECK(cudaStreamDestroy(bulk));
  CUDA_CHECK(cudaStreamDestroy(fast));
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  return ms;
}

int main() {
  print_device();
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  float *h_in, *h_out, *d_in, *d_out;
  CUDA_CHECK(cudaMallocHost(&h_in, N * sizeof(float)));  // pinned: copies are DMA, asynchronous
  CUDA_CHECK(cudaMallocHost(&h_out, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_in, N * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, N * sizeof(float)));
  {
    std::vector<float> tmp(N);
    fill_random(tmp, 3);
    std::copy(tmp.begin(), tmp.end(), h_in);
  }
  // CPU reference on every 61st element (all 64M would take the CPU minutes at this arithmetic);
  // the multi-stream runs are then compared with the serial run on every element.
  constexpr size_t STRIDE = 61;
  std::vector<float> ref_sample, out_sample, serial_out(N);
  for (size_t i = 0; i < N; i += STRIDE) ref_sample.push_back(work(h_in[i]));

  float st[3];
  stage_times(h_in, h_out, d_in, d_out, st);
  float total = st[0] + st[1] + st[2], longest = std::max(st[0], std::max(st[1], st[2]));
  float serial_sum = CHUNKS * total, ideal = (CHUNKS - 1) * longest + total;
  std::printf("per chunk (16 MiB): copy in %.3f ms, compute %.3f ms, copy out %.3f ms\n", st[0], st[1], st[2]);
  std::printf("%d chunks: sum of stages %.3f ms, ideal pipelined %.3f ms\n\n", CHUNKS, serial_sum, ideal);

  std::printf("%-10s %9s %9s %14s %s\n", "streams", "ms", "speedup", "overlap", "verified");
  float serial = 0.f;
  bool ok = true;
  for (int n : {1, 2, 3, 4, 8}) {
    std::fill(h_out, h_out + N, std::nanf(""));  // poison: unwritten output fails
    float ms = run_streams(n, h_in, h_out, d_in, d_out);
    double err;
    if (n == 1) {
      out_sample.clear();
      for (size_t i = 0; i < N; i += STRIDE) out_sample.push_back(h_out[i]);
      err = rel_error(out_sample.data(), ref_sample.data(), ref_sample.size());  // vs the CPU
      std::copy(h_out, h_out + N, serial_out.begin());
    } else {
      err = rel_error(h_out, serial_out.data(), N);  // every element vs the serial GPU run
    }
    // vs the CPU: 2160 dependent steps, fused multiply-adds on the GPU but not on the host, so
    // rounding differs by more than one step's worth; vs the serial run: bit for bit.
    bool pass = n == 1 ? err < 1e-4 : err == 0.0;
    ok = ok && pass;
    if (n == 1) serial = ms;
    double overlap = 100.0 * (serial - ms) / (serial - ideal);
    std::printf("%-10d %9.3f %8.2fx %13.0f%% %s (rel err %.1e)\n", n, ms, serial / ms, overlap, pass ? "ok" : "MISMATCH", err);
  }

  float *d_bulk, *d_small;
  CUDA_CHECK(cudaMalloc(&d_bulk, 1024 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_small, 32 * sizeof(float)));
  CUDA_CHECK(cudaMemset(d_bulk, 0, 1024 * sizeof(float)));
  CUDA_CHECK(cudaMemset(d_small, 0, 32 * sizeof(float)));
  urgent_latency_ms(0, d_bulk, d_small, sms);  // warm-up
  float same = urgent_latency_ms(0, d_bulk, d_small, sms);
  float high = urgent_latency_ms(1, d_bulk, d_small, sms);
  float small_out[32];
  CUDA_CHECK(cudaMemcpy(small_out, d_small, sizeof(small_out), cudaMemcpyDeviceToHost));
  bool prio_ok = small_out[0] == 3.0f;  // three urgent launches, each adds 1
  ok = ok && prio_ok;
  std::printf("\nstream priority: a 32-thread kernel launched behind a %d-block bulk job\n", sms * 64);
  std::printf("  same priority: %.3f ms to finish; high priority: %.3f ms (%.0fx sooner) %s\n", same, high,
              same / high, prio_ok ? "ok" : "MISMATCH");

  for (void* p : {(void*)d_in, (void*)d_out, (void*)d_bulk, (void*)d_small}) CUDA_CHECK(cudaFree(p));
  CUDA_CHECK(cudaFreeHost(h_in));
  CUDA_CHECK(cudaFreeHost(h_out));
  std::printf(ok ? "PASS\n" : "FAIL\n");
  return ok ? 0 : 1;
}
