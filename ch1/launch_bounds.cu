// launch_bounds.cu: host entry points for the launch_bounds pair (ch1/baseline_launch_bounds.py),
// built as a PyTorch extension by common/cuda_ext.py together with launch_bounds_binding.cpp.
// The kernels are in launch_bounds.cuh, shared with the sample launch_bounds_demo.cu.
// No torch dependency: CI compiles it with plain nvcc.
#include "launch_bounds.cuh"

// min_blocks: 0 = no __launch_bounds__, else __launch_bounds__(256, min_blocks) with min_blocks 2, 4 or 8.
cudaError_t launch_bounds_solve8(int min_blocks, const float* A, const float* b, float* x, int64_t M,
                                 cudaStream_t stream) {
  return launch_bounds::launch_solve8(min_blocks, A, b, x, M, stream);
}

// Registers per thread, local (spill) bytes per thread, resident blocks per SM on the current GPU.
cudaError_t launch_bounds_info(int min_blocks, int* registers, int64_t* local_bytes, int* blocks_per_sm) {
  launch_bounds::KernelInfo info;
  cudaError_t e = launch_bounds::kernel_info(min_blocks, &info);
  *registers = info.registers;
  *local_bytes = (int64_t)info.local_bytes;
  *blocks_per_sm = info.blocks_per_sm;
  return e;
}
