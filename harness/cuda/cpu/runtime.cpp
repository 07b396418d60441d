// runtime.cpp: the cpu backend's launcher for harness.cuda.
//
// A launch runs the grid's blocks one after another. Inside a block, each CUDA thread is a fiber
// with a small stack of its own (switched by a few lines of assembly, so a switch costs
// nanoseconds, not a sigprocmask system call as swapcontext does). A fiber runs until it reaches
// __syncthreads, a warp collective or its end; the scheduler then runs the next runnable fiber
// in the launch's schedule order (kata_schedule_t: forward, reverse, seeded random, or seeded
// random with preemption at traced memory accesses), and releases a barrier or a collective
// once every thread it waits for has arrived. Kernels that use neither run without
// fibers: one plain call per thread.
//
// A launch normally runs in a forked child: device buffers are MAP_SHARED mappings with guard
// pages, so the child's writes are the results, and an out-of-bounds access, a deadlock or a
// crash is written to a shared result record and the child exits. The parent never dies.
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <initializer_list>

#include "kata_cuda_types.h"
#include "kata_launch.h"  // the launch interface (cffi reads it too)

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000  // Linux 4.17; older kernels take it as a hint (checked)
#endif

#if !defined(__x86_64__)
#error "the harness.cuda cpu backend needs x86-64 (fiber switch in assembly)"
#endif

extern "C" {
uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;
}

// ------------------------------------------------------------------ fibers
asm(R"(
.text
.globl kata_fiber_switch
.hidden kata_fiber_switch
.type kata_fiber_switch,@function
kata_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size kata_fiber_switch, .-kata_fiber_switch
)");
extern "C" void kata_fiber_switch(void** save_sp, void* to_sp);

namespace {

constexpr int kMaxThreads = 1024;
constexpr size_t kStackSize = 128 * 1024;
constexpr size_t kDynSharedMax = 48 * 1024;

enum State { RUNNABLE = 0, AT_BARRIER = 1, AT_WARP = 2, DONE = 3 };

struct Fiber {
    void* sp;
    int line;
    // the pending warp collective
    int wop;
    unsigned wmask;
    uint64_t wvalue;
    int warg;
    int wwidth;
    uint64_t wresult;
};

size_t g_page = 4096;
char* g_stacks = nullptr;  // kMaxThreads stacks, each with a guard page below it
Fiber g_fibers[kMaxThreads];
// Fiber states apart from the fibers: the scheduler scans them after every pass, and a 256-byte
// array stays in L1 where scanning the Fiber records would evict the threads' stacks.
unsigned char g_st[kMaxThreads];
unsigned char g_pred[kMaxThreads];  // __syncthreads_count/and/or predicates, read at release
inline unsigned char& state_of(const Fiber& f) { return g_st[&f - g_fibers]; }
unsigned g_order[kMaxThreads];
unsigned g_nthreads = 0;
unsigned g_current = 0;
void* g_sched_sp = nullptr;
bool g_in_fiber_mode = false;
bool g_in_kernel = false;
int g_barrier_result = 0;
const kata_launch_t* g_launch = nullptr;
kata_result_t* g_result = nullptr;  // where errors go (shared page in isolated mode)
kata_result_t* g_shared_result = nullptr;
unsigned char* g_dyn_shared = nullptr;  // kDynSharedMax bytes, a guard page after
size_t g_dyn_offset = 0;
uint64_t g_rng = 1;
char* g_altstack = nullptr;
bool g_handlers = false;
kata_event* g_events = nullptr;
size_t g_event_cap = 0;
uint64_t g_event_count = 0;
uint32_t g_gtid_base = 0;

uint64_t rng_next() {
    // xorshift64*: cheap, seeded per launch, the same sequence on every machine.
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ULL;
}

// threadIdx of every linear thread id, computed once per launch: three integer divisions at
// every fiber switch cost more than the switch itself.
uint3 g_coords[kMaxThreads];

void compute_coords() {
    for (unsigned t = 0; t < g_nthreads; ++t) {
        g_coords[t].x = t % blockDim.x;
        g_coords[t].y = (t / blockDim.x) % blockDim.y;
        g_coords[t].z = t / (blockDim.x * blockDim.y);
    }
}

inline void set_thread(unsigned tid) {
    threadIdx = g_coords[tid];
    g_current = tid;
}

void fail(int status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

void record(int status, const char* fmt, va_list ap) {
    kata_result_t* r = g_result;
    if (r == nullptr || r->status != KATA_OK) return;
    r->status = status;
    r->block[0] = blockIdx.x;
    r->block[1] = blockIdx.y;
    r->block[2] = blockIdx.z;
    r->thread[0] = threadIdx.x;
    r->thread[1] = threadIdx.y;
    r->thread[2] = threadIdx.z;
    vsnprintf(r->message, sizeof r->message, fmt, ap);
}

// A spare child of the launch server replies to the pytest process itself, before it exits, so
// the reply waits neither for the server nor for this process's teardown. Whoever first takes
// the flag (this child, or the server once the child is gone) sends the one reply.
int g_reply_sock = -1;
int* g_reply_flag = nullptr;  // in the shared result page, after the record
constexpr size_t kReplyFlagOffset = 3584;
static_assert(sizeof(kata_result_t) < kReplyFlagOffset, "the reply flag overlaps the result");

bool take_reply() { return __atomic_exchange_n(g_reply_flag, 1, __ATOMIC_SEQ_CST) == 0; }

[[noreturn]] void finish_child(int code) {
    fflush(stdout);
    fflush(stderr);
    if (g_reply_sock >= 0 && g_reply_flag != nullptr && take_reply()) {
        send(g_reply_sock, g_shared_result, sizeof(kata_result_t), MSG_NOSIGNAL);
    }
    _exit(code);
}

// An error inside a kernel ends the launch: in the child, exit; in-process, stop the launch by
// jumping back out of the kernel is not possible from a fiber, so in-process launches abort.
void fail(int status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(status, fmt, ap);
    va_end(ap);
    if (g_launch != nullptr && g_launch->isolate) finish_child(3);
    fprintf(stderr, "harness.cuda: %s\n", g_result ? g_result->message : "kernel error");
    abort();
}

// Lanes waiting at a warp collective: most kernels have none, and resolve_warps is skipped.
unsigned g_at_warp = 0;

// The scheduler's position in this pass over g_order, and how many fibers the pass ran.
unsigned g_pos = 0;
int g_ran = 0;

// Leave the running fiber (its stack pointer saved in *save) for the next runnable fiber of this
// pass, directly: going through the scheduler would cost a second switch per fiber. The last one
// of the pass returns to the scheduler. Whoever resumes a fiber has set threadIdx for it.
void yield_from(void** save) {
    for (unsigned i = g_pos + 1; i < g_nthreads; ++i) {
        unsigned t = g_order[i];
        if (g_st[t] == RUNNABLE) {
            g_pos = i;
            ++g_ran;
            set_thread(t);
            kata_fiber_switch(save, g_fibers[t].sp);
            return;
        }
    }
    kata_fiber_switch(save, g_sched_sp);
}

void fiber_entry() {
    const kata_launch_t* L = g_launch;
    L->call(L->args);
    Fiber& f = g_fibers[g_current];
    state_of(f) = DONE;
    yield_from(&f.sp);
    __builtin_unreachable();
}

void fiber_init(unsigned tid) {
    Fiber& f = g_fibers[tid];
    // Stagger the tops by 64 bytes per thread: tops at the same offset in a page all map to the
    // same L1 cache set, and every switch would evict the last thread's saved registers.
    char* top = g_stacks + (size_t)(tid + 1) * (kStackSize + g_page) - (tid % 64) * 64;
    uint64_t* sp = reinterpret_cast<uint64_t*>(top);
    *--sp = 0;                                             // fake return address of fiber_entry
    *--sp = reinterpret_cast<uint64_t>(&fiber_entry);      // popped by `ret` in the switch
    for (int i = 0; i < 6; ++i) *--sp = 0;                 // rbp rbx r12-r15
    f.sp = sp;
    state_of(f) = RUNNABLE;
    f.line = 0;
}

// The stacks region is reserved once (PROT_NONE) and stacks are opened up as blocks need them:
// a guard page below each stack costs a mapping (VMA) of its own, and every fork copies them
// all, so 1024 stacks up front would make each launch's fork slower for 256-thread kernels.
unsigned g_stacks_ready = 0;

bool ensure_stacks(unsigned n) {
    size_t slot = kStackSize + g_page;
    if (g_stacks == nullptr) {
        size_t total = (size_t)kMaxThreads * slot;
#ifdef KATA_SERVER
        // Shared in the launch server: a launch child's stack pages stay in place for the next
        // one (no zero-filled page per fiber per launch). Nothing else ever uses them.
        int share = MAP_SHARED;
#else
        int share = MAP_PRIVATE;  // a pytest process's forked children must not share them
#endif
        void* p = mmap(nullptr, total, PROT_NONE, share | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return false;
        g_stacks = static_cast<char*>(p);
    }
    if (n > (unsigned)kMaxThreads) n = kMaxThreads;
    if (n <= g_stacks_ready) return true;
    // Open stacks in groups of 64 so that a growing block size costs few calls.
    unsigned want = (n + 63) / 64 * 64;
    if (want > (unsigned)kMaxThreads) want = kMaxThreads;
    for (unsigned i = g_stacks_ready; i < want; ++i) {
        if (mprotect(g_stacks + (size_t)i * slot + g_page, kStackSize, PROT_READ | PROT_WRITE) != 0) {
            return false;
        }
    }
    g_stacks_ready = want;
    return true;
}

const char* wop_name(int op) {
    switch (op) {
        case KATA_WOP_SHFL: return "__shfl_sync";
        case KATA_WOP_SHFL_UP: return "__shfl_up_sync";
        case KATA_WOP_SHFL_DOWN: return "__shfl_down_sync";
        case KATA_WOP_SHFL_XOR: return "__shfl_xor_sync";
        case KATA_WOP_BALLOT: return "__ballot_sync";
        case KATA_WOP_ANY: return "__any_sync";
        case KATA_WOP_ALL: return "__all_sync";
        case KATA_WOP_SYNC: return "__syncwarp";
        case KATA_WOP_ACTIVEMASK: return "__activemask";
        case KATA_WOP_REDUCE_ADD: return "__reduce_add_sync";
        case KATA_WOP_REDUCE_MIN: return "__reduce_min_sync";
        case KATA_WOP_REDUCE_MAX: return "__reduce_max_sync";
        default: return "warp collective";
    }
}

void thread_coords(unsigned tid, unsigned* x, unsigned* y, unsigned* z) {
    *x = tid % blockDim.x;
    *y = (tid / blockDim.x) % blockDim.y;
    *z = tid / (blockDim.x * blockDim.y);
}

// Resolve one group of lanes of warp `w` (bit i of `group` = lane i) waiting at `op`.
void resolve_group(unsigned w, unsigned group, int op) {
    unsigned base = w * 32;
    uint64_t values[32];
    for (unsigned l = 0; l < 32; ++l) values[l] = (group >> l & 1) ? g_fibers[base + l].wvalue : 0;
    unsigned ballot = 0;
    uint64_t sum = 0, mn = UINT64_MAX, mx = 0;
    for (unsigned l = 0; l < 32; ++l) {
        if (!(group >> l & 1)) continue;
        if (values[l]) ballot |= 1u << l;
        uint32_t v = (uint32_t)values[l];
        sum += v;
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    for (unsigned l = 0; l < 32; ++l) {
        if (!(group >> l & 1)) continue;
        Fiber& f = g_fibers[base + l];
        int width = f.wwidth;
        if (width <= 0 || width > 32 || (width & (width - 1))) {
            set_thread(base + l);
            fail(KATA_USAGE, "%s at line %d: width %d is not a power of two in 1..32", wop_name(op),
                 f.line, width);
        }
        int seg = (int)l & ~(width - 1);
        int src = (int)l;
        switch (op) {
            case KATA_WOP_SHFL: src = seg + (f.warg & (width - 1)); break;
            case KATA_WOP_SHFL_UP: src = (int)l - f.warg; if (src < seg) src = (int)l; break;
            case KATA_WOP_SHFL_DOWN: src = (int)l + f.warg; if (src >= seg + width) src = (int)l; break;
            case KATA_WOP_SHFL_XOR: src = (int)l ^ f.warg; if (src >= seg + width || src < seg) src = (int)l; break;
            default: break;
        }
        switch (op) {
            case KATA_WOP_SHFL:
            case KATA_WOP_SHFL_UP:
            case KATA_WOP_SHFL_DOWN:
            case KATA_WOP_SHFL_XOR:
                f.wresult = (src >= 0 && src < 32 && (group >> src & 1)) ? values[src] : values[l];
                break;
            case KATA_WOP_BALLOT: f.wresult = ballot; break;
            case KATA_WOP_ANY: f.wresult = ballot != 0; break;
            case KATA_WOP_ALL: f.wresult = ballot == group; break;
            case KATA_WOP_ACTIVEMASK: f.wresult = group; break;
            case KATA_WOP_REDUCE_ADD: f.wresult = (uint32_t)sum; break;
            case KATA_WOP_REDUCE_MIN: f.wresult = mn; break;
            case KATA_WOP_REDUCE_MAX: f.wresult = mx; break;
            default: f.wresult = 0; break;
        }
        state_of(f) = RUNNABLE;
        --g_at_warp;
    }
}

// Release the warp collectives that are complete. Returns how many groups were released.
int resolve_warps() {
    int released = 0;
    unsigned nwarps = (g_nthreads + 31) / 32;
    for (unsigned w = 0; w < nwarps; ++w) {
        unsigned base = w * 32;
        unsigned lanes = g_nthreads - base < 32 ? g_nthreads - base : 32;
        unsigned exists = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
        unsigned waiting = 0, live = 0, runnable = 0;
        for (unsigned l = 0; l < lanes; ++l) {
            int s = g_st[base + l];
            if (s == AT_WARP) waiting |= 1u << l;
            if (s != DONE) live |= 1u << l;
            if (s == RUNNABLE) runnable |= 1u << l;
        }
        if (!waiting) continue;
        // Collectives with an explicit mask: complete once every lane of the mask waits.
        for (unsigned l = 0; l < lanes; ++l) {
            Fiber& f = g_fibers[base + l];
            if (state_of(f) != AT_WARP || f.wop == KATA_WOP_ACTIVEMASK) continue;
            unsigned mask = f.wmask & exists;
            if (!(f.wmask >> l & 1)) {
                set_thread(base + l);
                fail(KATA_USAGE, "%s at line %d: mask 0x%08x does not include the calling lane %u",
                     wop_name(f.wop), f.line, f.wmask, l);
            }
            unsigned exited = mask & ~live;
            if (exited) {
                set_thread(base + l);
                int lane = __builtin_ctz(exited);
                unsigned x, y, z;
                thread_coords(base + lane, &x, &y, &z);
                fail(KATA_DEADLOCK,
                     "%s at line %d: its mask 0x%08x names lane %d (thread (%u,%u,%u)), which has "
                     "already exited, so the collective can never complete",
                     wop_name(f.wop), f.line, f.wmask, lane, x, y, z);
            }
            if ((waiting & mask) != mask) continue;
            for (unsigned m = mask; m; m &= m - 1) {
                Fiber& g = g_fibers[base + __builtin_ctz(m)];
                if (g.wop != f.wop || g.wmask != f.wmask) {
                    set_thread(base + l);
                    fail(KATA_USAGE,
                         "%s at line %d (mask 0x%08x) meets %s at line %d (mask 0x%08x) in one "
                         "warp: the lanes of a mask must call the same collective",
                         wop_name(f.wop), f.line, f.wmask, wop_name(g.wop), g.line, g.wmask);
                }
            }
            resolve_group(w, mask, f.wop);
            waiting &= ~mask;
            ++released;
        }
        // __activemask: once no lane of the warp can run, the lanes at one call site are active.
        if (runnable) continue;
        for (unsigned l = 0; l < lanes; ++l) {
            Fiber& f = g_fibers[base + l];
            if (state_of(f) != AT_WARP || f.wop != KATA_WOP_ACTIVEMASK) continue;
            unsigned group = 0;
            for (unsigned k = l; k < lanes; ++k) {
                Fiber& g = g_fibers[base + k];
                if (state_of(g) == AT_WARP && g.wop == KATA_WOP_ACTIVEMASK && g.line == f.line) {
                    group |= 1u << k;
                }
            }
            resolve_group(w, group, KATA_WOP_ACTIVEMASK);
            ++released;
        }
    }
    return released;
}

// Release the block barrier once every thread of the block has reached one.
int resolve_barrier(unsigned* live) {
    unsigned at = 0, done = 0;
    int first_line = 0;
    unsigned first_done = 0;
    for (unsigned t = 0; t < g_nthreads; ++t) {
        int s = g_st[t];
        if (s == AT_BARRIER) {
            if (!at) first_line = g_fibers[t].line;
            ++at;
        } else if (s == DONE) {
            if (!done) first_done = t;
            ++done;
        }
    }
    *live = g_nthreads - done;
    if (at == 0) return 0;
    if (at == g_nthreads) {
        int count = 0, all = 1, any = 0;
        for (unsigned t = 0; t < g_nthreads; ++t) {
            count += g_pred[t];
            all &= g_pred[t];
            any |= g_pred[t];
            g_st[t] = RUNNABLE;
        }
        // Every thread reads the result before any thread can reach the next barrier.
        g_barrier_result = count;
        (void)all;
        (void)any;
        return 1;
    }
    if (done > 0) {
        unsigned x, y, z;
        thread_coords(first_done, &x, &y, &z);
        set_thread(first_done);
        fail(KATA_DEADLOCK,
             "__syncthreads() at line %d is never reached by all %u threads of the block: %u wait "
             "there, %u have exited (the first of them thread (%u,%u,%u)); an early `return` "
             "before a barrier, or a barrier inside a branch that only some threads take "
             "(`if (threadIdx.x < s) { ...; __syncthreads(); }`), deadlocks",
             first_line, g_nthreads, at, done, x, y, z);
    }
    return 0;
}

void report_stuck() {
    // Nothing can run and nothing can be released: describe who waits where.
    unsigned at = 0, warp = 0, done = 0;
    int bline = 0, wline = 0, wop = 0;
    unsigned wtid = 0;
    for (unsigned t = 0; t < g_nthreads; ++t) {
        Fiber& f = g_fibers[t];
        if (state_of(f) == AT_BARRIER) {
            if (!at) bline = f.line;
            ++at;
        } else if (state_of(f) == AT_WARP) {
            if (!warp) {
                wline = f.line;
                wop = f.wop;
                wtid = t;
            }
            ++warp;
        } else if (state_of(f) == DONE) {
            ++done;
        }
    }
    if (warp) set_thread(wtid);
    fail(KATA_DEADLOCK,
         "deadlock: %u threads wait at __syncthreads() (line %d), %u at a warp collective (%s at "
         "line %d, mask 0x%08x), %u have exited; a barrier or collective that not every thread "
         "reaches never completes",
         at, bline, warp, warp ? wop_name(wop) : "-", wline, warp ? g_fibers[wtid].wmask : 0u,
         done);
}

void shuffle_order(unsigned n) {
    for (unsigned i = n - 1; i > 0; --i) {
        unsigned j = (unsigned)(rng_next() % (i + 1));
        unsigned t = g_order[i];
        g_order[i] = g_order[j];
        g_order[j] = t;
    }
}

void make_order(unsigned n, int schedule) {
    const bool reverse = schedule == KATA_SCHEDULE_REVERSE;
    for (unsigned i = 0; i < n; ++i) g_order[i] = reverse ? n - 1 - i : i;
    if (schedule >= KATA_SCHEDULE_RANDOM) shuffle_order(n);
}

void run_block_direct(const kata_launch_t* L) {
    if (L->threads != nullptr) {
        if (L->schedule == KATA_SCHEDULE_FORWARD) {
            L->threads(L->args, nullptr, g_nthreads);
        } else {
            make_order(g_nthreads, L->schedule);
            L->threads(L->args, g_order, g_nthreads);
        }
        return;
    }
    make_order(g_nthreads, L->schedule);
    for (unsigned i = 0; i < g_nthreads; ++i) {
        set_thread(g_order[i]);
        L->call(L->args);
    }
}

void run_block_fibers(const kata_launch_t* L) {
    for (unsigned t = 0; t < g_nthreads; ++t) fiber_init(t);
    g_at_warp = 0;
    unsigned live = g_nthreads;
    make_order(g_nthreads, L->schedule);
    while (live > 0) {
        if (L->schedule >= KATA_SCHEDULE_RANDOM) shuffle_order(g_nthreads);
        g_ran = 0;
        for (unsigned i = 0; i < g_nthreads; ++i) {
            unsigned t = g_order[i];
            if (g_st[t] != RUNNABLE) continue;
            g_pos = i;
            ++g_ran;
            set_thread(t);
            kata_fiber_switch(&g_sched_sp, g_fibers[t].sp);  // back when the pass is over
            break;
        }
        int released = g_at_warp ? resolve_warps() : 0;
        released += resolve_barrier(&live);
        if (live == 0) break;
        if (!g_ran && !released) report_stuck();
    }
}

// Shared memory starts each block with garbage, as on a GPU (whatever the SM held): 0x7f bytes,
// 3.4e38 in every float (finite, so a sum that takes one in is far off, and not the NaN that
// tests use to mean "never written"), 2139062143 in every int. A kernel that reads a word its
// block never wrote
// (warp 0 loading all 32 warp totals of an 8-warp block) gets it, here too, instead of the zero
// of a fresh mapping or the previous block's value. Static __shared__ arrays lie in the
// library's kata_shared section (kata_cuda.h); dynamic ones in the launch's shared= bytes.
void shared_statics(const kata_launch_t* L, uintptr_t* lo, uintptr_t* hi) {
    *lo = *hi = 0;
    Dl_info info;
    if (L->call == nullptr || dladdr(reinterpret_cast<void*>(L->call), &info) == 0) return;
    void* h = dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == nullptr) return;
    struct range {
        uintptr_t lo, hi;
    };  // kata_range of kata_cuda.h
    auto where = reinterpret_cast<range (*)(void)>(dlsym(h, "kata_shared_statics"));
    if (where != nullptr) {
        range r = where();
        *lo = r.lo;
        *hi = r.hi;
    }
    dlclose(h);
    if (*hi < *lo) *lo = *hi = 0;
}

void fill_shared_garbage(const kata_launch_t* L, uintptr_t lo, uintptr_t hi) {
    if (hi > lo) memset(reinterpret_cast<void*>(lo), 0x7f, hi - lo);
    if (L->shared_bytes > 0 && g_dyn_shared) memset(g_dyn_shared + g_dyn_offset, 0x7f, L->shared_bytes);
}

void run_grid(const kata_launch_t* L) {
    gridDim = dim3(L->grid[0], L->grid[1], L->grid[2]);
    blockDim = dim3(L->block[0], L->block[1], L->block[2]);
    g_nthreads = L->block[0] * L->block[1] * L->block[2];
    compute_coords();
    g_rng = L->seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
    if (g_rng == 0) g_rng = 1;
    uint64_t nblocks = (uint64_t)L->grid[0] * L->grid[1] * L->grid[2];
    g_dyn_offset = (kDynSharedMax - ((L->shared_bytes + 15) & ~(size_t)15));
    g_in_fiber_mode = L->fibers != 0;
    g_in_kernel = true;
    // Random block order: a full permutation costs memory, so walk an affine bijection
    // b -> (a*b + c) mod n with a coprime to n; good enough to break "block 0 first".
    uint64_t a = 1, c = 0;
    if (L->schedule >= KATA_SCHEDULE_RANDOM && nblocks > 1) {
        a = rng_next() % nblocks | 1;
        auto gcd = [](uint64_t x, uint64_t y) { while (y) { uint64_t t = x % y; x = y; y = t; } return x; };
        while (gcd(a, nblocks) != 1) a = (a + 2) % nblocks | 1;
        c = rng_next() % nblocks;
    }
    uint64_t count = nblocks;
    if (L->nblocks > 0) {  // a probe of a few blocks of a huge grid (64-bit indexing checks)
        a = 1;
        c = 0;
        count = L->nblocks;
    }
    uintptr_t statics_lo, statics_hi;
    shared_statics(L, &statics_lo, &statics_hi);
    for (uint64_t i = 0; i < count; ++i) {
        fill_shared_garbage(L, statics_lo, statics_hi);
        uint64_t b = L->schedule == KATA_SCHEDULE_REVERSE ? count - 1 - i : (a * i + c) % count;
        if (L->nblocks > 0) b += L->first_block;
        blockIdx.x = (unsigned)(b % L->grid[0]);
        blockIdx.y = (unsigned)((b / L->grid[0]) % L->grid[1]);
        blockIdx.z = (unsigned)(b / ((uint64_t)L->grid[0] * L->grid[1]));
        g_gtid_base = (uint32_t)(b * g_nthreads);
        if (g_in_fiber_mode) {
            run_block_fibers(L);
        } else {
            run_block_direct(L);
        }
    }
    g_in_kernel = false;
}

// ------------------------------------------------------------------ signals
const char* sig_name(int sig) {
    switch (sig) {
        case SIGSEGV: return "SIGSEGV";
        case SIGBUS: return "SIGBUS";
        case SIGFPE: return "SIGFPE";
        case SIGILL: return "SIGILL";
        case SIGABRT: return "SIGABRT";
        case SIGTRAP: return "SIGTRAP";
        default: return "signal";
    }
}

void on_fault(int sig, siginfo_t* info, void* uctx) {
    kata_result_t* r = g_result;
    if (r == nullptr || !g_in_kernel || r->status != KATA_OK) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
    const ucontext_t* uc = static_cast<const ucontext_t*>(uctx);
    int is_write = (sig == SIGSEGV) && (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
    r->sig = sig;
    r->addr = addr;
    r->is_write = is_write;
    r->buffer = -1;
    const kata_launch_t* L = g_launch;
    const char* verb = is_write ? "write to" : "read of";
    if (sig == SIGSEGV || sig == SIGBUS) {
        for (int i = 0; L != nullptr && i < L->nbuffers; ++i) {
            const kata_buffer& b = L->buffers[i];
            if (addr >= b.map_lo && addr < b.map_lo + b.map_size) {
                r->buffer = i;
                r->offset = (long long)(addr - b.start);
                long long past = (long long)addr - (long long)(b.start + b.size);
                char what[64];
                if (b.arg >= 0) {
                    snprintf(what, sizeof what, "argument %d", b.arg);
                } else {
                    snprintf(what, sizeof what, "device array %d", i);
                }
                if (addr >= b.start && addr < b.start + b.size) {
                    snprintf(r->message, sizeof r->message,
                             "%s address 0x%lx: byte %lld of %s, which this probe does not map "
                             "(only its last bytes exist)",
                             verb, (unsigned long)addr, (long long)(addr - b.start), what);
                } else if (addr >= b.start + b.size) {
                    snprintf(r->message, sizeof r->message,
                             "out-of-bounds %s address 0x%lx: %lld bytes past the end of %s "
                             "(%zu bytes)",
                             verb, (unsigned long)addr, past, what, b.size);
                } else {
                    snprintf(r->message, sizeof r->message,
                             "out-of-bounds %s address 0x%lx: %lld bytes before the start of %s "
                             "(%zu bytes)",
                             verb, (unsigned long)addr, (long long)(b.start - addr), what, b.size);
                }
                goto located;
            }
        }
        if (g_dyn_shared && addr >= (uintptr_t)g_dyn_shared + kDynSharedMax &&
            addr < (uintptr_t)g_dyn_shared + kDynSharedMax + g_page) {
            snprintf(r->message, sizeof r->message,
                     "out-of-bounds %s dynamic shared memory: past the end of the %zu bytes given "
                     "by shared=",
                     verb, L ? L->shared_bytes : 0);
            goto located;
        }
        if (g_stacks && addr >= (uintptr_t)g_stacks &&
            addr < (uintptr_t)g_stacks + (size_t)kMaxThreads * (kStackSize + g_page)) {
            r->status = KATA_CRASH;
            snprintf(r->message, sizeof r->message,
                     "stack overflow: a thread used more than %zu KiB of stack (large local arrays "
                     "or deep recursion)",
                     kStackSize / 1024);
            goto where;
        }
        if (addr < 4096) {
            snprintf(r->message, sizeof r->message, "%s a null pointer (address 0x%lx)", verb,
                     (unsigned long)addr);
        } else {
            snprintf(r->message, sizeof r->message,
                     "invalid %s address 0x%lx, which is in no device buffer", verb,
                     (unsigned long)addr);
        }
    located:
        r->status = KATA_OOB;
    } else {
        r->status = sig == SIGABRT ? KATA_TRAP : KATA_CRASH;
        snprintf(r->message, sizeof r->message, "%s%s", sig_name(sig),
                 sig == SIGFPE ? " (integer division by zero?)"
                 : sig == SIGABRT ? " (a failed assert() or abort())"
                                  : "");
    }
where:
    r->block[0] = blockIdx.x;
    r->block[1] = blockIdx.y;
    r->block[2] = blockIdx.z;
    r->thread[0] = threadIdx.x;
    r->thread[1] = threadIdx.y;
    r->thread[2] = threadIdx.z;
    if (L != nullptr && L->isolate) finish_child(4);
    signal(sig, SIG_DFL);
    raise(sig);
}

const int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP};
struct sigaction g_saved[6];

// Installed for the launch only: in-process launches hand the signals back to Python afterwards.
void install_handlers() {
    if (g_altstack == nullptr) {
        size_t alt = 64 * 1024;
        g_altstack = static_cast<char*>(
            mmap(nullptr, alt, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        stack_t ss{};
        ss.ss_sp = g_altstack;
        ss.ss_size = alt;
        sigaltstack(&ss, nullptr);
    }
    struct sigaction sa{};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 6; ++i) sigaction(kSignals[i], &sa, &g_saved[i]);
    g_handlers = true;
}

void restore_handlers() {
    if (!g_handlers) return;
    for (int i = 0; i < 6; ++i) sigaction(kSignals[i], &g_saved[i], nullptr);
    g_handlers = false;
}

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool init_common() {
    static bool done = false;
    if (done) return true;
    long page = sysconf(_SC_PAGESIZE);
    g_page = page > 0 ? (size_t)page : 4096;
    void* shared = mmap(nullptr, g_page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return false;
    g_shared_result = static_cast<kata_result_t*>(shared);
    g_reply_flag = reinterpret_cast<int*>(static_cast<char*>(shared) + kReplyFlagOffset);
    void* dyn = mmap(nullptr, kDynSharedMax + g_page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (dyn == MAP_FAILED) return false;
    g_dyn_shared = static_cast<unsigned char*>(dyn);
    mprotect(g_dyn_shared + kDynSharedMax, g_page, PROT_NONE);
    done = true;
    return true;
}

}  // namespace

// ------------------------------------------------------------------ tracing: the event buffer
static inline void record_event(uint64_t pc, uint64_t addr, unsigned size, unsigned kind) {
    if (g_event_count < g_event_cap) {
        kata_event& e = g_events[g_event_count];
        e.pc = pc;
        e.addr = addr;
        e.gtid = g_gtid_base + g_current;
        e.size = (uint16_t)size;
        e.kind = (uint16_t)kind;
    }
    ++g_event_count;
}

// Barriers and warp collectives in traced launches: they delimit the phases of a block.
static inline void trace_sync(unsigned kind, int line) {
    if (g_events != nullptr && g_in_kernel) record_event(0, (uint64_t)line, 0, kind);
}

// ------------------------------------------------------------------ device API (called by kernels)
extern "C" void kata_syncthreads(int line) {
    if (!g_in_fiber_mode) {
        fail(KATA_USAGE, "__syncthreads() at line %d ran without fibers (harness.cuda did not see "
                         "it in the source: is it hidden behind a macro?)", line);
    }
    Fiber& f = g_fibers[g_current];
    state_of(f) = AT_BARRIER;
    f.line = line;
    g_pred[g_current] = 0;
    trace_sync(KATA_EV_BARRIER, line);
    yield_from(&f.sp);
}

extern "C" int kata_syncthreads_op(int line, int op, int pred) {
    if (!g_in_fiber_mode) {
        fail(KATA_USAGE, "__syncthreads_* at line %d ran without fibers", line);
    }
    Fiber& f = g_fibers[g_current];
    state_of(f) = AT_BARRIER;
    f.line = line;
    g_pred[g_current] = pred != 0;
    trace_sync(KATA_EV_BARRIER, line);
    yield_from(&f.sp);
    int count = g_barrier_result;
    if (op == 0) return count;
    if (op == 1) return count == (int)g_nthreads;
    return count > 0;
}

extern "C" uint64_t kata_warp_op(int line, int op, unsigned mask, uint64_t value, int arg,
                                 int width) {
    if (!g_in_fiber_mode) {
        fail(KATA_USAGE, "%s at line %d ran without fibers (harness.cuda did not see it in the "
                         "source: is it hidden behind a macro?)", wop_name(op), line);
    }
    Fiber& f = g_fibers[g_current];
    state_of(f) = AT_WARP;
    ++g_at_warp;
    f.line = line;
    f.wop = op;
    f.wmask = mask;
    f.wvalue = value;
    f.warg = arg;
    f.wwidth = width;
    trace_sync(KATA_EV_WARP, line);
    yield_from(&f.sp);
    return g_fibers[g_current].wresult;
}

extern "C" void* kata_dynamic_shared(void) { return g_dyn_shared + g_dyn_offset; }

extern "C" void kata_trap(int line) { fail(KATA_TRAP, "__trap() at line %d", line); }

extern "C" unsigned long long kata_clock64(void) {
    return (unsigned long long)(now_s() * 1e9);
}

// ------------------------------------------------------------------ tracing (clang
// -fsanitize-coverage=trace-loads,trace-stores calls these for every load and store)
static inline bool private_address(uintptr_t a) {
    // Fiber stacks (locals) and the runtime's own variables are never shared between threads.
    if (g_stacks && a >= (uintptr_t)g_stacks &&
        a < (uintptr_t)g_stacks + (size_t)kMaxThreads * (kStackSize + g_page)) {
        return true;
    }
    return (a >= (uintptr_t)&threadIdx && a < (uintptr_t)(&threadIdx + 1)) ||
           (a >= (uintptr_t)&blockIdx && a < (uintptr_t)(&blockIdx + 1)) ||
           (a >= (uintptr_t)&blockDim && a < (uintptr_t)(&blockDim + 1)) ||
           (a >= (uintptr_t)&gridDim && a < (uintptr_t)(&gridDim + 1));
}

static inline void trace_access(void* pc, const void* p, unsigned size, unsigned store) {
    const kata_launch_t* L = g_launch;
    if (!g_in_kernel || L == nullptr) return;
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (L->preempt && g_in_fiber_mode && !private_address(a) &&
        (int)(rng_next() >> 56) < L->preempt) {
        // The "preempt" schedule: let other threads run between this thread's memory accesses,
        // as warps interleave on a GPU; exposes lost updates and missing barriers.
        Fiber& f = g_fibers[g_current];
        yield_from(&f.sp);
    }
    if (g_events == nullptr) return;
    for (int i = 0; i < L->nbuffers; ++i) {
        const kata_buffer& b = L->buffers[i];
        if (a >= b.start && a < b.start + b.size) {
            record_event(reinterpret_cast<uint64_t>(pc), a, size, store);
            return;
        }
    }
    // Shared memory: dynamic (extern __shared__) or static (__shared__ is a static of the
    // kernel library, so it lies in the library's writable segment).
    if ((g_dyn_shared && a >= (uintptr_t)g_dyn_shared && a < (uintptr_t)g_dyn_shared + kDynSharedMax) ||
        (a >= L->static_lo && a < L->static_hi)) {
        record_event(reinterpret_cast<uint64_t>(pc), a, size, store | KATA_EV_SHARED);
    }
}

// Atomics (not instrumented themselves, see kata_cuda.h) report their address here.
extern "C" void kata_trace_atomic(void* pc, const void* p, unsigned size) {
    if (g_events == nullptr) return;
    trace_access(pc, p, size, KATA_EV_STORE | KATA_EV_ATOMIC);
}

#define KATA_TRACE_FN(kind, n, store)                                         \
    extern "C" void __sanitizer_cov_##kind##n(void* p) {                      \
        trace_access(__builtin_return_address(0), p, n, store);                \
    }
KATA_TRACE_FN(load, 1, 0)
KATA_TRACE_FN(load, 2, 0)
KATA_TRACE_FN(load, 4, 0)
KATA_TRACE_FN(load, 8, 0)
KATA_TRACE_FN(load, 16, 0)
KATA_TRACE_FN(store, 1, 1)
KATA_TRACE_FN(store, 2, 1)
KATA_TRACE_FN(store, 4, 1)
KATA_TRACE_FN(store, 8, 1)
KATA_TRACE_FN(store, 16, 1)

// GCC's ThreadSanitizer instrumentation (traced builds with g++: -Wp,-fsanitize=thread): the same
// callbacks under tsan's names. Atomics in kata_cuda.h are not instrumented (no_sanitize_thread).
#define KATA_TSAN_FN(kind, n, store)                                          \
    extern "C" void __tsan_##kind##n(void* p) {                               \
        trace_access(__builtin_return_address(0), p, n, store);                \
    }                                                                         \
    extern "C" void __tsan_unaligned_##kind##n(void* p) {                     \
        trace_access(__builtin_return_address(0), p, n, store);                \
    }
KATA_TSAN_FN(read, 1, 0)
KATA_TSAN_FN(read, 2, 0)
KATA_TSAN_FN(read, 4, 0)
KATA_TSAN_FN(read, 8, 0)
KATA_TSAN_FN(read, 16, 0)
KATA_TSAN_FN(write, 1, 1)
KATA_TSAN_FN(write, 2, 1)
KATA_TSAN_FN(write, 4, 1)
KATA_TSAN_FN(write, 8, 1)
KATA_TSAN_FN(write, 16, 1)
// Block copies of structs: one event of up to 16 bytes per 16 (sizes are 16-bit in kata_event).
extern "C" void __tsan_read_range(void* p, size_t n) {
    for (size_t o = 0; o < n; o += 16) {
        trace_access(__builtin_return_address(0), (char*)p + o, n - o < 16 ? n - o : 16, 0);
    }
}
extern "C" void __tsan_write_range(void* p, size_t n) {
    for (size_t o = 0; o < n; o += 16) {
        trace_access(__builtin_return_address(0), (char*)p + o, n - o < 16 ? n - o : 16, 1);
    }
}
extern "C" void __tsan_init(void) {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit(void) {}
extern "C" void __tsan_vptr_update(void**, void*) {}
extern "C" void __tsan_vptr_read(void**) {}

// ------------------------------------------------------------------ host API (called by Python)
extern "C" void* kata_dev_alloc(size_t nbytes, size_t align, uintptr_t* map_lo, size_t* map_size,
                                int* fd) {
    // [guard page][data ... buffer ends at a page boundary][guard page]: the first byte past the
    // end faults. MAP_SHARED so that a forked launch's writes are visible here; backed by a memfd
    // (returned in *fd) so that the launch server can map the same pages.
    if (!init_common()) return nullptr;
    if (align == 0) align = 1;
    size_t data = (nbytes + align - 1) / align * align;
    size_t pages = (data + g_page - 1) / g_page;
    if (pages == 0) pages = 1;
    size_t total = (pages + 2) * g_page;
    *fd = (int)syscall(SYS_memfd_create, "kata-device-buffer", 1u /* MFD_CLOEXEC */);
    void* p = MAP_FAILED;
    if (*fd >= 0 && ftruncate(*fd, (off_t)total) == 0) {
        p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    } else {
        if (*fd >= 0) close(*fd);
        *fd = -1;  // no memfd: anonymous shared memory (forked launches only)
        p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    }
    if (p == MAP_FAILED) {
        if (*fd >= 0) close(*fd);
        return nullptr;
    }
    char* base = static_cast<char*>(p);
    mprotect(base, g_page, PROT_NONE);
    mprotect(base + (pages + 1) * g_page, g_page, PROT_NONE);
    *map_lo = reinterpret_cast<uintptr_t>(base);
    *map_size = total;
    return base + (pages + 1) * g_page - data;
}

// A device buffer of `nbytes` of which only the last `tail` bytes (whole pages) exist, with a
// guard page before its start and after its end, for probes of a huge grid's last blocks: an
// 8 GiB array costs three small mappings (and stays inside an RLIMIT_AS sandbox). The hole
// between is left unmapped and reserved for nobody, so the three pieces are placed far from
// where the kernel puts mmaps (MAP_FIXED_NOREPLACE: never over an existing mapping).
extern "C" void* kata_dev_alloc_tail(size_t nbytes, size_t tail, uintptr_t* map_lo,
                                     size_t* map_size, uintptr_t* win_lo, size_t* win_size) {
    if (!init_common()) return nullptr;
    const size_t page = g_page;
    size_t data = (nbytes + 3) & ~(size_t)3;
    if (tail > data) tail = data;
    size_t win = (tail + page - 1) / page * page;
    if (win == 0) win = page;
    size_t lead = (page - data % page) % page;  // start + data ends on a page boundary
    for (uintptr_t cand = (uintptr_t)1 << 44; cand < (uintptr_t)0x700000000000ULL;
         cand += (uintptr_t)1 << 42) {
        uintptr_t start = cand + page + lead, end = start + data;
        uintptr_t wlo = end - win > cand + page ? end - win : cand + page;
        void* guard = mmap((void*)cand, page, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (guard != (void*)cand) {
            if (guard != MAP_FAILED) munmap(guard, page);
            continue;
        }
        void* w = mmap((void*)wlo, end + page - wlo, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (w != (void*)wlo) {
            if (w != MAP_FAILED) munmap(w, end + page - wlo);
            munmap(guard, page);
            continue;
        }
        mprotect((void*)end, page, PROT_NONE);
        *map_lo = cand;
        *map_size = end + page - cand;
        *win_lo = wlo;
        *win_size = end + page - wlo;
        return (void*)start;
    }
    return nullptr;
}

extern "C" void kata_dev_free_tail(uintptr_t map_lo, uintptr_t win_lo, size_t win_size) {
    munmap(reinterpret_cast<void*>(map_lo), g_page);
    munmap(reinterpret_cast<void*>(win_lo), win_size);
}

extern "C" void kata_dev_free(uintptr_t map_lo, size_t map_size, int fd) {
    munmap(reinterpret_cast<void*>(map_lo), map_size);
    if (fd >= 0) close(fd);
}

extern "C" void kata_zero(void* p, size_t n) { memset(p, 0, n); }

extern "C" void* kata_shared_alloc(size_t nbytes) {
    void* p = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

extern "C" void kata_shared_free(void* p, size_t nbytes) { munmap(p, nbytes); }

// The writable segments of the library that defines `symbol`: where its statics (the static
// __shared__ arrays of its kernels) live. Returns 0 when not found.
struct RwRange {
    uintptr_t base, lo, hi;
};
static int rw_segments(struct dl_phdr_info* info, size_t, void* data) {
    RwRange* r = static_cast<RwRange*>(data);
    if (info->dlpi_addr != r->base) return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_W)) continue;
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
        if (r->lo == 0 || lo < r->lo) r->lo = lo;
        if (hi > r->hi) r->hi = hi;
    }
    return 1;
}
extern "C" int kata_lib_rw_range(void* symbol, uintptr_t* lo, uintptr_t* hi) {
    Dl_info info;
    if (dladdr(symbol, &info) == 0) return 0;
    RwRange r{reinterpret_cast<uintptr_t>(info.dli_fbase), 0, 0};
    dl_iterate_phdr(rw_segments, &r);
    *lo = r.lo;
    *hi = r.hi;
    return r.hi > r.lo;
}

extern "C" uintptr_t kata_lib_base(void* symbol) {
    Dl_info info;
    if (dladdr(symbol, &info) == 0) return 0;
    return reinterpret_cast<uintptr_t>(info.dli_fbase);
}

extern "C" void* kata_open(const char* path, char* err, size_t errlen) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) snprintf(err, errlen, "%s", dlerror());
    return h;
}

extern "C" void* kata_sym(void* handle, const char* name) { return dlsym(handle, name); }

extern "C" int kata_max_threads(void) { return kMaxThreads; }
extern "C" size_t kata_dyn_shared_max(void) { return kDynSharedMax; }

static void launch_here(const kata_launch_t* L, kata_result_t* r) {
    g_launch = L;
    g_result = r;
    g_events = L->events;
    g_event_cap = L->event_capacity;
    g_event_count = 0;
    install_handlers();
    double t0 = now_s();
    run_grid(L);
    r->seconds = now_s() - t0;
    r->events = g_event_count;
    r->events_overflow = g_event_count > g_event_cap;
    restore_handlers();
}

// Set by the launch server (KATA_SERVER below): run in the forked child before the kernel, to
// open up this launch's buffers and point stdout/stderr at the caller's.
static void (*g_child_setup)(void) = nullptr;

// Wait for `pid` up to `timeout` seconds (<= 0: forever). pidfd + poll wakes the moment the
// child exits; kernels without pidfd_open (before Linux 5.3) fall back to a sleep-poll loop.
static bool wait_child(pid_t pid, int* st, double t0, double timeout) {
#ifdef SYS_pidfd_open
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd >= 0) {
        for (;;) {
            int ms = -1;
            if (timeout > 0) {
                double left = timeout - (now_s() - t0);
                if (left <= 0) break;
                ms = (int)(left * 1000) + 1;
            }
            pollfd p{pfd, POLLIN, 0};
            int n = poll(&p, 1, ms);
            if (n < 0 && errno == EINTR) continue;
            if (n > 0) {
                close(pfd);
                while (waitpid(pid, st, 0) < 0 && errno == EINTR) {
                }
                return true;
            }
        }
        close(pfd);
        return false;
    }
#endif
    long sleep_ns = 20000;
    for (;;) {
        pid_t got = waitpid(pid, st, WNOHANG);
        if (got == pid) return true;
        if (got < 0 && errno != EINTR) return true;
        if (timeout > 0 && now_s() - t0 > timeout) return false;
        timespec ts{0, sleep_ns};
        nanosleep(&ts, nullptr);
        if (sleep_ns < 1000000) sleep_ns *= 2;
    }
}

// Wait for the launch child `pid` (started at t0) and turn how it ended into `out`.
static int collect_child(pid_t pid, double t0, double timeout, kata_result_t* out) {
    kata_result_t* shared = g_shared_result;
    int st = 0;
    if (!wait_child(pid, &st, t0, timeout)) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        memcpy(out, shared, sizeof *out);
        out->status = KATA_TIMEOUT;
        snprintf(out->message, sizeof out->message,
                 "did not finish within %.3g s (an endless loop, or a spin-wait on another "
                 "block: blocks run one after another here)",
                 timeout);
        return out->status;
    }
    memcpy(out, shared, sizeof *out);
    if (out->status == KATA_OK && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        out->status = KATA_CRASH;
        if (WIFSIGNALED(st)) {
            out->sig = WTERMSIG(st);
            snprintf(out->message, sizeof out->message, "the launch died of %s",
                     sig_name(WTERMSIG(st)));
        } else {
            snprintf(out->message, sizeof out->message, "the launch exited with status %d",
                     WEXITSTATUS(st));
        }
    }
    return out->status;
}

extern "C" int kata_launch(const kata_launch_t* L, kata_result_t* out) {
    memset(out, 0, sizeof *out);
    out->buffer = -1;
    unsigned nthreads = L->block[0] * L->block[1] * L->block[2];
    if (!init_common() || (L->fibers && !ensure_stacks(nthreads))) {
        out->status = KATA_USAGE;
        snprintf(out->message, sizeof out->message, "cannot map fiber stacks: %s", strerror(errno));
        return out->status;
    }
    if (!L->isolate) {
        launch_here(L, out);
        g_launch = nullptr;
        g_result = nullptr;
        return out->status;
    }
    kata_result_t* shared = g_shared_result;
    memset(shared, 0, sizeof *shared);
    shared->buffer = -1;
    fflush(nullptr);  // unflushed stdio buffers would be printed twice
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        out->status = KATA_USAGE;
        snprintf(out->message, sizeof out->message, "fork failed: %s", strerror(errno));
        return out->status;
    }
    if (pid == 0) {
        if (g_child_setup != nullptr) g_child_setup();
        launch_here(L, shared);
        finish_child(0);
    }
    return collect_child(pid, t0, L->timeout, out);
}

// ------------------------------------------------------------------ the launch server
// Built as a small program of its own (-DKATA_SERVER). Forking the pytest process for every
// launch copies the page tables of its whole heap (milliseconds); this program is small, so its
// forks are cheap. It receives, on a SOCK_SEQPACKET socket (fd 3): device buffers (memfds,
// mapped PROT_NONE here), and launches naming a kernel library, a symbol, the buffers and the
// argument bytes. Each launch still runs in a forked child (kata_launch), which opens up only
// that launch's buffers, so isolation is as before: out-of-bounds accesses hit PROT_NONE pages,
// crashes and hangs end the child, and every launch starts from this process's pristine state.
#ifdef KATA_SERVER
#include <sys/socket.h>
#include <sys/uio.h>

#include <map>
#include <string>

namespace {

struct Mapping {
    char* base;
    size_t size;
};

constexpr int kMaxArgs = 64;
constexpr size_t kCell = 256;

std::map<uint64_t, Mapping> g_maps;
std::map<std::string, void*> g_libs;
kata_buffer g_srv_buffers[kMaxArgs];
int g_srv_nbuffers = 0;
int g_out_fd = -1, g_err_fd = -1;
alignas(64) char g_cells[kMaxArgs][kCell];
void* g_argv[kMaxArgs];
char g_msg[1 << 16];

void server_child_setup() {
    for (int i = 0; i < g_srv_nbuffers; ++i) {
        const kata_buffer& b = g_srv_buffers[i];
        uintptr_t lo = b.start & ~(uintptr_t)(g_page - 1);
        uintptr_t hi = b.map_lo + b.map_size - g_page;  // the data ends where the top guard starts
        if (hi > lo) mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ | PROT_WRITE);
    }
    if (g_out_fd >= 0) dup2(g_out_fd, 1);
    if (g_err_fd >= 0) dup2(g_err_fd, 2);
}

void reply_usage(int sock, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void reply_usage(int sock, const char* fmt, ...) {
    kata_result_t r;
    memset(&r, 0, sizeof r);
    r.status = KATA_USAGE;
    r.buffer = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r.message, sizeof r.message, fmt, ap);
    va_end(ap);
    send(sock, &r, sizeof r, 0);
}

std::string g_kname;

// Decode a launch message into L (cells, buffers and strings live in globals). False: `err`
// says why.
bool parse_launch(const char* msg, size_t len, kata_launch_t* L, char* err, size_t errlen) {
    kata_wire_launch w;
    if (len < sizeof w) {
        snprintf(err, errlen, "launch server: short message");
        return false;
    }
    memcpy(&w, msg, sizeof w);
    size_t need = sizeof w + w.nbuffers * sizeof(kata_wire_buffer) + w.nargs * sizeof(kata_wire_arg) +
                  w.bytes_len + w.lib_len + w.sym_len + w.kname_len;
    if (need != len || w.nargs > (uint32_t)kMaxArgs || w.nbuffers > (uint32_t)kMaxArgs) {
        snprintf(err, errlen, "launch server: malformed launch (%zu of %zu bytes)", len, need);
        return false;
    }
    const char* p = msg + sizeof w;
    const char* bufs = p;
    p += w.nbuffers * sizeof(kata_wire_buffer);
    const char* args = p;
    p += w.nargs * sizeof(kata_wire_arg);
    const char* bytes = p;
    p += w.bytes_len;
    std::string lib(p, w.lib_len);
    p += w.lib_len;
    std::string sym(p, w.sym_len);
    p += w.sym_len;
    g_kname.assign(p, w.kname_len);

    g_srv_nbuffers = (int)w.nbuffers;
    for (uint32_t i = 0; i < w.nbuffers; ++i) {
        kata_wire_buffer b;
        memcpy(&b, bufs + i * sizeof b, sizeof b);
        auto it = g_maps.find(b.id);
        if (it == g_maps.end()) {
            snprintf(err, errlen, "launch server: unknown buffer %llu", (unsigned long long)b.id);
            return false;
        }
        kata_buffer& k = g_srv_buffers[i];
        k.map_lo = reinterpret_cast<uintptr_t>(it->second.base);
        k.map_size = it->second.size;
        k.start = k.map_lo + b.offset;
        k.size = b.size;
        k.arg = (int)b.arg;
    }
    size_t off = 0;
    for (uint32_t i = 0; i < w.nargs; ++i) {
        kata_wire_arg a;
        memcpy(&a, args + i * sizeof a, sizeof a);
        memset(g_cells[i], 0, kCell);
        if (a.kind == 1) {
            if (a.value >= w.nbuffers) {
                snprintf(err, errlen, "launch server: bad buffer index");
                return false;
            }
            uintptr_t ptr = g_srv_buffers[a.value].start;
            memcpy(g_cells[i], &ptr, sizeof ptr);
        } else {
            if (a.value > kCell || off + a.value > w.bytes_len) {
                snprintf(err, errlen, "argument %u is %u bytes; at most %zu", i, a.value, kCell);
                return false;
            }
            memcpy(g_cells[i], bytes + off, a.value);
            off += a.value;
        }
        g_argv[i] = g_cells[i];
    }
    void*& handle = g_libs[lib];
    if (handle == nullptr) handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        g_libs.erase(lib);
        snprintf(err, errlen, "launch server: cannot load %s: %s", lib.c_str(), dlerror());
        return false;
    }
    void* fn = dlsym(handle, sym.c_str());
    if (fn == nullptr) {
        snprintf(err, errlen, "launch server: no symbol %s", sym.c_str());
        return false;
    }
    memset(L, 0, sizeof *L);
    L->call = reinterpret_cast<void (*)(void**)>(fn);
    L->args = g_argv;
    L->kernel = g_kname.c_str();
    for (int i = 0; i < 3; ++i) {
        L->grid[i] = w.grid[i];
        L->block[i] = w.block[i];
    }
    L->shared_bytes = w.shared;
    L->schedule = (int)w.schedule;
    L->seed = w.seed;
    L->fibers = w.fibers;
    L->isolate = 1;
    L->timeout = w.timeout;
    L->nbuffers = (int)w.nbuffers;
    L->buffers = g_srv_buffers;
    L->preempt = w.preempt;
    if (!w.fibers && sym.rfind("kata_invoke__", 0) == 0) {
        std::string threads = "kata_threads__" + sym.substr(strlen("kata_invoke__"));
        L->threads = reinterpret_cast<void (*)(void**, const unsigned*, unsigned)>(
            dlsym(handle, threads.c_str()));
    }
    return true;
}

void handle_launch(int sock, const char* msg, size_t len) {
    kata_launch_t L;
    char err[512];
    if (!parse_launch(msg, len, &L, err, sizeof err)) return reply_usage(sock, "%s", err);
    kata_result_t r;
    kata_launch(&L, &r);
    send(sock, &r, sizeof r, 0);
}

// ---- the spare child: forked ahead of the next launch, so that launch does not wait for a fork.
// It is a copy of the server as it was at fork time; a MAP or UNMAP since then makes it stale
// (`g_generation`), and a stale spare is killed rather than used.
pid_t g_spare_pid = -1;
int g_spare_sock = -1;
uint64_t g_spare_generation = 0;
uint64_t g_generation = 0;
bool g_use_spare = true;  // KATA_CUDA_SPARE=0: fork at each launch (for comparisons)

int recv_with_fds(int sock, char* buf, size_t cap, int* fds, int* nfds) {
    char control[CMSG_SPACE(4 * sizeof(int))];
    iovec iov{buf, cap};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    ssize_t n;
    do {
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    *nfds = 0;
    if (n <= 0) return (int)n;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < k && *nfds < 4; ++i) {
                memcpy(&fds[(*nfds)++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            }
        }
    }
    return (int)n;
}

[[noreturn]] void spare_main(int sock, int main_sock) {
    int fds[4];
    int nfds = 0;
    int n = recv_with_fds(sock, g_msg, sizeof g_msg, fds, &nfds);
    if (n <= 0) _exit(0);  // the server retired this spare
    g_reply_sock = main_sock;  // from here on every way out replies (finish_child)
    g_out_fd = nfds > 0 ? fds[0] : -1;
    g_err_fd = nfds > 1 ? fds[1] : -1;
    kata_result_t* r = g_shared_result;
    kata_launch_t L;
    if (!parse_launch(g_msg, (size_t)n, &L, r->message, sizeof r->message)) {
        r->status = KATA_USAGE;
        finish_child(0);
    }
    unsigned nthreads = L.block[0] * L.block[1] * L.block[2];
    if (L.fibers && !ensure_stacks(nthreads)) {
        r->status = KATA_USAGE;
        snprintf(r->message, sizeof r->message, "cannot map fiber stacks: %s", strerror(errno));
        finish_child(0);
    }
    server_child_setup();
    launch_here(&L, r);
    finish_child(0);
}

void retire_spare() {
    if (g_spare_pid <= 0) return;
    close(g_spare_sock);  // the spare sees end-of-file and exits
    kill(g_spare_pid, SIGKILL);
    while (waitpid(g_spare_pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    g_spare_pid = -1;
    g_spare_sock = -1;
}

void make_spare(int main_sock) {
    if (g_spare_pid > 0) return;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return;
    fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return;
    }
    if (pid == 0) {
        close(sv[0]);
        spare_main(sv[1], main_sock);
    }
    close(sv[1]);
    g_spare_pid = pid;
    g_spare_sock = sv[0];
    g_spare_generation = g_generation;
}

// A launch through the spare: it decodes and runs the message itself. False: no usable spare.
bool launch_in_spare(int sock, const char* msg, size_t len, const int* fds, int nfds) {
    if (g_spare_pid <= 0 || g_spare_generation != g_generation || len < sizeof(kata_wire_launch)) {
        return false;
    }
    kata_wire_launch w;
    memcpy(&w, msg, sizeof w);
    kata_result_t* shared = g_shared_result;
    memset(shared, 0, sizeof *shared);
    shared->buffer = -1;
    *g_reply_flag = 0;
    char control[CMSG_SPACE(4 * sizeof(int))];
    iovec iov{const_cast<char*>(msg), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (nfds > 0) {
        mh.msg_control = control;
        mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    double t0 = now_s();
    if (sendmsg(g_spare_sock, &mh, MSG_NOSIGNAL) != (ssize_t)len) {
        retire_spare();
        return false;
    }
    pid_t pid = g_spare_pid;
    close(g_spare_sock);
    g_spare_pid = -1;
    g_spare_sock = -1;
    kata_result_t r;
    collect_child(pid, t0, w.timeout, &r);
    if (take_reply()) send(sock, &r, sizeof r, 0);  // it died, or hung, without replying
    // What the spare had to do itself, the server does once for the spares to come.
    if (w.fibers) ensure_stacks(w.block[0] * w.block[1] * w.block[2]);
    kata_launch_t L;
    char err[512];
    parse_launch(msg, len, &L, err, sizeof err);  // loads the library here
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SOCKET_FD (started by harness.cuda)\n", argv[0]);
        return 2;
    }
    const int sock = atoi(argv[1]);
    const char* spare = getenv("KATA_CUDA_SPARE");
    g_use_spare = spare == nullptr || strcmp(spare, "0") != 0;
    g_child_setup = server_child_setup;
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
        int fds[4];
        int nfds = 0;
        int n = recv_with_fds(sock, g_msg, sizeof g_msg, fds, &nfds);
        if (n <= 0) {
            retire_spare();
            return 0;  // the pytest process went away
        }
        uint32_t type = 0;
        if (n >= 4) memcpy(&type, g_msg, 4);
        if (type == KATA_MSG_MAP && n >= (int)sizeof(kata_wire_map) && nfds == 1) {
            kata_wire_map m;
            memcpy(&m, g_msg, sizeof m);
            init_common();
            void* p = mmap(nullptr, m.size, PROT_NONE, MAP_SHARED, fds[0], 0);
            if (p != MAP_FAILED) g_maps[m.id] = Mapping{static_cast<char*>(p), (size_t)m.size};
            close(fds[0]);
            ++g_generation;
        } else if (type == KATA_MSG_UNMAP && n >= (int)sizeof(kata_wire_map)) {
            kata_wire_map m;
            memcpy(&m, g_msg, sizeof m);
            auto it = g_maps.find(m.id);
            if (it != g_maps.end()) {
                munmap(it->second.base, it->second.size);
                g_maps.erase(it);
            }
            ++g_generation;
        } else if (type == KATA_MSG_LAUNCH) {
            init_common();
            if (!launch_in_spare(sock, g_msg, (size_t)n, fds, nfds)) {
                retire_spare();
                g_out_fd = nfds > 0 ? fds[0] : -1;
                g_err_fd = nfds > 1 ? fds[1] : -1;
                handle_launch(sock, g_msg, (size_t)n);
                g_out_fd = g_err_fd = -1;
            }
            for (int i = 0; i < nfds; ++i) close(fds[i]);
            if (g_use_spare) make_spare(sock);
        } else {
            for (int i = 0; i < nfds; ++i) close(fds[i]);
        }
    }
}
#endif  // KATA_SERVER
