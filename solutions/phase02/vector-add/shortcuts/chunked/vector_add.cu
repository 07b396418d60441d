// Shortcut: any grid covers any n, but thread t owns elements [t * chunk, (t + 1) * chunk):
// neighbouring lanes are `chunk` floats apart, so no access of a warp is coalesced.
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
  size_t threads = (size_t)blockDim.x * gridDim.x;
  size_t chunk = ((size_t)n + threads - 1) / threads;
  size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t i = t * chunk; i < (t + 1) * chunk && i < (size_t)n; i++) c[i] = a[i] + b[i];
}

__global__ void saxpy(float alpha, const float* x, float* y, int n) {
  size_t threads = (size_t)blockDim.x * gridDim.x;
  size_t chunk = ((size_t)n + threads - 1) / threads;
  size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t i = t * chunk; i < (t + 1) * chunk && i < (size_t)n; i++) y[i] = alpha * x[i] + y[i];
}
