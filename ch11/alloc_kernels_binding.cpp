// PyTorch binding for alloc_kernels.cu (see that file): checks inputs, runs on the current stream.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

int step_malloc(const float* x, float* out, int64_t n, int k, cudaStream_t st);
int step_malloc_async(const float* x, float* out, int64_t n, int k, cudaStream_t st);

template <int (*F)(const float*, float*, int64_t, int, cudaStream_t)>
torch::Tensor run(torch::Tensor x, torch::Tensor out, int64_t k) {
  TORCH_CHECK(x.is_cuda() && out.is_cuda() && x.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat,
              "float32 CUDA tensors");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel(), "contiguous, same size");
  int err = F(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), (int)k, at::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == 0, "CUDA error: ", cudaGetErrorString((cudaError_t)err));
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("step_malloc", &run<step_malloc>, "K scratch buffers from cudaMalloc/cudaFree");
  m.def("step_malloc_async", &run<step_malloc_async>, "K scratch buffers from cudaMallocAsync/cudaFreeAsync");
}
