// PyTorch binding for tile_gemm.cu: checks shapes, launches on the current stream.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <tuple>
#include <vector>

void launch_tile_gemm(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s);
void launch_grouped_tile_gemm(const int64_t* table, int count, int total_tiles, cudaStream_t s);
int64_t grouped_row(int64_t* row, const float* A, const float* B, float* C, int M, int N, int K, int64_t first_tile);
int grouped_cols();

static void check_product(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& out) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && out.is_cuda(), "CUDA tensors");
  TORCH_CHECK(a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat &&
              out.scalar_type() == torch::kFloat, "float32 tensors");
  TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && out.is_contiguous(), "contiguous tensors");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && out.dim() == 2, "2-D tensors");
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  TORCH_CHECK(b.size(0) == K && out.size(0) == M && out.size(1) == N, "shapes: [M,K] @ [K,N] -> [M,N]");
  TORCH_CHECK(M % 64 == 0 && N % 64 == 0 && K % 16 == 0, "M, N multiples of 64; K a multiple of 16");
}

torch::Tensor tile_gemm(torch::Tensor a, torch::Tensor b, torch::Tensor out) {
  check_product(a, b, out);
  const c10::cuda::CUDAGuard guard(a.device());
  launch_tile_gemm(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), (int)a.size(0), (int)b.size(1),
                   (int)a.size(1), at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

// The products' table, built once (checked here) and kept on the device. It holds raw pointers: the
// tensors must outlive it and keep their storage (inputs refilled in place, as the harness does, keep it).
std::tuple<torch::Tensor, int64_t> grouped_table(std::vector<torch::Tensor> as, std::vector<torch::Tensor> bs,
                                                 std::vector<torch::Tensor> outs) {
  TORCH_CHECK(!as.empty() && as.size() == bs.size() && as.size() == outs.size(), "as many a, b and out tensors");
  auto table = torch::zeros({(int64_t)as.size(), grouped_cols()}, torch::kInt64);
  int64_t tiles = 0;
  for (size_t i = 0; i < as.size(); ++i) {
    check_product(as[i], bs[i], outs[i]);
    TORCH_CHECK(as[i].device() == as[0].device() && bs[i].device() == as[0].device() &&
                outs[i].device() == as[0].device(), "every tensor on one device");
    tiles += grouped_row(table.data_ptr<int64_t>() + i * grouped_cols(), as[i].data_ptr<float>(),
                         bs[i].data_ptr<float>(), outs[i].data_ptr<float>(), (int)as[i].size(0), (int)bs[i].size(1),
                         (int)as[i].size(1), tiles);
  }
  TORCH_CHECK(tiles > 0 && tiles < (1LL << 31), "between 1 and 2^31 - 1 tiles for one launch");
  return {table.to(as[0].device()), tiles};
}

// One launch for every product in the table; total_tiles is grouped_table's second result.
void grouped_tile_gemm(torch::Tensor table_dev, int64_t total_tiles) {
  TORCH_CHECK(table_dev.is_cuda() && table_dev.scalar_type() == torch::kInt64 && table_dev.dim() == 2 &&
              table_dev.size(0) > 0 && table_dev.size(1) == grouped_cols() && table_dev.is_contiguous(),
              "a table from grouped_table");
  TORCH_CHECK(total_tiles > 0 && total_tiles < (1LL << 31), "total_tiles: grouped_table's second result");
  const c10::cuda::CUDAGuard guard(table_dev.device());
  launch_grouped_tile_gemm(table_dev.data_ptr<int64_t>(), (int)table_dev.size(0), (int)total_tiles,
                           at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("tile_gemm", &tile_gemm, "C = A @ B, one block per 64x64 tile");
  m.def("grouped_table", &grouped_table, "(device table, total tiles) of the products, for grouped_tile_gemm");
  m.def("grouped_tile_gemm", &grouped_tile_gemm, "every product of a grouped_table, one launch");
}
