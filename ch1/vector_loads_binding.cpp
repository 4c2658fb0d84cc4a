// PyTorch binding for vector_loads.cu (see that file). Checks the inputs, launches on the current stream.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

void launch_scale_shift_scalar(const void* x, void* y, float a, float b, int64_t n, cudaStream_t s);
void launch_scale_shift_vec16(const void* x, void* y, float a, float b, int64_t n, cudaStream_t s);

static void check(const torch::Tensor& x, const torch::Tensor& y) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "tensors must be on the GPU");
  TORCH_CHECK(x.scalar_type() == torch::kBFloat16 && y.scalar_type() == torch::kBFloat16, "tensors must be bf16");
  TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && x.numel() == y.numel(), "contiguous tensors of one size");
}

torch::Tensor scalar(torch::Tensor x, double a, double b, torch::Tensor y) {
  check(x, y);
  launch_scale_shift_scalar(x.data_ptr(), y.data_ptr(), (float)a, (float)b, x.numel(),
                            c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

torch::Tensor vec16(torch::Tensor x, double a, double b, torch::Tensor y) {
  check(x, y);
  TORCH_CHECK(x.numel() % 8 == 0, "vec16 needs a multiple of 8 elements");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 && reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 == 0,
              "vec16 needs 16-byte aligned tensors");
  launch_scale_shift_vec16(x.data_ptr(), y.data_ptr(), (float)a, (float)b, x.numel(),
                           c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale_shift_scalar", &scalar, "y = a*x + b, one bf16 per load");
  m.def("scale_shift_vec16", &vec16, "y = a*x + b, 8 bf16 per 16-byte load");
}
