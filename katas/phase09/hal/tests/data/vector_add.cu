// c = a + b over n floats, with a grid-stride loop: phase 02 vector-add's kernel (GIVEN), built by the
// harness's cpu CUDA toolchain into a kernel library that your cuda backend loads as a module.
//
// A grid-stride loop decouples the grid from the data: each thread starts at its global index
// and steps by the number of threads in the whole grid, so any grid size covers any n, and a
// grid sized to the machine (SMs x resident blocks) reuses its threads instead of launching
// millions of short-lived ones.
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
  // size_t: i + stride can pass 2^31 - 1 for n near INT_MAX.
  size_t stride = (size_t)blockDim.x * gridDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += stride) {
    c[i] = a[i] + b[i];
  }
}

// y = alpha * x + y (SAXPY), the same pattern with a scalar: the BLAS level-1 classic.
__global__ void saxpy(float alpha, const float* x, float* y, int n) {
  size_t stride = (size_t)blockDim.x * gridDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += stride) {
    y[i] = alpha * x[i] + y[i];
  }
}

// Reads one element past the end of a: the cpu runtime's guard pages turn it into an error.
__global__ void read_past_end(const float* a, float* c, int n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= (size_t)n) c[i < (size_t)n ? i : 0] = a[i];
}
