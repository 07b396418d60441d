// A minimal CPU stand-in for the CUDA runtime, for this kata's tests. A kernel is compiled as
// C++; blocks run one after another; the threads of a block are fibers (ucontext) on one OS
// thread, each running until it reaches __syncthreads() or returns. A block whose threads all
// wait at the barrier continues; a barrier that some threads never reach (they returned) is
// reported as a deadlock. The threads of a block run in a chosen order, forward or reverse:
// a kernel whose result depends on it is missing a barrier.
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <functional>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
static dim3 threadIdx, blockIdx, blockDim, gridDim;  // threadIdx is switched with the fiber

#define __global__
#define __device__
#define __host__
// Function-static: one copy, shared by the block's threads; blocks run one at a time.
#define __shared__ static

namespace cpu_cuda {
enum State { READY, AT_BARRIER, DONE };
struct Fiber {
  ucontext_t ctx;
  State state;
  dim3 tid;
};
static ucontext_t scheduler;
static std::vector<Fiber> fibers;
static std::vector<char> stacks;
static size_t current = 0;
static std::function<void()>* body = nullptr;
static char error[256] = "";
constexpr size_t STACK = 64 * 1024;

inline void syncthreads() {
  fibers[current].state = AT_BARRIER;
  swapcontext(&fibers[current].ctx, &scheduler);
  threadIdx = fibers[current].tid;
}

inline void fiber_main() {
  threadIdx = fibers[current].tid;
  (*body)();
  fibers[current].state = DONE;  // uc_link returns to the scheduler
}

// Run f() as every thread of a grid x block launch, each block's threads in forward (reverse
// = false) or reverse order. Returns 0, or -1 with error set.
inline int launch(dim3 grid, dim3 block, bool reverse, std::function<void()> f) {
  error[0] = '\0';
  gridDim = grid;
  blockDim = block;
  body = &f;
  size_t n = (size_t)block.x * block.y * block.z;
  if (n == 0 || n > 1024) {
    snprintf(error, sizeof error, "invalid block size %zu (1..1024 threads)", n);
    return -1;
  }
  fibers.assign(n, Fiber{});
  stacks.resize(n * STACK);
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++) {
        blockIdx = {bx, by, bz};
        size_t t = 0;
        for (unsigned z = 0; z < block.z; z++)
          for (unsigned y = 0; y < block.y; y++)
            for (unsigned x = 0; x < block.x; x++, t++) {
              Fiber& fb = fibers[t];
              fb.tid = {x, y, z};
              fb.state = READY;
              getcontext(&fb.ctx);
              fb.ctx.uc_stack.ss_sp = &stacks[t * STACK];
              fb.ctx.uc_stack.ss_size = STACK;
              fb.ctx.uc_link = &scheduler;
              makecontext(&fb.ctx, fiber_main, 0);
            }
        for (;;) {
          for (size_t k = 0; k < n; k++) {
            current = reverse ? n - 1 - k : k;
            if (fibers[current].state == READY) swapcontext(&scheduler, &fibers[current].ctx);
          }
          size_t waiting = 0, done = 0;
          for (auto& fb : fibers) (fb.state == AT_BARRIER ? waiting : done) += fb.state != READY;
          if (done == n) break;
          if (waiting + done == n && done > 0) {
            snprintf(error, sizeof error,
                     "deadlock: %zu of %zu threads of block (%u, %u) wait at __syncthreads() "
                     "that the other %zu returned without reaching",
                     waiting, n, bx, by, done);
            return -1;
          }
          for (auto& fb : fibers)
            if (fb.state == AT_BARRIER) fb.state = READY;  // everyone arrived: release
        }
      }
  return 0;
}
}  // namespace cpu_cuda

#define __syncthreads() cpu_cuda::syncthreads()
