// GIVEN: the test kernels (see scheduler.h). Do not edit.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "scheduler.h"

namespace {
constexpr int64_t kMax = 1 << 16;
std::atomic<int64_t> g_seq{0};
std::atomic<int> g_running{0}, g_max{0};
int64_t g_sleep[kMax], g_start[kMax], g_end[kMax], g_thread[kMax];
std::mutex g_threads_mu;
std::map<std::thread::id, int64_t> g_threads;

int64_t thread_number() {
  std::lock_guard<std::mutex> lock(g_threads_mu);
  auto it = g_threads.find(std::this_thread::get_id());
  if (it != g_threads.end()) return it->second;
  int64_t n = (int64_t)g_threads.size() + 1;
  g_threads[std::this_thread::get_id()] = n;
  return n;
}
bool ok(int64_t id) { return id >= 0 && id < kMax; }
}  // namespace

extern "C" {
void k_reset(void) {
  g_seq = 0;
  g_running = 0;
  g_max = 0;
  for (int64_t i = 0; i < kMax; i++) g_sleep[i] = g_start[i] = g_end[i] = g_thread[i] = 0;
  std::lock_guard<std::mutex> lock(g_threads_mu);
  g_threads.clear();
}
void k_set_sleep_us(int64_t id, int64_t us) {
  if (ok(id)) g_sleep[id] = us;
}
void k_work(void *arg) {
  int64_t id = (int64_t)(intptr_t)arg;
  if (!ok(id)) return;
  int now = ++g_running;
  for (int m = g_max.load(); now > m && !g_max.compare_exchange_weak(m, now);) {
  }
  __atomic_store_n(&g_start[id], ++g_seq, __ATOMIC_SEQ_CST);
  __atomic_store_n(&g_thread[id], thread_number(), __ATOMIC_SEQ_CST);
  if (g_sleep[id] > 0) std::this_thread::sleep_for(std::chrono::microseconds(g_sleep[id]));
  --g_running;
  __atomic_store_n(&g_end[id], ++g_seq, __ATOMIC_SEQ_CST);
}
int64_t k_start_seq(int64_t id) { return ok(id) ? __atomic_load_n(&g_start[id], __ATOMIC_SEQ_CST) : 0; }
int64_t k_end_seq(int64_t id) { return ok(id) ? __atomic_load_n(&g_end[id], __ATOMIC_SEQ_CST) : 0; }
int64_t k_thread(int64_t id) { return ok(id) ? __atomic_load_n(&g_thread[id], __ATOMIC_SEQ_CST) : 0; }
int k_max_concurrent(void) { return g_max.load(); }
}
