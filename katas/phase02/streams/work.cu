// GIVEN (not graded): the kernel the pipeline runs on each chunk. y[i] = x[i] pushed through
// `iters` multiply-adds: the tests choose `iters` so that the kernel over the whole array takes
// about as long as copying it to the device, the case where overlap pays most.
// Launch: block 256, grid ceil(n / 256), on the chunk's pointers and length.
extern "C" __global__ void work(const float* x, float* y, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int k = 0; k < iters; k++) v = fmaf(v, 0.999f, 0.001f);
  y[i] = v;
}
