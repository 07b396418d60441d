// A minimal CPU stand-in for the CUDA runtime, for the phase 02 katas' tests (the same file
// in matmul/, transpose/ and reduction/; to be replaced by harness.cuda's CPU backend). A kernel is compiled as
// C++; blocks run one after another; the threads of a block are fibers (ucontext) on one OS
// thread, each running until it reaches __syncthreads() or returns. A block whose threads all
// wait at the barrier continues; a barrier that some threads never reach (they returned) is
// reported as a deadlock. The threads of a block run in a chosen order, forward or reverse:
// a kernel whose result depends on it is missing a barrier. Warp shuffles (__shfl_down_sync,
// __shfl_xor_sync, __shfl_sync) are warp-synchronous: a lane waits until every running lane
// of its warp has reached the shuffle, then all exchange values at once (full mask assumed).
//
// Built with clang's -fsanitize-coverage=edge,trace-loads,trace-stores, every load and store
// of a registered global buffer is recorded with its thread and instruction; trace_summary()
// then groups the 32 lanes of a warp executing one instruction into one request and counts
// the 32-byte sectors it touches, as the GPU's memory system would.
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

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
enum State { READY, AT_BARRIER, AT_SHUFFLE, DONE };
struct Fiber {
  ucontext_t ctx;
  State state;
  dim3 tid;
  unsigned long long value, result;  // a shuffle's operand and result, as bits
  int src;  // the lane it reads, or -1 for its own value
};
static ucontext_t scheduler;
static std::vector<Fiber> fibers;
static std::vector<char> stacks;
static size_t current = 0;
static std::function<void()>* body = nullptr;
static char error[256] = "";
static uint32_t block_linear = 0;  // the running block, for the trace
// extern __shared__ arrays: the tests' build rewrites them to point here (the launch's bytes).
alignas(16) static char dynamic_shared[48 * 1024];
constexpr size_t STACK = 64 * 1024;

inline void syncthreads() {
  fibers[current].state = AT_BARRIER;
  swapcontext(&fibers[current].ctx, &scheduler);
  threadIdx = fibers[current].tid;
}

template <typename T>
T shuffle(T v, int src) {
  static_assert(sizeof(T) <= 8, "shuffles move up to 8 bytes");
  Fiber& me = fibers[current];
  me.value = 0;
  memcpy(&me.value, &v, sizeof(T));
  me.src = src;
  me.state = AT_SHUFFLE;
  swapcontext(&me.ctx, &scheduler);
  threadIdx = fibers[current].tid;
  T out;
  memcpy(&out, &fibers[current].result, sizeof(T));
  return out;
}

// Release warps whose running lanes all wait at a shuffle; true if one was released.
inline bool release_shuffles() {
  bool any = false;
  for (size_t w = 0; w * 32 < fibers.size(); w++) {
    size_t lo = w * 32, hi = lo + 32 < fibers.size() ? lo + 32 : fibers.size();
    bool waiting = false, all = true;
    for (size_t i = lo; i < hi; i++) {
      if (fibers[i].state == AT_SHUFFLE) waiting = true;
      else if (fibers[i].state != DONE) all = false;
    }
    if (!waiting || !all) continue;
    for (size_t i = lo; i < hi; i++) {
      Fiber& f = fibers[i];
      if (f.state != AT_SHUFFLE) continue;
      size_t src = f.src < 0 ? i : lo + (size_t)f.src;
      bool ok = f.src >= 0 && src < hi && fibers[src].state == AT_SHUFFLE;
      f.result = ok ? fibers[src].value : f.value;
    }
    for (size_t i = lo; i < hi; i++)
      if (fibers[i].state == AT_SHUFFLE) fibers[i].state = READY;
    any = true;
  }
  return any;
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
          if (release_shuffles()) continue;
          size_t waiting = 0, done = 0, shuffling = 0;
          for (auto& fb : fibers) {
            waiting += fb.state == AT_BARRIER;
            done += fb.state == DONE;
            shuffling += fb.state == AT_SHUFFLE;
          }
          if (done == n) break;
          if (shuffling) {
            snprintf(error, sizeof error,
                     "deadlock: %zu threads of block (%u, %u) wait at a warp shuffle that other "
                     "lanes of their warp do not reach (they wait at __syncthreads() or returned)",
                     shuffling, bx, by);
            return -1;
          }
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

template <typename T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int = 32) {
  int lane = (int)(cpu_cuda::current % 32);
  return cpu_cuda::shuffle(v, lane + (int)delta < 32 ? lane + (int)delta : -1);
}
template <typename T>
T __shfl_up_sync(unsigned, T v, unsigned delta, int = 32) {
  int lane = (int)(cpu_cuda::current % 32);
  return cpu_cuda::shuffle(v, lane - (int)delta >= 0 ? lane - (int)delta : -1);
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask, int = 32) {
  return cpu_cuda::shuffle(v, (int)(cpu_cuda::current % 32) ^ (mask & 31));
}
template <typename T>
T __shfl_sync(unsigned, T v, int src, int = 32) {
  return cpu_cuda::shuffle(v, src & 31);
}
