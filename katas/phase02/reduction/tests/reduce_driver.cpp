// Launches reduce.cu's kernels on cpu_cuda.h for the tests.
#include "cpu_cuda.h"
#include "reduce.cu"

extern "C" const char* reduce_error(void) { return cpu_cuda::error; }

// which: 0 reduce_shared, 1 reduce_shuffle; out gets one partial sum per block.
extern "C" int reduce_run(int which, int reverse, const float* in, float* out, int n, int grid,
                          int block) {
  dim3 g{(unsigned)grid, 1, 1}, b{(unsigned)block, 1, 1};
  if (which == 0)
    return cpu_cuda::launch(g, b, reverse, [&] { reduce_shared(in, out, n); });
  return cpu_cuda::launch(g, b, reverse, [&] { reduce_shuffle(in, out, n); });
}
