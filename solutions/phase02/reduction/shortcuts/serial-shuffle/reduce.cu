// Block-wise sums: out[blockIdx.x] = sum of the block's part of in[0..n) (reference).
//
// Launch both with a power-of-two block of 64..1024 threads, grid-stride over n: thread t of
// block b first adds in[b * blockDim.x + t], in[... + blockDim.x * gridDim.x], ... serially,
// then the block combines its blockDim.x partial sums. reduce_shared needs
// blockDim.x * sizeof(float) bytes of dynamic shared memory; reduce_shuffle 32 floats, static.

// Tree in shared memory, sequential addressing: at each step the lower half adds the upper
// half, so active threads stay contiguous (whole warps retire together, no divergence within
// the active warps) and consecutive threads touch consecutive banks (no conflicts).
__global__ void reduce_shared(const float* in, float* out, int n) {
  extern __shared__ float buf[];
  float sum = 0.0f;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n;
       i += (size_t)blockDim.x * gridDim.x)
    sum += in[i];
  buf[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();  // every step reads what the previous one wrote
  }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}

// Sum within a warp with shuffles: five steps, no shared memory, no barrier; lane 0 ends with
// the warp's total.
__device__ float warp_sum(float v) {
  // Shortcut: lane 0 pulls every lane's value in turn: 32 shuffles instead of 5.
  float total = 0.0f;
  for (int lane = 0; lane < 32; lane++) total += __shfl_sync(0xffffffffu, v, lane);
  return total;
}

// Warps first, then one warp over the per-warp totals: one barrier instead of log2(blockDim).
__global__ void reduce_shuffle(const float* in, float* out, int n) {
  __shared__ float warp_totals[32];
  float sum = 0.0f;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n;
       i += (size_t)blockDim.x * gridDim.x)
    sum += in[i];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  sum = warp_sum(sum);
  if (lane == 0) warp_totals[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    int warps = blockDim.x / 32;
    sum = lane < warps ? warp_totals[lane] : 0.0f;
    sum = warp_sum(sum);
    if (lane == 0) out[blockIdx.x] = sum;
  }
}
