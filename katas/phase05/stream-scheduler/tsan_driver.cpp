// GIVEN: the program the ThreadSanitizer test builds with your scheduler.cpp (-fsanitize=thread)
// and runs: host threads enqueue on their own streams while the workers run. Exit codes: 0 ok,
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
  sched_destroy(s);
  return failed ? 4 : 0;
}
