// ThreadPool — a fixed set of std::thread workers running index ranges (parallel_for) for the CPU backend.
//
// Contract: parallel_for(count, body) runs body(i) once for every i in [0, count) and returns when all have
// finished; the calling thread takes part. Several threads may call parallel_for at the same time (an Engine
// is shared between sessions): their jobs queue and the workers serve them in order. The first exception a
// body throws is rethrown to its caller after every index of that job has run or been skipped. Ownership: the
// pool owns its threads; the destructor joins them (no job may be running).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace flashkv::backend::cpu {

class ThreadPool {
 public:
  // `threads` = total parallelism including the caller (>= 1); threads - 1 workers are started.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(int64_t count, const std::function<void(int64_t)>& body);

 private:
  struct Job;
  void worker_loop();
  static void run_indices(Job& job);

  std::vector<std::thread> workers_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

}  // namespace flashkv::backend::cpu
