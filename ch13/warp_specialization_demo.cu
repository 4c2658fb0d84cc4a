// warp_specialization_demo.cu: a Hopper tensor-core GEMM whose warps split the work into roles (one warpgroup
// loads, two compute), against the same kernel in which the computing warps also issue the loads.
//
// C = A B^T in bf16 with fp32 accumulation, A: M x K, B: N x K (both K-contiguous, as a linear layer's input and
// weight), M = N = K = 4096 by default. Every version has the same body: a block computes a 128 x 256 tile of C, K
// in steps of 64; each step's A and B tiles (16 + 32 KB) land in shared memory in the 128-byte swizzled layout
// (copied by the Tensor Memory Accelerator, the TMA, or in version 2 by cp.async), and two warpgroups (4 warps
// each) multiply them with wgmma (m64n256k16: each warpgroup owns 64 rows of the tile and 128 fp32 accumulators a
// thread). Every version but the first keeps a ring of 4 stages (192 KB of shared memory) and multiplies one step
// while the loads of the next three are in flight; they differ only in which warps issue the loads and how a stage
// is handed back for refilling.
//
//   1. uniform, TMA, 1 stage       the computing warps issue the load (one thread starts the TMA), wait for it,
//                                  multiply, wait for the multiply, and only then start the next load: the
//                                  tensor cores idle for every load's latency (1 -> 3: what pipelining buys)
//   2. uniform, cp.async, 4 stages every warp does both, the Ampere way: each of the 256 threads copies 12 of
//                                  the step's 3072 16-byte pieces with cp.async, waits for its own, and a block
//                                  barrier makes them everyone's; a second barrier per step frees the stage
//   3. uniform, TMA, 4 stages      the same warps, but one thread starts one TMA copy per tile: the copies leave
//                                  the computing warps' instruction stream; a block barrier per step still
//                                  frees the stage
//   4. specialized, TMA, 4 stages  a third warpgroup is the producer: one of its threads walks the K steps
//                                  issuing TMA loads, waiting only on an "empty" mbarrier per stage; the two
//                                  consumer warpgroups wait only on a "full" mbarrier per stage and signal
//                                  "empty" when their multiplies on it are done. No block barrier in the loop.
//                                  The producer gives up registers (setmaxnreg 40) so the consumers may take up
//                                  to 232; here ptxas fits the whole kernel in 168 without spilling (the uniform
//                                  kernels use 154), so the extra registers go unused
//   cuBLAS                         cublasGemmEx, the same product: the reference the check uses, and the yardstick
//
// 2 -> 4 is the comparison warp specialization is known by ("producer warps load while consumer warps compute"
// against "every warp does both"); 3 splits it into what the TMA buys (2 -> 3) and what the roles add (3 -> 4).
//
// Predict, then measure. One 64-deep K step is 2 x 128 x 256 x 64 = 4.2 MFLOP, 0.56 µs of one SM's share of
// the H100's 989 TFLOP/s bf16 peak; its 48 KB load takes about 1 µs from L2. Version 1 pays both in series:
// about a third of the peak (0.56 / 1.6). The others hide the load behind the multiplies of the steps before
// it. With the TMA, a load is 3 instructions of one thread per step, so the roles have little left to take
// off the computing warps: 4 over 3, a few percent at most. With cp.async the computing warps issue 12 copies,
// their addresses and two barriers per step: 2 should trail 3.
//
// Measured on the H100 (profiles/h100/topics-443d16b): 1 362.9 TFLOP/s, 2 442.8, 3 627.9, 4 628.8, cuBLAS 779.5.
// Pipelining (1 -> 3) 1.73x; the known comparison (2 -> 4) 1.42x; the roles alone (3 -> 4) 1.001x (1.011x in the
// run before) and under 1% at three other shapes: no measurable gain from the split itself here. Nsight
// Compute puts the difference in the TMA: version 2 executes 118.7 M instructions and keeps the tensor pipe
// 48.8% busy, versions 3 and 4 execute 23.2 M and 24.1 M and keep it 83.4% and 83.0% busy.
//
// Build: make -C ch13 warp_specialization_demo (compiled for sm_90a: wgmma, setmaxnreg and the TMA are Hopper's)
// Run:   ./ch13/bin/warp_specialization_demo_sm90 [M N K]   (M a multiple of 128, N of 256, K of 64)
// Prints, per version: ms, TFLOP/s and the share of cuBLAS's TFLOP/s; exits 1 if any version's C differs from
// cuBLAS's by more than 5e-3 (norm-wise relative: two fp32 sums in different orders, rounded to bf16, differ by
// about 1e-3; measured: 0, the same bits as cuBLAS) or holds a NaN; cuBLAS is itself checked against a CPU sum
// in double on 256 sampled elements. Built with -DINJECT_FAULT, version 4's producer loads K step 0 in place of
// the last one, and the run must say MISMATCH and FAIL (measured: relative error 1.8e-1).
// Exits 2, in one line, on a GPU that is not Hopper (sm_90), or when built for plain sm_90 (no wgmma).
// Bound: tensor cores (arithmetic intensity 85 FLOP per byte loaded into shared memory per K step).
#include <cuda.h>           // CUtensorMap and its enums (types only: the encoder comes from the driver at run time)
#include <cudaTypedefs.h>   // PFN_cuTensorMapEncodeTiled
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <cstdint>
#include <cstdlib>
#include <functional>

#include "cuda_check.cuh"

// wgmma, setmaxnreg, the TMA and mbarriers are sm_90a's (Hopper's architecture-specific features). Built for
// anything else, plain sm_90 included, the kernels compile empty (NO_HOPPER), and main() says so in one line
// (built_for_hopper) instead of running them.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define NO_HOPPER
#endif

constexpr int BM = 128, BN = 256, BK = 64;          // block tile; BK: 64 bf16 = 128 bytes, the swizzle span
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;       // 48 KB
constexpr int STAGES = 4;                            // 192 KB of shared memory: one block per SM
constexpr int WG = 128;                              // threads in a warpgroup

constexpr size_t smem_bytes(int stages) { return (size_t)stages * STAGE_BYTES + 2 * stages * 8 + 1024; }

#ifndef NO_HOPPER  // the device helpers, for the kernels' Hopper bodies
// ---- PTX wrappers: shared-memory addresses, mbarriers, the TMA and wgmma -------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
// One arrival that also tells the barrier how many bytes the TMA will deliver before the phase may complete.
__device__ __forceinline__ void mbar_expect_bytes(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Wait until the barrier's phase with this parity has completed (phases alternate 0, 1, 0, ...).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}
// A 2-D TMA copy of one box (x: the K coordinate, y: the row) into shared memory; completes bytes on `bar`.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}
// One K step's A and B tiles into a stage: one arrival with its byte count, then the two copies.
__device__ __forceinline__ void load_step(const CUtensorMap* ma, const CUtensorMap* mb, uint32_t stage, uint32_t full,
                                          int k, int m0, int n0) {
  mbar_expect_bytes(full, STAGE_BYTES);
  tma_load(stage, ma, k * BK, m0, full);
  tma_load(stage + A_BYTES, mb, k * BK, n0, full);
}

// A wgmma shared-memory descriptor for a K-major tile written by the TMA with the 128-byte swizzle: rows of
// 128 bytes, 8-row groups 1024 bytes apart (the stride field), swizzle mode 1 in bits 62-63. The tile must
// start 1024-byte aligned; a 16-wide K slice inside it starts 32 bytes further per slice.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

// The compiler must not move the accumulators across a wgmma it cannot see into: pin them here.
__device__ __forceinline__ void pin(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 x 256 fp32, spread over the warpgroup) += A slice (64 x 16) x B slice (256 x 16)^T, from shared memory.
__device__ __forceinline__ void wgmma_64x256x16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
      "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
      "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "
      "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, "
      "%102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, "
      "%119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]),
        "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),
        "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),
        "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// One K step for this warpgroup: its 64 rows of A against all 256 rows of B, as 4 wgmmas of K = 16, committed as
// one group. The multiplies run asynchronously; wgmma_wait says when they are done.
__device__ __forceinline__ void mma_step(float (&d)[128], uint32_t stage, int warpgroup) {
  pin(d);
  const uint32_t a = stage + warpgroup * 64 * BK * 2, b = stage + A_BYTES;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) wgmma_64x256x16(d, smem_desc(a + kk * 32), smem_desc(b + kk * 32));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  pin(d);
}
template <int PENDING>
__device__ __forceinline__ void wgmma_wait(float (&d)[128]) {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
  pin(d);
}

// The accumulator layout of wgmma m64nN: warp w of the warpgroup holds rows 16w + lane/4 and 16w + lane/4 + 8;
// d[4j..4j+3] are columns 8j + 2(lane % 4) + {0, 1} of those two rows.
__device__ __forceinline__ void store_tile(const float (&d)[128], __nv_bfloat16* C, int N, int row0, int col0) {
  const int t = threadIdx.x % WG, r = row0 + (t / 32) * 16 + (t % 32) / 4, c = col0 + 2 * (t % 4);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    *reinterpret_cast<__nv_bfloat162*>(C + (size_t)r * N + c + 8 * j) = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
    *reinterpret_cast<__nv_bfloat162*>(C + (size_t)(r + 8) * N + c + 8 * j) =
        __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
  }
}

// The stages start at the first 1024-byte boundary of dynamic shared memory (the swizzle needs it); the
// barriers follow them.
__device__ __forceinline__ uint32_t stages_base() {
  extern __shared__ uint8_t smem[];
  return (smem_u32(smem) + 1023) & ~1023u;
}
#endif  // NO_HOPPER

// ---- 1 and 3: every warp computes, and one thread of theirs issues the TMA loads ------------------------------
template <int S>
__global__ void __launch_bounds__(2 * WG, 1)
gemm_uniform(const __grid_constant__ CUtensorMap ma, const __grid_constant__ CUtensorMap mb, __nv_bfloat16* C,
             int N, int K) {
#ifndef NO_HOPPER
  const uint32_t base = stages_base(), full = base + S * STAGE_BYTES;  // full[s] at full + 8 s
  const int tid = threadIdx.x, warpgroup = tid / WG, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, steps = K / BK;
  if (tid == 0) {
    for (int s = 0; s < S; ++s) mbar_init(full + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the TMA unit
  }
  __syncthreads();
  if (tid == 0)
    for (int k = 0; k < S && k < steps; ++k) load_step(&ma, &mb, base + k * STAGE_BYTES, full + 8 * k, k, m0, n0);
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  for (int k = 0; k < steps; ++k) {
    const int s = k % S;
    mbar_wait(full + 8 * s, (k / S) & 1);
    mma_step(d, base + s * STAGE_BYTES, warpgroup);
    if constexpr (S == 1) {
      wgmma_wait<0>(d);   // the only stage is read by this step's multiplies: wait for them all
      __syncthreads();    // ... in both warpgroups, before it is overwritten
      if (tid == 0 && k + 1 < steps) load_step(&ma, &mb, base, full, k + 1, m0, n0);
    } else {
      wgmma_wait<1>(d);   // this step's multiplies may still run; the previous step's are done
      __syncthreads();    // ... in both warpgroups: its stage may be refilled, with the step S - 1 ahead
      const int refill = k - 1 + S, rs = (k + S - 1) % S;
      if (tid == 0 && k >= 1 && refill < steps)
        load_step(&ma, &mb, base + rs * STAGE_BYTES, full + 8 * rs, refill, m0, n0);
    }
  }
  wgmma_wait<0>(d);
  store_tile(d, C, N, m0 + warpgroup * 64, n0);
#endif
}

// ---- 2: every warp computes, and every thread copies its share with cp.async (the Ampere way) -------------
// 16 bytes per cp.async, written where the TMA's 128-byte swizzle would put them (the 16-byte chunk c of row r
// lands at chunk c ^ (r % 8)), so the same wgmma descriptors read them: 3072 copies a step, 12 a thread.
#ifndef NO_HOPPER
__device__ __forceinline__ void copy_step(const __nv_bfloat16* A, const __nv_bfloat16* B, uint32_t stage, int k,
                                          int m0, int n0, int K) {
  for (int i = threadIdx.x; i < (BM + BN) * 8; i += 2 * WG) {
    const int row = i / 8, chunk = i % 8;  // rows 0..127 are A's, 128..383 B's (B follows A in the stage)
    const __nv_bfloat16* src =
        (row < BM ? A + (size_t)(m0 + row) * K : B + (size_t)(n0 + row - BM) * K) + k * BK + chunk * 8;
    const uint32_t dst = stage + row * 128 + ((chunk ^ (row & 7)) << 4);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
  }
}
#endif

template <int S>
__global__ void __launch_bounds__(2 * WG, 1)
gemm_uniform_cp_async(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int N, int K) {
#ifndef NO_HOPPER
  const uint32_t base = stages_base();
  const int warpgroup = threadIdx.x / WG, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, steps = K / BK;
  for (int k = 0; k < S; ++k) {  // one commit group per step; steps past the end commit empty groups
    if (k < steps) copy_step(A, B, base + k * STAGE_BYTES, k, m0, n0, K);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  for (int k = 0; k < steps; ++k) {
    const int s = k % S;
    // This thread's copies of step k have landed (at most S - 2 later groups pending: one group is committed
    // per step, even an empty one, so the count holds to the end) ...
    asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
    // ... made visible to wgmma, which reads shared memory through the async proxy ...
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();  // ... and everyone else's too
    mma_step(d, base + s * STAGE_BYTES, warpgroup);
    wgmma_wait<1>(d);
    __syncthreads();  // the previous step's multiplies are done in both warpgroups: refill its stage
    const int refill = k - 1 + S, rs = (k + S - 1) % S;
    if (k >= 1 && refill < steps) copy_step(A, B, base + rs * STAGE_BYTES, refill, m0, n0, K);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  wgmma_wait<0>(d);
  store_tile(d, C, N, m0 + warpgroup * 64, n0);
#endif
}

// ---- 4: a producer warpgroup loads, two consumer warpgroups compute --------------------------------------------
template <int S>
__global__ void __launch_bounds__(3 * WG, 1)
gemm_specialized(const __grid_constant__ CUtensorMap ma, const __grid_constant__ CUtensorMap mb, __nv_bfloat16* C,
                 int N, int K) {
#ifndef NO_HOPPER
  const uint32_t base = stages_base(), full = base + S * STAGE_BYTES, empty = full + 8 * S;
  const int tid = threadIdx.x, role = tid / WG, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, steps = K / BK;
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(full + 8 * s, 1);        // completed by the producer's expect_tx arrival plus the TMA's bytes
      mbar_init(empty + 8 * s, 2 * 4);   // completed when all 8 consumer warps have finished with the stage
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();  // the last block-wide barrier: from here on the roles only meet at the mbarriers
  if (role == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");  // the producer needs few registers: give them away
    if (tid == 0) {
      for (int k = 0; k < steps; ++k) {
        const int s = k % S;
        if (k >= S) mbar_wait(empty + 8 * s, (k / S - 1) & 1);  // the consumers are done with step k - S
#ifdef INJECT_FAULT
        const int load_k = (k == steps - 1) ? 0 : k;  // the negative control: the last K step loads step 0's tiles
#else
        const int load_k = k;
#endif
        load_step(&ma, &mb, base + s * STAGE_BYTES, full + 8 * s, load_k, m0, n0);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");  // 128 x 40 + 256 x 232 <= 65,536 registers
    const int warpgroup = role - 1;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int k = 0; k < steps; ++k) {
      const int s = k % S;
      mbar_wait(full + 8 * s, (k / S) & 1);
      mma_step(d, base + s * STAGE_BYTES, warpgroup);
      wgmma_wait<1>(d);  // the previous step's multiplies are done: hand its stage back to the producer
      if (k >= 1 && tid % 32 == 0) mbar_arrive(empty + 8 * ((k - 1) % S));
    }
    wgmma_wait<0>(d);
    store_tile(d, C, N, m0 + warpgroup * 64, n0);
  }
#endif
}

// 1 where this binary's kernels have their Hopper bodies (built for sm_90a), 0 where they compiled empty.
__global__ void built_for_hopper(int* yes) {
#ifdef NO_HOPPER
  *yes = 0;
#else
  *yes = 1;
#endif
}

// ---- host ----------------------------------------------------------------------------------------------------
// A row-major rows x K bf16 matrix as a TMA tensor: boxes of BK x box_rows, 128-byte swizzled in shared memory.
static CUtensorMap tensor_map(PFN_cuTensorMapEncodeTiled_v12000 encode, void* ptr, int rows, int K, int box_rows) {
  CUtensorMap map;
  cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows};           // innermost first
  cuuint64_t strides[1] = {(cuuint64_t)K * sizeof(__nv_bfloat16)};  // bytes from one row to the next
  cuuint32_t box[2] = {BK, (cuuint32_t)box_rows}, steps[2] = {1, 1};
  CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr, dims, strides, box, steps,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "error: cuTensorMapEncodeTiled failed (%d)\n", (int)r);
    std::exit(1);
  }
  return map;
}

static void bf16_to_float(const std::vector<__nv_bfloat16>& in, std::vector<float>& out) {
  out.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = __bfloat162float(in[i]);
}

int main(int argc, char** argv) {
  int M = 4096, N = 4096, K = 4096;
  if (argc == 4) M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
  if (argc != 1 && argc != 4) {
    std::fprintf(stderr, "usage: %s [M N K]\n", argv[0]);
    return 2;
  }
  if (M <= 0 || N <= 0 || K <= 0 || M % BM || N % BN || K % BK) {
    std::fprintf(stderr, "error: M must be a multiple of %d, N of %d and K of %d (got %d %d %d)\n", BM, BN, BK, M, N, K);
    return 2;
  }
  print_device();
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9 || prop.minor != 0) {
    std::fprintf(stderr, "error: this sample needs a Hopper GPU (sm_90: wgmma, setmaxnreg); this one is sm_%d%d\n",
                 prop.major, prop.minor);
    return 2;
  }
  int* flag = nullptr;
  int hopper_bodies = 0;
  CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
  built_for_hopper<<<1, 1>>>(flag);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(&hopper_bodies, flag, sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(flag));
  if (!hopper_bodies) {
    std::fprintf(stderr, "error: this binary was built without sm_90a's wgmma and setmaxnreg (plain sm_90?); "
                         "build it with: make -C ch13 warp_specialization_demo\n");
    return 2;
  }
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  cudaDriverEntryPointQueryResult found;
  CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), 12000,
                                              cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !encode) {
    std::fprintf(stderr, "error: the driver has no cuTensorMapEncodeTiled\n");
    return 1;
  }

  std::vector<float> ha((size_t)M * K), hb((size_t)N * K);
  fill_random(ha, 1);
  fill_random(hb, 2);
  std::vector<__nv_bfloat16> a16(ha.size()), b16(hb.size());
  for (size_t i = 0; i < ha.size(); ++i) a16[i] = __float2bfloat16(ha[i]);
  for (size_t i = 0; i < hb.size(); ++i) b16[i] = __float2bfloat16(hb[i]);
  __nv_bfloat16 *a, *b, *c, *c_ref;
  CUDA_CHECK(cudaMalloc(&a, a16.size() * 2));
  CUDA_CHECK(cudaMalloc(&b, b16.size() * 2));
  CUDA_CHECK(cudaMalloc(&c, (size_t)M * N * 2));
  CUDA_CHECK(cudaMalloc(&c_ref, (size_t)M * N * 2));
  CUDA_CHECK(cudaMemcpy(a, a16.data(), a16.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b, b16.data(), b16.size() * 2, cudaMemcpyHostToDevice));
  const CUtensorMap ma = tensor_map(encode, a, M, K, BM), mb = tensor_map(encode, b, N, K, BN);

  // cuBLAS, column-major: C^T (N x M) = B (K x N, transposed) x A (K x M): the row-major C = A B^T.
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "error: cublasCreate failed\n");
    return 1;
  }
  const float one = 1.0f, zero = 0.0f;
  auto run_cublas = [&] {
    cublasStatus_t st = cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_16BF, K, a, CUDA_R_16BF,
                                     K, &zero, c_ref, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "error: cublasGemmEx failed (%d)\n", (int)st);
      std::exit(1);
    }
  };

  const size_t smem1 = smem_bytes(1), smem4 = smem_bytes(STAGES);
  CUDA_CHECK(cudaFuncSetAttribute(gemm_uniform<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem1));
  CUDA_CHECK(cudaFuncSetAttribute(gemm_uniform<STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem4));
  CUDA_CHECK(cudaFuncSetAttribute(gemm_uniform_cp_async<STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem4));
  CUDA_CHECK(cudaFuncSetAttribute(gemm_specialized<STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem4));
  const dim3 grid(N / BN, M / BM);
  struct Version { const char* name; std::function<void()> run; };
  const Version versions[] = {
      {"1. uniform, TMA, 1 stage", [&] { gemm_uniform<1><<<grid, 2 * WG, smem1>>>(ma, mb, c, N, K); }},
      {"2. uniform, cp.async, 4 stages",
       [&] { gemm_uniform_cp_async<STAGES><<<grid, 2 * WG, smem4>>>(a, b, c, N, K); }},
      {"3. uniform, TMA, 4 stages", [&] { gemm_uniform<STAGES><<<grid, 2 * WG, smem4>>>(ma, mb, c, N, K); }},
      {"4. specialized, TMA, 4 stages", [&] { gemm_specialized<STAGES><<<grid, 3 * WG, smem4>>>(ma, mb, c, N, K); }},
  };

  // The reference: cuBLAS, itself checked on 256 sampled elements against a CPU sum in double.
  run_cublas();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> got16((size_t)M * N);
  std::vector<float> ref, got;
  CUDA_CHECK(cudaMemcpy(got16.data(), c_ref, got16.size() * 2, cudaMemcpyDeviceToHost));
  bf16_to_float(got16, ref);
  double worst = 0.0;
  for (int i = 0; i < 256; ++i) {
    const size_t row = ((size_t)i * 2654435761u) % M, col = ((size_t)i * 40503u + 7) % N;
    double sum = 0.0;
    for (int k = 0; k < K; ++k) sum += (double)__bfloat162float(a16[row * K + k]) * __bfloat162float(b16[col * K + k]);
    const double err = std::fabs(ref[row * N + col] - sum) / (std::fabs(sum) + 1.0);
    worst = (err > worst || err != err) ? err : worst;
  }
  bool ok = worst < 1e-2;  // one bf16 rounding of the fp32 sum: under 2^-8 of the value
  std::printf("check %-31s worst %.1e of |sum| + 1 on 256 elements against the CPU  %s\n", "cuBLAS", worst,
              ok ? "ok" : "MISMATCH");
  for (const auto& v : versions) {
    CUDA_CHECK(cudaMemset(c, 0xFF, (size_t)M * N * 2));  // bf16 NaNs: an unwritten element fails
    v.run();
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(got16.data(), c, got16.size() * 2, cudaMemcpyDeviceToHost));
    bf16_to_float(got16, got);
    const double err = rel_error(got.data(), ref.data(), got.size());
    const bool pass = err < 5e-3;  // NaN fails too
    std::printf("check %-31s relative error %.1e against cuBLAS  %s\n", v.name, err, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  }
  if (!ok) {
    std::printf("FAIL\n");
    return 1;
  }

  const double flop = 2.0 * M * N * K;
  std::printf("\nM = %d, N = %d, K = %d: %d tiles of %d x %d on %d SMs\n", M, N, K, (M / BM) * (N / BN), BM, BN,
              prop.multiProcessorCount);
  std::printf("%-31s %9s %10s %10s\n", "version", "ms", "TFLOP/s", "of cuBLAS");
  const float cublas_ms = median_ms(run_cublas, 5, 30);
  for (const auto& v : versions) {
    const float ms = median_ms(v.run, 5, 30);
    std::printf("%-31s %9.4f %10.1f %9.1f%%\n", v.name, ms, flop / ms / 1e9, 100.0 * cublas_ms / ms);
  }
  std::printf("%-31s %9.4f %10.1f %9.1f%%\n", "cuBLAS", cublas_ms, flop / cublas_ms / 1e9, 100.0);
  cublasDestroy(handle);
  for (void* p : {(void*)a, (void*)b, (void*)c, (void*)c_ref}) CUDA_CHECK(cudaFree(p));
  std::printf("PASS\n");
  return 0;
}
