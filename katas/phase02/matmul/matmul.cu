// YOUR FILE. C (M x N) = A (M x K) * B (K x N), row-major floats.
//
// Launch (both kernels): block (TILE, TILE), grid (ceil(N / TILE), ceil(M / TILE)); thread
// (x, y) of block (bx, by) computes C[by * TILE + y][bx * TILE + x]. The tests compile this
// file with -DTILE=16 and with -DTILE=32. Until you write a kernel it leaves C untouched, which
// the tests report as "not written yet".
#ifndef TILE
#define TILE 16
#endif

// Task "naive": one thread per element of C, reading A's row and B's column from global memory.
__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K) {
  // TODO: row, col from the block and thread indices; skip threads outside C; dot product.
}

// Task "tiled": stage TILE x TILE tiles of A and B in shared memory, one element per thread per
// tile, then multiply from there. Sizes need not be multiples of TILE.
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  // TODO: for each tile along K: load As, Bs (0 outside the matrices), __syncthreads(),
  // accumulate TILE products, __syncthreads(); then write C if inside it.
}
