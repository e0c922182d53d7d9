#include "backend/cpu/thread_pool.hpp"

#include <algorithm>

namespace flashkv::backend::cpu {

struct ThreadPool::Job {
  const std::function<void(int64_t)>* body = nullptr;
  int64_t count = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> finished{0};
  std::mutex mutex;  // guards error and the completion wait
  std::condition_variable all_finished;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(int threads) {
  const int workers = std::max(threads, 1) - 1;
  workers_.reserve(static_cast<size_t>(workers));
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::run_indices(Job& job) {
  for (int64_t i = job.next.fetch_add(1); i < job.count; i = job.next.fetch_add(1)) {
    try {
      (*job.body)(i);
    } catch (...) {
      std::lock_guard lock(job.mutex);
      if (!job.error) job.error = std::current_exception();
    }
    if (job.finished.fetch_add(1) + 1 == job.count) {
      std::lock_guard lock(job.mutex);  // the waiter checks `finished` under this lock: no lost wake-up
      job.all_finished.notify_all();
    }
  }
}

void ThreadPool::worker_loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      job = queue_.front();
      if (job->next.load() >= job->count) {  // exhausted: retire it and look again
        queue_.pop_front();
        continue;
      }
    }
    run_indices(*job);
    std::lock_guard lock(mutex_);
    if (!queue_.empty() && queue_.front() == job) queue_.pop_front();
  }
}

void ThreadPool::parallel_for(int64_t count, const std::function<void(int64_t)>& body) {
  if (count <= 0) return;
  if (workers_.empty() || count == 1) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->body = &body;
  job->count = count;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(job);
  }
  wake_.notify_all();
  run_indices(*job);
  {
    std::unique_lock lock(job->mutex);
    job->all_finished.wait(lock, [&] { return job->finished.load() == job->count; });
  }
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find(queue_.begin(), queue_.end(), job);
    if (it != queue_.end()) queue_.erase(it);
  }
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace flashkv::backend::cpu
