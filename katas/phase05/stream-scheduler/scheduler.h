/* GIVEN: the C API of the stream scheduler (scheduler.cpp implements it) and of the test
 * kernels (kernels.cpp). Do not edit. Streams, events and values behave like CUDA's:
 *
 *   sched_launch          cudaLaunchKernel / cudaLaunchHostFunc: fn(arg) runs on a worker
 *   sched_record          cudaEventRecord(event, stream)
 *   sched_wait_event      cudaStreamWaitEvent(stream, event): waits for the event's LAST record
 *                         made before this call (none yet: no wait)
 *   sched_write_value     cuStreamWriteValue64(stream, flag, value)
 *   sched_wait_value      cuStreamWaitValue64(stream, flag, value, GEQ): waits until the flag
 *                         holds >= value, whoever writes it, even a later call (can deadlock)
 *   sched_synchronize     cudaDeviceSynchronize: wait for everything; SCHED_DEADLOCK (and the
 *                         cycle in `err`) when nothing can run any more
 *
 * Every enqueue returns the new operation's id (0, 1, 2 ... in call order) or a negative error.
 * Stream 0 is the legacy default stream, SCHED_PER_THREAD the calling thread's own default
 * stream (cudaStreamPerThread); sched_stream_create returns 1, 2, 3 ...
 *
 * Every call may come from any host thread at any time, as CUDA's may: sched_times of an op that
 * an earlier sched_synchronize finished, while other threads enqueue, included. */
#include <stddef.h>
#include <stdint.h>

#define SCHED_LEGACY_DEFAULT 0
#define SCHED_PER_THREAD (-1)
#define SCHED_BLOCKING 0     /* cudaStreamDefault: syncs with the legacy default stream */
#define SCHED_NON_BLOCKING 1 /* cudaStreamNonBlocking */

#define SCHED_OK 0
#define SCHED_INVALID (-1)
#define SCHED_DEADLOCK (-2)
#define SCHED_TODO (-100) /* the stub's answer: not written yet */

typedef void (*sched_fn)(void *arg);
typedef struct sched sched;

#ifdef __cplusplus
extern "C" {
#endif

/* A scheduler with `workers` worker threads (>= 1); NULL while not written. */
sched *sched_create(int workers);
void sched_destroy(sched *s);

/* A new stream; lower priority numbers run first when ops compete for a worker (CUDA: a
 * numerically lower priority is a higher priority; 0 is the default). */
int sched_stream_create(sched *s, int flags, int priority);
int sched_event_create(sched *s);

/* `duration` is the op's length on the logical clock (sched_times), in ticks. */
int64_t sched_launch(sched *s, int stream, sched_fn fn, void *arg, int64_t duration);
int64_t sched_record(sched *s, int event, int stream);
int64_t sched_wait_event(sched *s, int stream, int event);
int64_t sched_write_value(sched *s, int stream, int flag, int64_t value);
int64_t sched_wait_value(sched *s, int stream, int flag, int64_t value);

int sched_synchronize(sched *s, char *err, size_t errlen);

/* The logical clock, after sched_synchronize: op `op` ran from *start to *end (ticks), with at
 * most `workers` launched ops at a time; records, waits and writes take no time and no worker. */
int sched_times(sched *s, int64_t op, int64_t *start, int64_t *end);

/* ---- test kernels (kernels.cpp, given): op ids are their args ---- */
void k_reset(void);
void k_set_sleep_us(int64_t id, int64_t us); /* how long k_work(id) sleeps (default 0) */
void k_work(void *id);                       /* (void *)(intptr_t)id */
int64_t k_start_seq(int64_t id);             /* order of starts / ends, 1, 2 ...; 0: never ran */
int64_t k_end_seq(int64_t id);
int64_t k_thread(int64_t id);                /* a small number per thread that ran it */
int k_max_concurrent(void);

#ifdef __cplusplus
}
#endif
