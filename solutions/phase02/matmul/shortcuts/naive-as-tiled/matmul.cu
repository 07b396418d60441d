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
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; k++) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}

// Tiled: the block stages a TILE x TILE tile of A and of B in shared memory, then every thread
// does TILE multiply-adds from there. Each global element is loaded once per block instead of
// once per thread: TILE times fewer global loads.
// Shortcut: "tiled" is the naive kernel again: no shared memory, every load from global.
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; k++) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}
