// C (M x N) = A (M x K) * B (K x N), row-major floats (reference).
//
// Launch: block (TILE, TILE), grid (ceil(N / TILE), ceil(M / TILE)); thread (x, y) of block
// (bx, by) computes C[by * TILE + y][bx * TILE + x]. Compile with -DTILE=16 or -DTILE=32.
#ifndef TILE
#define TILE 16
#endif

// Naive: every thread reads a whole row of A and column of B from global memory: 2K loads
// per 2K flops, and each element of A and B is loaded N (resp. M) times over the grid.
__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K) {
  // Shortcut: x and y swapped inside the (square) block: still one thread per element, but
  // the lanes of a warp now walk down a column of A: K floats apart, 32 sectors per load.
  int row = blockIdx.y * blockDim.y + threadIdx.x;
  int col = blockIdx.x * blockDim.x + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; k++) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}

// Tiled: the block stages a TILE x TILE tile of A and of B in shared memory, then every thread
// does TILE multiply-adds from there. Each global element is loaded once per block instead of
// once per thread: TILE times fewer global loads.
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty;
  int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < K; t += TILE) {
    // Out-of-range elements load as 0, so partial tiles (sizes not a multiple of TILE) add
    // nothing; no thread returns early, because every thread must reach both barriers.
    As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
    Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
    __syncthreads();  // the tiles are complete before anyone reads them
    for (int k = 0; k < TILE; k++) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();  // everyone is done reading before the next iteration overwrites them
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
