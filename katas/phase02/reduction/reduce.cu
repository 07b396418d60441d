// YOUR FILE. Block-wise sums: out[blockIdx.x] = the sum of this block's share of in[0..n).
//
// Launch both with a power-of-two block of 64..1024 threads and any grid: thread t of block b
// first adds up in[b * blockDim.x + t], then every blockDim.x * gridDim.x further (a
// grid-stride loop), then the block combines its blockDim.x partial sums. reduce_shared gets
// blockDim.x * sizeof(float) bytes of dynamic shared memory. Until you write a kernel it
// leaves `out` untouched, which the tests report as "not written yet".

// Task "tree": combine the partial sums in shared memory, halving the active threads each step
// (s = blockDim.x / 2, /4, ... 1: thread t < s adds buf[t + s]), with a barrier per step.
__global__ void reduce_shared(const float* in, float* out, int n) {
  extern __shared__ float buf[];
  // TODO
}

// Task "shuffle": sum within each warp with __shfl_down_sync (offsets 16, 8, 4, 2, 1), put the
// warp totals in warp_totals, one barrier, then warp 0 sums those the same way.
__global__ void reduce_shuffle(const float* in, float* out, int n) {
  __shared__ float warp_totals[32];
  // TODO
}
