// kata_launch.h: the cpu runtime's launch interface, written once.
//
// runtime.cpp includes it; harness/cuda/cpu/interface.py hands the text between the CDEF markers
// to cffi's cdef, which takes no preprocessor lines: keep that part plain C declarations and
// comments. The launch server's messages (kata_wire_*) are packed by server.py with `struct`
// formats that a test checks field by field against this header (ffi.offsetof/sizeof); their
// fields are naturally aligned, so there is no padding for either side to guess.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// BEGIN CDEF
// ------------------------------------------------------------------ a launch (kata_launch)
// Thread order inside a block (and block order): forward, reverse, seeded random, and seeded
// random with a switch to another thread at traced memory accesses (needs a traced build).
// SCHEDULES in interface.py names them in this order.
typedef enum {
    KATA_SCHEDULE_FORWARD = 0,
    KATA_SCHEDULE_REVERSE = 1,
    KATA_SCHEDULE_RANDOM = 2,
    KATA_SCHEDULE_PREEMPT = 3
} kata_schedule_t;

typedef struct {
    uintptr_t start;
    size_t size;
    uintptr_t map_lo;
    size_t map_size;
    int arg;
} kata_buffer;

// One traced access or synchronisation. `kind`: bit 0 a store, bit 1 shared memory (else global),
// bit 2 an atomic; KATA_EV_BARRIER and KATA_EV_WARP are synchronisation events (addr = source
// line). EVENT_FIELDS in trace.py reads it as a numpy dtype.
typedef struct {
    uint64_t pc;
    uint64_t addr;
    uint32_t gtid;
    uint16_t size;
    uint16_t kind;
} kata_event;
typedef enum {
    KATA_EV_STORE = 1,
    KATA_EV_SHARED = 2,
    KATA_EV_ATOMIC = 4,
    KATA_EV_BARRIER = 8,
    KATA_EV_WARP = 9
} kata_event_kind_t;

typedef struct {
    void (*call)(void**);
    void** args;
    const char* kernel;
    unsigned grid[3];
    unsigned block[3];
    size_t shared_bytes;
    int schedule;  // a kata_schedule_t
    uint64_t seed;
    int fibers;
    int isolate;
    double timeout;
    int nbuffers;
    const kata_buffer* buffers;
    kata_event* events;  // trace buffer (MAP_SHARED) or NULL
    size_t event_capacity;
    int preempt;  // 0..256: chance/256 that a traced memory access switches to another thread
    void (*threads)(void**, const unsigned*, unsigned);  // block loop without fibers, or NULL
    uintptr_t static_lo, static_hi;  // traced launches: the kernel library's static __shared__
    uint64_t first_block, nblocks;   // nblocks > 0: run only these linear block ids (probes)
} kata_launch_t;

typedef enum {
    KATA_OK = 0,
    KATA_OOB = 1,
    KATA_DEADLOCK = 2,
    KATA_CRASH = 3,
    KATA_TIMEOUT = 4,
    KATA_TRAP = 5,
    KATA_USAGE = 6
} kata_status_t;

typedef struct {
    int status;  // a kata_status_t
    int sig;
    unsigned block[3];
    unsigned thread[3];
    uint64_t addr;
    int buffer;  // index into buffers, -1 when none
    int is_write;
    long long offset;  // from the buffer's start
    uint64_t events;
    int events_overflow;
    double seconds;
    char message[2048];
} kata_result_t;

// ------------------------------------------------------------------ the launch server's messages
// A SOCK_SEQPACKET message starts with its type. MAP carries a memfd, LAUNCH the caller's stdout
// and stderr. LAUNCH: kata_wire_launch, nbuffers kata_wire_buffer, nargs kata_wire_arg, then the
// argument bytes, the library path, the symbol and the kernel name. The reply is a kata_result_t.
typedef enum { KATA_MSG_MAP = 1, KATA_MSG_UNMAP = 2, KATA_MSG_LAUNCH = 3 } kata_msg_t;

typedef struct {
    uint32_t type;
    uint32_t pad;
    uint64_t id;
    uint64_t size;
} kata_wire_map;

typedef struct {
    uint32_t type;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t schedule;
    uint64_t shared;
    uint64_t seed;
    int32_t fibers;
    int32_t preempt;
    double timeout;
    uint32_t nbuffers;
    uint32_t nargs;
    uint32_t lib_len;
    uint32_t sym_len;
    uint32_t kname_len;
    uint32_t bytes_len;
} kata_wire_launch;

typedef struct {
    uint64_t id;
    uint64_t offset;
    uint64_t size;
    int64_t arg;
} kata_wire_buffer;

typedef struct {
    uint32_t kind;  // 0: bytes (value = length), 1: pointer to buffer (value = buffer index)
    uint32_t value;
} kata_wire_arg;

// ------------------------------------------------------------------ entry points
int kata_launch(const kata_launch_t*, kata_result_t*);
void* kata_dev_alloc(size_t, size_t, uintptr_t*, size_t*, int*);
void kata_dev_free(uintptr_t, size_t, int);
void* kata_dev_alloc_tail(size_t, size_t, uintptr_t*, size_t*, uintptr_t*, size_t*);
void kata_dev_free_tail(uintptr_t, uintptr_t, size_t);
void kata_zero(void*, size_t);
void* kata_shared_alloc(size_t);
void kata_shared_free(void*, size_t);
uintptr_t kata_lib_base(void*);
int kata_lib_rw_range(void*, uintptr_t*, uintptr_t*);
void* kata_open(const char*, char*, size_t);
void* kata_sym(void*, const char*);
int kata_max_threads(void);
size_t kata_dyn_shared_max(void);
// END CDEF

#ifdef __cplusplus
}
#endif
