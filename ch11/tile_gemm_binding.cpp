// PyTorch binding for tile_gemm.cu: checks shapes, launches on the current stream.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

void launch_tile_gemm(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s);

torch::Tensor tile_gemm(torch::Tensor a, torch::Tensor b, torch::Tensor out) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && out.is_cuda(), "CUDA tensors");
  TORCH_CHECK(a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat,
              "float32 tensors");
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && out.is_contiguous(), "contiguous tensors");
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  TORCH_CHECK(b.size(0) == K && out.size(0) == M && out.size(1) == N, "shapes: [M,K] @ [K,N] -> [M,N]");
  TORCH_CHECK(M % 64 == 0 && N % 64 == 0 && K % 16 == 0, "M, N multiples of 64; K a multiple of 16");
  launch_tile_gemm(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), (int)M, (int)N, (int)K,
                   at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("tile_gemm", &tile_gemm, "C = A @ B, one block per 64x64 tile"); }
