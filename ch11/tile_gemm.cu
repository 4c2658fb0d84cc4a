// tile_gemm.cu: a plain tiled SGEMM with one thread block per 64x64 output tile, for the
// concurrent_gemms pair (built as a PyTorch extension with tile_gemm_binding.cpp).
//
// C[M,N] = A[M,K] @ B[K,N], row-major fp32. Each 256-thread block stages 64x16 slices of A and
// 16x64 slices of B in shared memory and each thread accumulates a 4x4 patch of C in registers.
// The grid is exactly (N/64) x (M/64) blocks and K is never split, as in many custom and fused
// kernels: a 256 x 256 product is 16 blocks on a 132-SM GPU, however long K is. That is the
// underfilled GPU that running several such kernels on several streams fills.
//
// grouped_tile_gemm runs many such products of different shapes in one launch: one block per
// output tile of every product, each block finding its product in a table (the idea behind
// CUTLASS's grouped GEMM). Both kernels run the same per-tile source (on the H100 every run found
// their results equal bit for bit). Both assume that no output overlaps an input or another output
// (__restrict__, __ldg).
// No torch dependency: CI compiles this file with plain nvcc.
#include <cuda_runtime.h>
#include <cstdint>

namespace {
constexpr int TILE = 64, KT = 16;

// One 64x64 tile of C, rows row0.., columns col0..; K a multiple of KT.
__device__ __forceinline__ void gemm_tile(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ C, int N, int K, int row0, int col0) {
  __shared__ float As[KT][TILE + 4];  // stored transposed: As[k][row]; +4 keeps float4 alignment, spreads banks
  __shared__ float Bs[KT][TILE];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;  // 16 x 16 threads, 4 x 4 outputs each
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += KT) {
    // 1024 elements of each slice, 4 of A and 4 of B per thread, written as a fixed count of loads
    // into registers, then the stores, so that the compiler can issue all 8 loads before the first
    // store and their latencies overlap (the loop this replaced issued them in two groups in
    // grouped_tile_gemm's SASS)
    float ra[4], rb[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = threadIdx.x + j * 256;
      ra[j] = __ldg(&A[(size_t)(row0 + i / KT) * K + k0 + i % KT]);
      rb[j] = __ldg(&B[(size_t)(k0 + i / TILE) * N + col0 + i % TILE]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = threadIdx.x + j * 256;
      As[i % KT][i / KT] = ra[j];
      Bs[i / TILE][i % TILE] = rb[j];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < KT; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = As[k][ty * 4 + i];
        b[i] = Bs[k][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) C[(size_t)(row0 + ty * 4 + i) * N + col0 + tx * 4 + j] = acc[i][j];
}

__global__ void __launch_bounds__(256) tile_gemm(const float* __restrict__ A, const float* __restrict__ B,
                                                 float* __restrict__ C, int N, int K) {
  gemm_tile(A, B, C, N, K, blockIdx.y * TILE, blockIdx.x * TILE);
}

// The table grouped_tile_gemm reads: one row of COLS int64 per product (grouped_row writes it), in
// the order the products' tiles are numbered; tiles are numbered row by row within a product.
enum Col { COL_A, COL_B, COL_C, COL_N, COL_K, COL_FIRST_TILE, COL_TILES, COLS };

// Block b runs tile b - first_tile of the last product whose first_tile <= b. A linear scan: a few
// loads for 16 products; a large group would search the first_tile column by bisection.
__global__ void __launch_bounds__(256) grouped_tile_gemm(const int64_t* __restrict__ table, int count) {
  const int b = blockIdx.x;
  int p = 0;
  while (p + 1 < count && table[(p + 1) * COLS + COL_FIRST_TILE] <= b) ++p;
  const int64_t* row = table + p * COLS;
  const int t = b - (int)row[COL_FIRST_TILE];
  if (t >= row[COL_TILES]) return;  // a grid larger than the table's tiles: the extra blocks do nothing
  const int N = (int)row[COL_N], K = (int)row[COL_K], tiles_n = N / TILE;
  gemm_tile(reinterpret_cast<const float*>(row[COL_A]), reinterpret_cast<const float*>(row[COL_B]),
            reinterpret_cast<float*>(row[COL_C]), N, K, (t / tiles_n) * TILE, (t % tiles_n) * TILE);
}
}  // namespace

// M, N multiples of 64 and K a multiple of 16 (the binding checks).
void launch_tile_gemm(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
  dim3 grid(N / TILE, M / TILE);
  tile_gemm<<<grid, 256, 0, s>>>(A, B, C, N, K);
}

// Fill one row (COLS int64, host memory) of grouped_tile_gemm's table for C[M,N] = A[M,K] @ B[K,N];
// M, N multiples of 64 and K of 16 (the binding checks). Returns the product's tile count.
int64_t grouped_row(int64_t* row, const float* A, const float* B, float* C, int M, int N, int K, int64_t first_tile) {
  row[COL_A] = reinterpret_cast<int64_t>(A);
  row[COL_B] = reinterpret_cast<int64_t>(B);
  row[COL_C] = reinterpret_cast<int64_t>(C);
  row[COL_N] = N;
  row[COL_K] = K;
  row[COL_FIRST_TILE] = first_tile;
  row[COL_TILES] = (int64_t)(M / TILE) * (N / TILE);
  return row[COL_TILES];
}
int grouped_cols() { return COLS; }

// table on the device, as grouped_row filled it; total_tiles = the sum of the rows' tile counts.
void launch_grouped_tile_gemm(const int64_t* table, int count, int total_tiles, cudaStream_t s) {
  grouped_tile_gemm<<<total_tiles, 256, 0, s>>>(table, count);
}
