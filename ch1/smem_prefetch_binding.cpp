// PyTorch binding for smem_prefetch.cu (see smem_prefetch.cuh). Checks the inputs, launches on the current stream.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

cudaError_t smem_prefetch_sgemm(int version, const float* A, const float* B, float* C, int M, int N, int K,
                                cudaStream_t stream);
bool smem_prefetch_supported(int version);

// c = a @ b; version 0 = synchronous loads, 1 = cp.async double buffering, 2 = TMA double buffering.
torch::Tensor sgemm(torch::Tensor a, torch::Tensor b, torch::Tensor c, int64_t version) {
  TORCH_CHECK(version >= 0 && version <= 2, "version must be 0 (sync), 1 (cp.async) or 2 (TMA)");
  TORCH_CHECK(smem_prefetch_supported((int)version), "this GPU cannot run version ", version,
              " (cp.async needs sm_80, TMA sm_90)");
  for (const auto* t : {&a, &b, &c}) {
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kFloat32 && t->is_contiguous() && t->dim() == 2,
                "a, b, c must be contiguous 2-D fp32 GPU tensors");
  }
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  TORCH_CHECK(b.size(0) == K && c.size(0) == M && c.size(1) == N, "shapes must be a (M, K), b (K, N), c (M, N)");
  TORCH_CHECK(M % 128 == 0 && N % 128 == 0 && K % 16 == 0, "M and N must be multiples of 128, K of 16");
  C10_CUDA_CHECK(smem_prefetch_sgemm((int)version, a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(),
                                     (int)M, (int)N, (int)K, c10::cuda::getCurrentCUDAStream()));
  return c;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("sgemm", &sgemm, "tiled fp32 GEMM; version 0 sync loads, 1 cp.async, 2 TMA");
  m.def("supported", &smem_prefetch_supported, "whether this GPU runs a version (cp.async: sm_80+, TMA: sm_90+)");
}
