// PyTorch binding for bottlenecks.cu (see bottlenecks.cuh). Checks the inputs, launches on the current stream.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <ATen/cuda/CUDAContext.h>

void transpose_launch(bool padded, const float* in, float* out, int rows, int cols, cudaStream_t s);
void histogram_launch(bool privatized, const uint8_t* x, int64_t n, unsigned int* hist, int sms, cudaStream_t s);
void mix_launch(bool spills, const float* x, float* y, int64_t rows, cudaStream_t s);

torch::Tensor transpose(torch::Tensor x, torch::Tensor out, bool padded) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2 && x.is_contiguous(), "x: 2-D fp32 on the GPU");
  TORCH_CHECK(out.is_contiguous() && out.size(0) == x.size(1) && out.size(1) == x.size(0), "out: x's transpose shape");
  transpose_launch(padded, x.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1), c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

torch::Tensor histogram(torch::Tensor x, torch::Tensor hist, bool privatized) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kUInt8 && x.is_contiguous(), "x: contiguous uint8 on the GPU");
  TORCH_CHECK(hist.scalar_type() == torch::kInt32 && hist.numel() == 256 && hist.is_contiguous(), "hist: 256 int32");
  int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  histogram_launch(privatized, x.data_ptr<uint8_t>(), x.numel(), reinterpret_cast<unsigned int*>(hist.data_ptr<int32_t>()),
                   sms, c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return hist;
}

torch::Tensor mix(torch::Tensor x, torch::Tensor y, bool spills) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2 && x.size(1) == 32 && x.is_contiguous(),
              "x: (rows, 32) fp32 on the GPU");
  TORCH_CHECK(y.sizes() == x.sizes() && y.is_contiguous(), "y: x's shape");
  mix_launch(spills, x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("transpose", &transpose, "out = x.T through a 32x32 shared-memory tile, padded or not");
  m.def("histogram", &histogram, "256-bin histogram of uint8, global atomics or privatized shared-memory bins");
  m.def("mix", &mix, "8 rounds of neighbour mixing over rows of 32 floats, with or without register spills");
}
