// Launches matmul.cu's kernels on cpu_cuda.h for the tests (built with -DTILE=16 or 32).
#include "cpu_cuda.h"
#include "matmul.cu"

extern "C" const char* matmul_error(void) { return cpu_cuda::error; }

// which: 0 = matmul_naive, 1 = matmul_tiled; block (TILE, TILE), grid over C; reverse: run
// each block's threads last to first.
extern "C" int matmul_run(int which, int reverse, const float* A, const float* B, float* C,
                          int M, int N, int K) {
  dim3 block{TILE, TILE, 1};
  dim3 grid{(unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE), 1};
  if (which == 0)
    return cpu_cuda::launch(grid, block, reverse, [&] { matmul_naive(A, B, C, M, N, K); });
  return cpu_cuda::launch(grid, block, reverse, [&] { matmul_tiled(A, B, C, M, N, K); });
}
