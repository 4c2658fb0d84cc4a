// bottlenecks.cu: the kernels of bottlenecks.cuh built into the PyTorch extension for the pairs
// bank_conflicts, histogram and spills (common/cuda_ext.py builds it with bottlenecks_binding.cpp).
// No torch dependency, so CI compiles it with plain nvcc.
#include "bottlenecks.cuh"

void transpose_launch(bool padded, const float* in, float* out, int rows, int cols, cudaStream_t s) {
  launch_transpose(padded, in, out, rows, cols, s);
}
void histogram_launch(bool privatized, const uint8_t* x, int64_t n, unsigned int* hist, int sms, cudaStream_t s) {
  launch_histogram(privatized, x, n, hist, sms, s);
}
void mix_launch(bool spills, const float* x, float* y, int64_t rows, cudaStream_t s) {
  launch_mix(spills, x, y, rows, s);
}
