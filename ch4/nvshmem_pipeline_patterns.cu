// nvshmem_pipeline_patterns.cu: two patterns GPUs use to hand work to each other without the host,
// on NVSHMEM's one-sided operations, each checked against the answer computed on the CPU.
//
// 1. A lock-free bounded queue on NVSHMEM atomics. PE 0 owns a ring of CAPACITY slots; every other
//    PE produces items into it from many GPU threads at once:
//        pos = atomic_fetch_inc(tail on PE 0)            reserve a position (no lock)
//        wait until seq[pos % CAPACITY] == pos           the slot is free for this lap
//        put the item, fence, atomic_set(seq, pos + 1)   publish it (the fence orders the two)
//    PE 0's consumer takes positions in order, waits for seq == pos + 1, reads the item and frees the
//    slot for the next lap (seq = pos + CAPACITY). The ring is far smaller than the item count, so
//    every slot is reused many times. Check: every item arrives exactly once.
// 2. A put-with-signal pipeline, single- then double-buffered. PE 2k streams CHUNKS chunks to PE 2k+1
//    over LANES independent lanes (one thread block each). Per chunk, the producer block fills a
//    staging buffer, then nvshmemx_putmem_signal_nbi_block writes it into the consumer's slot and sets
//    that slot's signal in the same operation; the consumer waits on the signal, consumes the chunk,
//    and signals the slot free again (nvshmemx_signal_op back to the producer). With 2 slots per lane
//    the producer fills and sends chunk j+1 while the consumer works on chunk j. Check: the
//    consumer's output equals the producer's function of (chunk, index) everywhere.
//
// Build: make -C ch4 nvshmem (NVSHMEM from the CUDA toolkit or pip install nvidia-nvshmem-cu13), or
//   NV=$(python -c "import nvidia.nvshmem, os; print(list(nvidia.nvshmem.__path__)[0])")
//   nvcc -std=c++17 -O3 -rdc=true -arch=sm_90 -I../common/cuda -I$NV/include nvshmem_pipeline_patterns.cu \
//        -o nvshmem_pipeline_patterns -L$NV/lib -Xlinker -rpath=$NV/lib -l:libnvshmem_host.so.3 -lnvshmem_device -lcuda
// Run (2 GPUs; multicast off): scripts/nvshmem_launch_multinode.sh 1 2 ch4/bin/nvshmem_pipeline_patterns_sm90
// Prints each pattern's time and rate, then PASS or FAIL; exits non-zero on a wrong result.
#include <nvshmem.h>
#include <nvshmemx.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_check.cuh"
#include "nvshmem_launched.cuh"

// ------------------------------------------------------------------------------------------ queue
constexpr int CAPACITY = 256;                 // slots in the ring on PE 0
constexpr int PRODUCER_BLOCKS = 4, PRODUCER_THREADS = 128, ITEMS_PER_THREAD = 64;

struct Queue {                                // every field is symmetric; only PE 0's copy is used
  unsigned long long* tail;                   // next position to reserve
  unsigned long long* seq;                    // per slot: pos when free for pos, pos + 1 when it holds pos
  long long* items;                           // per slot: the item
};

__global__ void produce(Queue q, int producer, long long items_per_producer) {
  long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long k = t; k < items_per_producer; k += stride) {
    unsigned long long pos = nvshmem_ulonglong_atomic_fetch_inc(q.tail, 0);
    int slot = (int)(pos % CAPACITY);
    while (nvshmem_ulonglong_atomic_fetch(&q.seq[slot], 0) != pos) {
    }                                           // the consumer has not freed this slot for our lap yet
    nvshmem_longlong_p(&q.items[slot], (long long)producer * items_per_producer + k, 0);
    nvshmem_fence();                            // the item lands before the flag that publishes it
    nvshmem_ulonglong_atomic_set(&q.seq[slot], pos + 1, 0);
  }
}

// One thread: positions are consumed in order, which is what makes the ring a FIFO.
__global__ void consume(Queue q, long long total, unsigned* seen, long long n_items, unsigned* bad) {
  for (unsigned long long pos = 0; pos < (unsigned long long)total; ++pos) {
    int slot = (int)(pos % CAPACITY);
    nvshmem_ulonglong_wait_until(&q.seq[slot], NVSHMEM_CMP_EQ, pos + 1);
    long long item = ((volatile long long*)q.items)[slot];
    if (item < 0 || item >= n_items) atomicAdd(bad, 1u);
    else atomicAdd(&seen[item], 1u);
    nvshmem_ulonglong_atomic_set(&q.seq[slot], pos + CAPACITY, nvshmem_my_pe());  // free for the next lap
  }
}

static bool run_queue(int me, int npes) {
  Queue q;
  q.tail = (unsigned long long*)nvshmem_malloc(sizeof(unsigned long long));
  q.seq = (unsigned long long*)nvshmem_malloc(CAPACITY * sizeof(unsigned long long));
  q.items = (long long*)nvshmem_malloc(CAPACITY * sizeof(long long));
  std::vector<unsigned long long> seq0(CAPACITY);
  for (int s = 0; s < CAPACITY; ++s) seq0[s] = s;
  unsigned long long zero = 0;
  CUDA_CHECK(cudaMemcpy(q.tail, &zero, sizeof zero, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(q.seq, seq0.data(), CAPACITY * sizeof(unsigned long long), cudaMemcpyHostToDevice));
  const long long per_producer = (long long)PRODUCER_BLOCKS * PRODUCER_THREADS * ITEMS_PER_THREAD;
  const int producers = npes - 1;
  const long long total = per_producer * producers;
  unsigned *seen = nullptr, *bad = nullptr;
  if (me == 0) {
    CUDA_CHECK(cudaMalloc(&seen, total * sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(seen, 0, total * sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&bad, sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(bad, 0, sizeof(unsigned)));
  }
  nvshmem_barrier_all();
  cudaEvent_t t0, t1;
  CUDA_CHECK(cudaEventCreate(&t0));
  CUDA_CHECK(cudaEventCreate(&t1));
  CUDA_CHECK(cudaEventRecord(t0));
  if (me == 0) consume<<<1, 1>>>(q, total, seen, total, bad);
  else produce<<<PRODUCER_BLOCKS, PRODUCER_THREADS>>>(q, me - 1, per_producer);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaEventRecord(t1));
  CUDA_CHECK(cudaDeviceSynchronize());
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
  nvshmem_barrier_all();
  int ok = 1;
  if (me == 0) {
    std::vector<unsigned> h(total);
    unsigned hbad = 0;
    CUDA_CHECK(cudaMemcpy(h.data(), seen, total * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&hbad, bad, sizeof hbad, cudaMemcpyDeviceToHost));
    long long missing = 0, doubled = 0;
    for (long long i = 0; i < total; ++i) missing += h[i] == 0, doubled += h[i] > 1;
    ok = hbad == 0 && missing == 0 && doubled == 0;
    std::printf("queue: %d producer PE(s) x %lld items through a %d-slot ring on PE 0: %.3f ms, %.2f M items/s, "
                "%lld missing, %lld twice, %u out of range: %s\n", producers, per_producer, CAPACITY, ms,
                total / (ms * 1e-3) / 1e6, missing, doubled, hbad, ok ? "PASS" : "FAIL");
    CUDA_CHECK(cudaFree(seen));
    CUDA_CHECK(cudaFree(bad));
  }
  nvshmem_free(q.items);
  nvshmem_free(q.seq);
  nvshmem_free(q.tail);
  // PE 0 alone knows the verdict: share it (every PE exits with the same status).
  int* flag = (int*)nvshmem_malloc(sizeof(int));
  int* all = (int*)nvshmem_malloc(sizeof(int));
  CUDA_CHECK(cudaMemcpy(flag, &ok, sizeof ok, cudaMemcpyHostToDevice));
  nvshmem_int_min_reduce(NVSHMEM_TEAM_WORLD, all, flag, 1);
  CUDA_CHECK(cudaMemcpy(&ok, all, sizeof ok, cudaMemcpyDeviceToHost));
  nvshmem_free(flag);
  nvshmem_free(all);
  return ok;
}

// ------------------------------------------------------------------------------------------ pipeline
constexpr int LANES = 8, CHUNKS = 256, CHUNK_FLOATS = 256 << 10;   // 1 MiB chunks, 256 MiB per run
constexpr int MAX_DEPTH = 2;

__device__ __forceinline__ float chunk_value(int chunk, int i) { return (float)((chunk * 131 + i) % 977) * 0.5f; }

// Slot s of lane l: recv[(l * MAX_DEPTH + s) * CHUNK_FLOATS], signal ready[l * MAX_DEPTH + s] on the
// consumer, free[l * MAX_DEPTH + s] on the producer. Chunk c goes to lane c % LANES as its j-th chunk.
__global__ void pipe_produce(float* staging, float* recv, uint64_t* ready, uint64_t* freed, int depth, int peer) {
  int lane = blockIdx.x;
  for (int c = lane, j = 0; c < CHUNKS; c += LANES, ++j) {
    int s = j % depth, slot = lane * MAX_DEPTH + s;
    if (j >= depth) {                           // the consumer must be done with chunk j - depth in slot s
      if (threadIdx.x == 0) nvshmem_signal_wait_until(&freed[slot], NVSHMEM_CMP_GE, (uint64_t)(j - depth + 1));
      __syncthreads();
    }
    float* src = staging + (size_t)slot * CHUNK_FLOATS;
    for (int i = threadIdx.x; i < CHUNK_FLOATS; i += blockDim.x) src[i] = chunk_value(c, i);
    __syncthreads();
    nvshmemx_putmem_signal_nbi_block(recv + (size_t)slot * CHUNK_FLOATS, src, CHUNK_FLOATS * sizeof(float),
                                     &ready[slot], (uint64_t)(j + 1), NVSHMEM_SIGNAL_SET, peer);
  }
  nvshmem_quiet();
}

__global__ void pipe_consume(const float* recv, uint64_t* ready, uint64_t* freed, float* out, int depth, int peer) {
  int lane = blockIdx.x;
  for (int c = lane, j = 0; c < CHUNKS; c += LANES, ++j) {
    int slot = lane * MAX_DEPTH + j % depth;
    if (threadIdx.x == 0) nvshmem_signal_wait_until(&ready[slot], NVSHMEM_CMP_GE, (uint64_t)(j + 1));
    __syncthreads();
    const volatile float* src = recv + (size_t)slot * CHUNK_FLOATS;
    for (int i = threadIdx.x; i < CHUNK_FLOATS; i += blockDim.x) out[(size_t)c * CHUNK_FLOATS + i] = 2.0f * src[i];
    __syncthreads();                            // every thread has read the slot ...
    if (threadIdx.x == 0) nvshmemx_signal_op(&freed[slot], (uint64_t)(j + 1), NVSHMEM_SIGNAL_SET, peer);  // ... free it
  }
}

static bool run_pipeline(int me, int npes, int depth, bool report = true) {
  if (npes % 2) {
    if (me == 0) std::printf("pipeline: needs an even number of PEs (producer, consumer pairs); have %d\n", npes);
    return false;
  }
  const bool producer = me % 2 == 0;
  const int peer = producer ? me + 1 : me - 1;
  const size_t slots = (size_t)LANES * MAX_DEPTH;
  float* recv = (float*)nvshmem_malloc(slots * CHUNK_FLOATS * sizeof(float));
  uint64_t* ready = (uint64_t*)nvshmem_malloc(slots * sizeof(uint64_t));
  uint64_t* freed = (uint64_t*)nvshmem_malloc(slots * sizeof(uint64_t));
  CUDA_CHECK(cudaMemset(ready, 0, slots * sizeof(uint64_t)));
  CUDA_CHECK(cudaMemset(freed, 0, slots * sizeof(uint64_t)));
  float *staging = nullptr, *out = nullptr;
  if (producer) CUDA_CHECK(cudaMalloc(&staging, slots * CHUNK_FLOATS * sizeof(float)));
  else CUDA_CHECK(cudaMalloc(&out, (size_t)CHUNKS * CHUNK_FLOATS * sizeof(float)));
  CUDA_CHECK(cudaDeviceSynchronize());
  nvshmem_barrier_all();
  cudaEvent_t t0, t1;
  CUDA_CHECK(cudaEventCreate(&t0));
  CUDA_CHECK(cudaEventCreate(&t1));
  CUDA_CHECK(cudaEventRecord(t0));
  if (producer) pipe_produce<<<LANES, 512>>>(staging, recv, ready, freed, depth, peer);
  else pipe_consume<<<LANES, 512>>>(recv, ready, freed, out, depth, peer);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaEventRecord(t1));
  CUDA_CHECK(cudaDeviceSynchronize());
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
  nvshmem_barrier_all();
  int ok = 1;
  if (!producer && report) {
    std::vector<float> h((size_t)CHUNKS * CHUNK_FLOATS);
    CUDA_CHECK(cudaMemcpy(h.data(), out, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (int c = 0; c < CHUNKS; ++c)
      for (int i = 0; i < CHUNK_FLOATS; ++i)
        wrong += h[(size_t)c * CHUNK_FLOATS + i] != 2.0f * (float)((c * 131 + i) % 977) * 0.5f;
    ok = wrong == 0;
    double bytes = (double)CHUNKS * CHUNK_FLOATS * sizeof(float);
    std::printf("pipeline, %s (%d lanes, %d x %zu KiB chunks), PE %d -> PE %d: %.3f ms, %.1f GB/s, %zu wrong: %s\n",
                depth == 1 ? "single-buffered" : "double-buffered", LANES, CHUNKS, CHUNK_FLOATS * sizeof(float) / 1024,
                peer, me, ms, bytes / (ms * 1e-3) / 1e9, wrong, ok ? "PASS" : "FAIL");
  }
  int* flag = (int*)nvshmem_malloc(sizeof(int));
  int* all = (int*)nvshmem_malloc(sizeof(int));
  CUDA_CHECK(cudaMemcpy(flag, &ok, sizeof ok, cudaMemcpyHostToDevice));
  nvshmem_int_min_reduce(NVSHMEM_TEAM_WORLD, all, flag, 1);
  CUDA_CHECK(cudaMemcpy(&ok, all, sizeof ok, cudaMemcpyDeviceToHost));
  nvshmem_free(flag);
  nvshmem_free(all);
  if (producer) CUDA_CHECK(cudaFree(staging));
  else CUDA_CHECK(cudaFree(out));
  nvshmem_free(freed);
  nvshmem_free(ready);
  nvshmem_free(recv);
  return ok;
}

int main(int, char** argv) {
  if (int bad = refuse_unless_launched(argv[0])) return bad;
  nvshmem_init();
  int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
  CUDA_CHECK(cudaSetDevice(nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE)));
  if (me == 0) print_device();
  if (npes < 2) {
    std::printf("needs at least 2 PEs (e.g. scripts/nvshmem_launch_multinode.sh 1 2 <this binary>): FAIL\n");
    nvshmem_finalize();
    return 1;
  }
  bool ok = run_queue(me, npes);
  run_pipeline(me, npes, 1, false);          // warm-up: first touch of the peer mappings, not reported
  ok = run_pipeline(me, npes, 1) && ok;
  ok = run_pipeline(me, npes, 2) && ok;
  if (me == 0) std::printf("%s\n", ok ? "PASS" : "FAIL");
  nvshmem_finalize();
  return ok ? 0 : 1;
}
