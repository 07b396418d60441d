// YOUR CODE: a stream scheduler with CUDA's stream and event semantics (C++17).
//
// Read README.md first; scheduler.h says what each function does. The tests call these
// functions from Python (and from several threads), kernels.cpp (given) provides the kernels.
// Every function starts as "not written": sched_create returns NULL and the others
// SCHED_TODO, which the tests show as "not started".
#include "scheduler.h"

struct sched {
  int workers;
  // your state: streams, events, ops with their dependencies, the ready queue, the worker
  // threads, a mutex and condition variables
};

extern "C" {
sched *sched_create(int workers) {
  (void)workers;
  return nullptr;  // TODO: start `workers` worker threads
}

void sched_destroy(sched *s) { (void)s; }

int sched_stream_create(sched *s, int flags, int priority) {
  (void)s, (void)flags, (void)priority;
  return SCHED_TODO;
}

int sched_event_create(sched *s) {
  (void)s;
  return SCHED_TODO;
}

int64_t sched_launch(sched *s, int stream, sched_fn fn, void *arg, int64_t duration) {
  (void)s, (void)stream, (void)fn, (void)arg, (void)duration;
  return SCHED_TODO;
}

int64_t sched_record(sched *s, int event, int stream) {
  (void)s, (void)event, (void)stream;
  return SCHED_TODO;
}

int64_t sched_wait_event(sched *s, int stream, int event) {
  (void)s, (void)stream, (void)event;
  return SCHED_TODO;
}

int64_t sched_write_value(sched *s, int stream, int flag, int64_t value) {
  (void)s, (void)stream, (void)flag, (void)value;
  return SCHED_TODO;
}

int64_t sched_wait_value(sched *s, int stream, int flag, int64_t value) {
  (void)s, (void)stream, (void)flag, (void)value;
  return SCHED_TODO;
}

int sched_synchronize(sched *s, char *err, size_t errlen) {
  (void)s, (void)err, (void)errlen;
  return SCHED_TODO;
}

int sched_times(sched *s, int64_t op, int64_t *start, int64_t *end) {
  (void)s, (void)op, (void)start, (void)end;
  return SCHED_TODO;
}
}
