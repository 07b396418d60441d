// A minimal CPU stand-in for the CUDA runtime, for this kata's tests. A kernel is compiled as
// C++; blocks run one after another; the threads of a block are fibers (ucontext) on one OS
// thread, each running until it reaches __syncthreads() or returns. A block whose threads all
// wait at the barrier continues; a barrier that some threads never reach (they returned) is
// reported as a deadlock. The threads of a block run in a chosen order, forward or reverse:
// a kernel whose result depends on it is missing a barrier.
//
// Built with clang's -fsanitize-coverage=edge,trace-loads,trace-stores, every load and store
// of a registered global buffer is recorded with its thread and instruction; trace_summary()
// then groups the 32 lanes of a warp executing one instruction into one request and counts
// the 32-byte sectors it touches, as the GPU's memory system would.
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <stdint.h>

#include <functional>
#include <map>
#include <set>
#include <tuple>
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
static uint32_t block_linear = 0;  // the running block, for the trace
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
        block_linear = (bz * grid.y + by) * grid.x + bx;
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

// ---------------------------------------------------------------- tracing of global accesses
struct Event {
  uint32_t block, tid;
  uintptr_t pc, addr;
  uint32_t size;
  bool store;
};
static std::vector<std::pair<uintptr_t, uintptr_t>> buffers;  // [begin, end) of global arrays
static std::vector<Event> events;
static bool tracing = false;

inline void record(void* p, uint32_t size, void* pc, bool store) {
  if (!tracing) return;
  uintptr_t a = (uintptr_t)p;
  for (auto& b : buffers)
    if (a >= b.first && a < b.second) {
      events.push_back({block_linear, (uint32_t)current, (uintptr_t)pc, a, size, store});
      return;
    }
}

// Totals over the launch, for loads (store = false) or stores: warp-level requests, sectors
// fetched, bytes the lanes used.
struct Summary {
  long requests = 0, sectors = 0, bytes = 0;
};
inline Summary trace_summary(bool store) {
  // (block, warp, pc, k-th execution by a lane) -> sectors and bytes of that request
  std::map<std::tuple<uint32_t, uint32_t, uintptr_t, uint32_t>, std::pair<std::set<uintptr_t>, std::set<uintptr_t>>> reqs;
  std::map<std::tuple<uint32_t, uint32_t, uintptr_t>, uint32_t> seen;  // (block, thread, pc)
  for (auto& e : events) {
    if (e.store != store) continue;
    uint32_t k = seen[{e.block, e.tid, e.pc}]++;
    auto& r = reqs[{e.block, e.tid / 32, e.pc, k}];
    for (uintptr_t b = e.addr; b < e.addr + e.size; b++) {
      r.first.insert(b / 32);
      r.second.insert(b);
    }
  }
  Summary s;
  for (auto& kv : reqs) {
    s.requests++;
    s.sectors += (long)kv.second.first.size();
    s.bytes += (long)kv.second.second.size();
  }
  return s;
}
}  // namespace cpu_cuda

#define CPU_CUDA_HOOK(n, T)                                                                     \
  extern "C" void __sanitizer_cov_load##n(T* p) {                                               \
    cpu_cuda::record(p, n, __builtin_return_address(0), false);                                 \
  }                                                                                             \
  extern "C" void __sanitizer_cov_store##n(T* p) {                                              \
    cpu_cuda::record(p, n, __builtin_return_address(0), true);                                  \
  }
CPU_CUDA_HOOK(1, uint8_t)
CPU_CUDA_HOOK(2, uint16_t)
CPU_CUDA_HOOK(4, uint32_t)
CPU_CUDA_HOOK(8, uint64_t)
CPU_CUDA_HOOK(16, __int128)

#define __syncthreads() cpu_cuda::syncthreads()
