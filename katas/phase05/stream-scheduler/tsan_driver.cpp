// GIVEN: the program the ThreadSanitizer test builds with your scheduler.cpp (-fsanitize=thread)
// and runs: host threads enqueue on their own streams while the workers run, then one thread
// reads finished ops' times while two others enqueue. Exit codes: 0 ok,
// 3 not started (sched_create returned NULL), 4 a call failed, 66 a data race (TSan's report).
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "scheduler.h"

int main() {
  k_reset();
  sched *s = sched_create(4);
  if (!s) return 3;
  int shared = sched_stream_create(s, SCHED_BLOCKING, 0);
  int event = sched_event_create(s);
  if (shared < 0 || event < 0) return 4;
  std::atomic<int> failed{0};
  std::vector<std::thread> hosts;
  for (int t = 0; t < 3; t++) {
    hosts.emplace_back([&, t] {
      int mine = sched_stream_create(s, t == 0 ? SCHED_NON_BLOCKING : SCHED_BLOCKING, -t);
      for (int i = 0; i < 200; i++) {
        int stream = i % 3 == 0 ? SCHED_PER_THREAD : mine;
        if (sched_launch(s, stream, k_work, (void *)(intptr_t)(1 << 15), 1 + i % 4) < 0) failed = 1;
        if (i % 10 == 0 && sched_record(s, event, stream) < 0) failed = 1;
        if (i % 15 == 0 && sched_wait_event(s, stream, event) < 0) failed = 1;
        if (i % 50 == 0 && sched_launch(s, SCHED_LEGACY_DEFAULT, k_work, nullptr, 1) < 0) failed = 1;
      }
    });
  }
  for (auto &h : hosts) h.join();
  char err[256] = {0};
  if (sched_synchronize(s, err, sizeof err) != SCHED_OK) {
    fprintf(stderr, "sched_synchronize: %s\n", err);
    return 4;
  }
  // Round 2: the finished ops' times are read while two threads enqueue more (a query is a
  // call like any other: the scheduler's tables grow under it).
  int64_t finished = sched_launch(s, shared, k_work, nullptr, 1);
  if (finished < 0 || sched_synchronize(s, err, sizeof err) != SCHED_OK) return 4;
  std::atomic<bool> enqueuing{true};
  std::thread reader([&] {
    int64_t start = 0, end = 0;
    for (int64_t i = 0; enqueuing || i < 2000; i++) {
      if (sched_times(s, i % (finished + 1), &start, &end) != SCHED_OK) failed = 1;
    }
  });
  std::vector<std::thread> more;
  for (int t = 0; t < 2; t++) {
    more.emplace_back([&] {
      for (int i = 0; i < 300; i++) {
        if (sched_launch(s, shared, k_work, nullptr, 1) < 0) failed = 1;
      }
    });
  }
  for (auto &h : more) h.join();
  enqueuing = false;
  reader.join();
  if (sched_synchronize(s, err, sizeof err) != SCHED_OK) {
    fprintf(stderr, "sched_synchronize: %s\n", err);
    return 4;
  }
  sched_destroy(s);
  return failed ? 4 : 0;
}
