// PyTorch binding for launch_bounds.cu (see launch_bounds.cuh). Checks the inputs, launches on the current stream.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

cudaError_t launch_bounds_solve8(int min_blocks, const float* A, const float* b, float* x, int64_t M,
                                 cudaStream_t stream);
cudaError_t launch_bounds_info(int min_blocks, int* registers, int64_t* local_bytes, int* blocks_per_sm);

static void check_min_blocks(int64_t min_blocks) {
  TORCH_CHECK(min_blocks == 0 || min_blocks == 2 || min_blocks == 4 || min_blocks == 8,
              "min_blocks must be 0 (no __launch_bounds__), 2, 4 or 8");
}

// A: (64, M), b: (8, M), x: (8, M), fp32, contiguous (struct of arrays: one column per system).
torch::Tensor solve8(torch::Tensor A, torch::Tensor b, torch::Tensor x, int64_t min_blocks) {
  check_min_blocks(min_blocks);
  for (const auto* t : {&A, &b, &x}) {
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kFloat32 && t->is_contiguous() && t->dim() == 2,
                "A, b, x must be contiguous 2-D fp32 GPU tensors");
  }
  const int64_t M = A.size(1);
  TORCH_CHECK(A.size(0) == 64 && b.size(0) == 8 && x.size(0) == 8 && b.size(1) == M && x.size(1) == M,
              "shapes must be A (64, M), b (8, M), x (8, M)");
  C10_CUDA_CHECK(launch_bounds_solve8((int)min_blocks, A.data_ptr<float>(), b.data_ptr<float>(), x.data_ptr<float>(),
                                      M, c10::cuda::getCurrentCUDAStream()));
  return x;
}

// {"registers": per thread, "local_bytes": spill/stack bytes per thread, "blocks_per_sm": resident 256-thread blocks}
py::dict info(int64_t min_blocks) {
  check_min_blocks(min_blocks);
  int registers = 0, blocks = 0;
  int64_t local = 0;
  C10_CUDA_CHECK(launch_bounds_info((int)min_blocks, &registers, &local, &blocks));
  py::dict d;
  d["registers"] = registers;
  d["local_bytes"] = local;
  d["blocks_per_sm"] = blocks;
  return d;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("solve8", &solve8, "batched 8x8 solves, one system per thread (min_blocks 0 = no __launch_bounds__)");
  m.def("info", &info, "registers, local bytes and resident blocks per SM of one version");
}
