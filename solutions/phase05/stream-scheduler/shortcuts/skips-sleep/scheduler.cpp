// A stream scheduler: CUDA's stream and event semantics on a pool of worker threads (reference).
#include <algorithm>
#include <condition_variable>
#include <functional>
#include <cstdio>
#include <map>
#include <mutex>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "scheduler.h"

namespace {
enum Kind { KERNEL, RECORD, WAIT_EVENT, WRITE, WAIT_VALUE };

struct Op {
  Kind kind;
  int stream;
  int priority;
  sched_fn fn = nullptr;
  void *arg = nullptr;
  int64_t duration = 0;
  int flag = 0;
  int64_t value = 0;
  std::vector<int64_t> deps;        // ops that must finish first (static)
  std::vector<int64_t> dependents;  // the reverse
  int waiting = 0;                  // deps not finished yet
  bool queued = false, done = false;
  int64_t start = -1, end = -1;     // logical clock
};

struct Stream {
  int flags = SCHED_BLOCKING;
  int priority = 0;
  int64_t last = -1;  // the last op enqueued on it
};
}  // namespace

struct sched {
  std::mutex mu;
  std::condition_variable work_cv, done_cv;
  std::vector<Op> ops;
  std::map<int, Stream> streams;
  std::vector<int64_t> events;  // the op of each event's last record, -1: never recorded
  std::map<std::thread::id, int> per_thread;
  std::map<int, int64_t> flags;  // values written so far (real execution)
  std::set<std::pair<int, int64_t>> ready;  // (priority, op id)
  std::vector<int64_t> blocked_values;      // WAIT_VALUE ops whose deps are done
  std::vector<std::thread> workers;
  int nworkers = 1, next_stream = 1, running = 0;
  int64_t finished = 0;
  bool stop = false;

  // -------------------------------------------------------------- enqueue (lock held)
  int resolve(int stream) {
    if (stream == SCHED_PER_THREAD) {
      auto id = std::this_thread::get_id();
      auto it = per_thread.find(id);
      if (it != per_thread.end()) return it->second;
      int s = next_stream++;
      streams[s] = Stream{};
      per_thread[id] = s;
      return s;
    }
    return streams.count(stream) ? stream : -1;
  }

  int64_t enqueue(int stream, Op op) {
    int s = resolve(stream);
    if (s < 0) return SCHED_INVALID;
    Stream &st = streams[s];
    op.stream = s;
    op.priority = st.priority;
    std::vector<int64_t> deps = op.deps;
    if (st.last >= 0) deps.push_back(st.last);
    if (s == SCHED_LEGACY_DEFAULT) {
      // the legacy default stream waits for all earlier work of every blocking stream
      for (auto &kv : streams)
        if (kv.first != s && kv.second.flags == SCHED_BLOCKING && kv.second.last >= 0)
          deps.push_back(kv.second.last);
    } else if (st.flags == SCHED_BLOCKING && streams[0].last >= 0) {
      deps.push_back(streams[0].last);  // ... and blocking streams wait for it
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    int64_t id = (int64_t)ops.size();
    op.deps = deps;
    for (int64_t d : deps)
      if (!ops[d].done) {
        op.waiting++;
        ops[d].dependents.push_back(id);
      }
    ops.push_back(op);
    streams[s].last = id;
    if (ops[id].waiting == 0) became_unblocked(id);
    return id;
  }

  // -------------------------------------------------------------- execution (lock held)
  bool value_ok(const Op &op) {
    auto it = flags.find(op.flag);
    return it != flags.end() && it->second >= op.value;
  }

  void became_unblocked(int64_t id) {
    Op &op = ops[id];
    if (op.kind == WAIT_VALUE && !value_ok(op)) {
      blocked_values.push_back(id);
      return;
    }
    op.queued = true;
    ready.insert({op.priority, id});
    work_cv.notify_one();
  }

  void finish(int64_t id) {
    Op &op = ops[id];
    op.done = true;
    finished++;
    if (op.kind == WRITE) {
      flags[op.flag] = op.value;
      std::vector<int64_t> still;
      for (int64_t w : blocked_values) {
        if (value_ok(ops[w])) {
          ops[w].queued = true;
          ready.insert({ops[w].priority, w});
        } else {
          still.push_back(w);
        }
      }
      blocked_values.swap(still);
      work_cv.notify_all();
    }
    for (int64_t d : op.dependents)
      if (--ops[d].waiting == 0) became_unblocked(d);
    done_cv.notify_all();
  }

  void worker() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      work_cv.wait(lock, [&] { return stop || !ready.empty(); });
      if (stop) return;
      int64_t id = ready.begin()->second;
      ready.erase(ready.begin());
      Op &op = ops[id];
      if (op.kind == KERNEL && op.fn) {
        sched_fn fn = op.fn;
        void *arg = op.arg;
        running++;
        lock.unlock();
        fn(arg);  // never under the lock: kernels of other streams run at the same time
        lock.lock();
        running--;
      }
      finish(id);
    }
  }

  // -------------------------------------------------------------- deadlock report
  std::string cycle() {
    // stream -> the streams its first unfinished op waits for
    std::map<int, int64_t> head;
    for (int64_t i = 0; i < (int64_t)ops.size(); i++)
      if (!ops[i].done && !head.count(ops[i].stream)) head[ops[i].stream] = i;
    std::map<int, std::vector<int>> waits_for;
    for (auto &kv : head) {
      const Op &op = ops[kv.second];
      std::set<int> to;
      for (int64_t d : op.deps)
        if (!ops[d].done) to.insert(ops[d].stream);
      if (op.kind == WAIT_VALUE && op.waiting == 0)
        for (const Op &w : ops)
          if (w.kind == WRITE && !w.done && w.flag == op.flag && w.value >= op.value)
            to.insert(w.stream);
      waits_for[kv.first].assign(to.begin(), to.end());
    }
    std::map<int, int> state;  // 1 on the path, 2 done
    std::vector<int> path;
    std::vector<int> found;
    std::function<bool(int)> dfs = [&](int s) -> bool {
      state[s] = 1;
      path.push_back(s);
      for (int t : waits_for[s]) {
        if (state[t] == 1) {
          auto it = std::find(path.begin(), path.end(), t);
          found.assign(it, path.end());
          found.push_back(t);
          return true;
        }
        if (state[t] == 0 && dfs(t)) return true;
      }
      state[s] = 2;
      path.pop_back();
      return false;
    };
    for (auto &kv : waits_for)
      if (state[kv.first] == 0 && dfs(kv.first)) break;
    std::string text = "deadlock: ";
    if (found.empty()) return text + "no op can run, and no cycle was found";
    for (size_t i = 0; i + 1 < found.size(); i++) {
      const Op &op = ops[head[found[i]]];
      char buf[160];
      if (op.kind == WAIT_VALUE)
        snprintf(buf, sizeof buf, "stream %d (op %lld waits for flag %d >= %lld) -> ", found[i],
                 (long long)head[found[i]], op.flag, (long long)op.value);
      else
        snprintf(buf, sizeof buf, "stream %d (op %lld) -> ", found[i], (long long)head[found[i]]);
      text += buf;
    }
    return text + "stream " + std::to_string(found.back());
  }

  // -------------------------------------------------------------- the logical clock
  void logical_clock() {
    std::vector<int> left(ops.size());
    for (size_t i = 0; i < ops.size(); i++) left[i] = (int)ops[i].deps.size();
    std::map<int, int64_t> vals;
    std::set<std::pair<int, int64_t>> rdy;  // (priority, id)
    std::vector<int64_t> parked;            // wait-values with deps done
    using Ev = std::pair<int64_t, int64_t>; // (end time, id)
    std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> busy;
    auto satisfied = [&](const Op &op) {
      auto it = vals.find(op.flag);
      return it != vals.end() && it->second >= op.value;
    };
    auto unblock = [&](int64_t id) {
      if (ops[id].kind == WAIT_VALUE && !satisfied(ops[id]))
        parked.push_back(id);
      else
        rdy.insert({ops[id].priority, id});
    };
    std::vector<std::vector<int64_t>> after(ops.size());
    for (size_t i = 0; i < ops.size(); i++)
      for (int64_t d : ops[i].deps) after[d].push_back((int64_t)i);
    for (size_t i = 0; i < ops.size(); i++)
      if (left[i] == 0) unblock((int64_t)i);
    int64_t now = 0;
    auto complete = [&](int64_t id) {
      ops[id].end = now;
      if (ops[id].kind == WRITE) {
        vals[ops[id].flag] = ops[id].value;
        std::vector<int64_t> still;
        for (int64_t p : parked) {
          if (satisfied(ops[p]))
            rdy.insert({ops[p].priority, p});
          else
            still.push_back(p);
        }
        parked.swap(still);
      }
      for (int64_t a : after[id])
        if (--left[a] == 0) unblock(a);
    };
    for (;;) {
      // instant ops first (they need no worker), then fill free workers by priority
      bool again = true;
      while (again) {
        again = false;
        for (auto it = rdy.begin(); it != rdy.end(); ++it) {
          if (ops[it->second].kind != KERNEL) {
            int64_t id = it->second;
            rdy.erase(it);
            ops[id].start = now;
            complete(id);
            again = true;
            break;
          }
        }
      }
      while ((int)busy.size() < nworkers && !rdy.empty()) {
        int64_t id = rdy.begin()->second;
        rdy.erase(rdy.begin());
        ops[id].start = now;
        busy.push({now + ops[id].duration, id});
      }
      if (busy.empty()) return;  // all done, or deadlocked (their times stay -1)
      now = busy.top().first;
      while (!busy.empty() && busy.top().first == now) {
        int64_t id = busy.top().second;
        busy.pop();
        complete(id);
      }
    }
  }
};

extern "C" {
sched *sched_create(int workers) {
  if (workers < 1) return nullptr;
  sched *s = new sched();
  s->nworkers = workers;
  s->streams[SCHED_LEGACY_DEFAULT] = Stream{};
  s->workers.emplace_back([s] { s->worker(); });  // one thread does all the work
  return s;
}

void sched_destroy(sched *s) {
  if (!s) return;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->stop = true;
  }
  s->work_cv.notify_all();
  for (auto &t : s->workers) t.join();
  delete s;
}

int sched_stream_create(sched *s, int flags, int priority) {
  if (flags != SCHED_BLOCKING && flags != SCHED_NON_BLOCKING) return SCHED_INVALID;
  std::lock_guard<std::mutex> lock(s->mu);
  int id = s->next_stream++;
  s->streams[id] = Stream{flags, priority, -1};
  return id;
}

int sched_event_create(sched *s) {
  std::lock_guard<std::mutex> lock(s->mu);
  s->events.push_back(-1);
  return (int)s->events.size() - 1;
}

int64_t sched_launch(sched *s, int stream, sched_fn fn, void *arg, int64_t duration) {
  if (duration < 0) return SCHED_INVALID;
  // The shortcut: the kernel will not sleep its time, so one worker looks fast.
  if (fn == k_work) k_set_sleep_us((int64_t)(intptr_t)arg, 0);
  std::lock_guard<std::mutex> lock(s->mu);
  Op op{KERNEL, 0, 0};
  op.fn = fn;
  op.arg = arg;
  op.duration = duration;
  return s->enqueue(stream, op);
}

int64_t sched_record(sched *s, int event, int stream) {
  std::lock_guard<std::mutex> lock(s->mu);
  if (event < 0 || event >= (int)s->events.size()) return SCHED_INVALID;
  int64_t id = s->enqueue(stream, Op{RECORD, 0, 0});
  if (id >= 0) s->events[event] = id;
  return id;
}

int64_t sched_wait_event(sched *s, int stream, int event) {
  std::lock_guard<std::mutex> lock(s->mu);
  if (event < 0 || event >= (int)s->events.size()) return SCHED_INVALID;
  Op op{WAIT_EVENT, 0, 0};
  if (s->events[event] >= 0) op.deps.push_back(s->events[event]);
  return s->enqueue(stream, op);
}

int64_t sched_write_value(sched *s, int stream, int flag, int64_t value) {
  std::lock_guard<std::mutex> lock(s->mu);
  Op op{WRITE, 0, 0};
  op.flag = flag;
  op.value = value;
  return s->enqueue(stream, op);
}

int64_t sched_wait_value(sched *s, int stream, int flag, int64_t value) {
  std::lock_guard<std::mutex> lock(s->mu);
  Op op{WAIT_VALUE, 0, 0};
  op.flag = flag;
  op.value = value;
  return s->enqueue(stream, op);
}

int sched_synchronize(sched *s, char *err, size_t errlen) {
  std::unique_lock<std::mutex> lock(s->mu);
  s->done_cv.wait(lock, [&] {
    return s->finished == (int64_t)s->ops.size() || (s->running == 0 && s->ready.empty());
  });
  if (s->finished == (int64_t)s->ops.size()) {
    s->logical_clock();
    return SCHED_OK;
  }
  std::string text = s->cycle();
  if (err && errlen) snprintf(err, errlen, "%s", text.c_str());
  return SCHED_DEADLOCK;
}

int sched_times(sched *s, int64_t op, int64_t *start, int64_t *end) {
  std::lock_guard<std::mutex> lock(s->mu);
  if (op < 0 || op >= (int64_t)s->ops.size() || s->ops[op].end < 0) return SCHED_INVALID;
  *start = s->ops[op].start;
  *end = s->ops[op].end;
  return SCHED_OK;
}
}
