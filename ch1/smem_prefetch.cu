// smem_prefetch.cu: host entry points for the smem_prefetch pair (ch1/baseline_smem_prefetch.py),
// built as a PyTorch extension by common/cuda_ext.py together with smem_prefetch_binding.cpp.
// The kernels are in smem_prefetch.cuh, shared with the sample smem_prefetch_demo.cu. The cp.async
// and TMA kernels compile to a trap below sm_80 and sm_90, and their launchers refuse such GPUs, so
// the extension builds for any architecture. No torch dependency: CI compiles it with plain nvcc.
#include "smem_prefetch.cuh"

// version: 0 = synchronous loads, 1 = cp.async double buffering, 2 = TMA double buffering.
cudaError_t smem_prefetch_sgemm(int version, const float* A, const float* B, float* C, int M, int N, int K,
                                cudaStream_t stream) {
  return smem_prefetch::launch_sgemm(version, A, B, C, M, N, K, stream);
}

// Whether this GPU runs a version (cp.async: sm_80+, TMA: sm_90+).
bool smem_prefetch_supported(int version) {
  switch (version) {
    case smem_prefetch::SYNC: return true;
    case smem_prefetch::CP_ASYNC: return smem_prefetch::cp_async_supported();
    case smem_prefetch::TMA: return smem_prefetch::tma_supported();
    default: return false;
  }
}
