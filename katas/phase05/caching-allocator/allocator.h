/* GIVEN: the C ABI of lib.rs, as the tests declare it to cffi. Do not edit.
 * Status codes: 0 ok, 1 out of memory, 2 invalid pointer, -2 todo!() reached (not started),
 * -3 another panic; kata_last_error() holds the message of the last failure on this thread. */
#include <stdint.h>

typedef struct KataDevice KataDevice;
typedef struct KataAllocator KataAllocator;

typedef struct {
    uint64_t capacity, used, peak_used, mallocs, frees, failed_mallocs, live_events, simulated_ns, bad_calls;
} kata_device_info_t;

typedef struct {
    uint64_t allocated, reserved, active, inactive_split, peak_allocated, peak_reserved;
    uint64_t device_mallocs, device_frees, alloc_retries, ooms;
} kata_stats_t;

typedef struct {
    uint64_t segment, segment_size, address, size, stream;
    int32_t state; /* 0 free, 1 allocated, 2 awaiting events */
    int32_t small;
} kata_block_t;

typedef struct {
    uint32_t kind; /* 0 malloc, 1 free, 2 record_stream, 3 launch, 4 complete, 5 empty_cache, 6 synchronize */
    uint32_t stream;
    uint64_t id;
    uint64_t size;
} kata_op_t;

const char *kata_last_error(void);

KataDevice *kata_device_new(uint64_t capacity, uint64_t malloc_cost_ns);
void kata_device_destroy(KataDevice *d);
void kata_device_launch(const KataDevice *d, uint64_t stream);
void kata_device_complete(const KataDevice *d, uint64_t stream);
void kata_device_synchronize(const KataDevice *d);
void kata_device_info(const KataDevice *d, kata_device_info_t *out);

int32_t kata_sizes(uint64_t size, uint64_t request, uint64_t *out4);

int32_t kata_allocator_new(const KataDevice *d, KataAllocator **out);
void kata_allocator_destroy(KataAllocator *a);
int32_t kata_malloc(const KataAllocator *a, uint64_t size, uint64_t stream, uint64_t *out);
int32_t kata_free(const KataAllocator *a, uint64_t ptr);
int32_t kata_record_stream(const KataAllocator *a, uint64_t ptr, uint64_t stream);
int32_t kata_empty_cache(const KataAllocator *a);
int32_t kata_stats(const KataAllocator *a, kata_stats_t *out);
int32_t kata_snapshot(const KataAllocator *a, kata_block_t *out, uint64_t cap, uint64_t *n);
int32_t kata_replay(const KataAllocator *a, const kata_op_t *ops, uint64_t n, uint64_t *elapsed_ns);
int32_t kata_stress(const KataAllocator *a, uint32_t threads, uint64_t ops, uint64_t seed, uint64_t *violations);
