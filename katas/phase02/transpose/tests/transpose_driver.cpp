// Launches transpose.cu's kernels on cpu_cuda.h for the tests, with global-memory tracing.
#include "cpu_cuda.h"
#include "transpose.cu"

extern "C" const char* transpose_error(void) { return cpu_cuda::error; }

// which: 0 naive, 1 tiled, 2 padded; block (32, 8), grid over the tiles of `in`. stats gets
// {load requests, load sectors, load bytes, store requests, store sectors, store bytes}.
extern "C" int transpose_run(int which, int reverse, const float* in, float* out, int rows,
                             int cols, long* stats) {
  dim3 block{32, 8, 1};
  dim3 grid{(unsigned)((cols + 31) / 32), (unsigned)((rows + 31) / 32), 1};
  size_t bytes = (size_t)rows * cols * sizeof(float);
  cpu_cuda::buffers = {{(uintptr_t)in, (uintptr_t)in + bytes}, {(uintptr_t)out, (uintptr_t)out + bytes}};
  cpu_cuda::events.clear();
  cpu_cuda::tracing = true;
  int rc;
  if (which == 0)
    rc = cpu_cuda::launch(grid, block, reverse, [&] { transpose_naive(in, out, rows, cols); });
  else if (which == 1)
    rc = cpu_cuda::launch(grid, block, reverse, [&] { transpose_tiled(in, out, rows, cols); });
  else
    rc = cpu_cuda::launch(grid, block, reverse, [&] { transpose_padded(in, out, rows, cols); });
  cpu_cuda::tracing = false;
  for (int s = 0; s < 2; s++) {
    cpu_cuda::Summary sum = cpu_cuda::trace_summary(s == 1);
    stats[3 * s] = sum.requests;
    stats[3 * s + 1] = sum.sectors;
    stats[3 * s + 2] = sum.bytes;
  }
  cpu_cuda::events.clear();
  return rc;
}
