#include "runtime/generation_queue.h"

#include <algorithm>
#include <chrono>

namespace guild {

uint64_t GenerationQueue::enqueue() {
  std::lock_guard<std::mutex> lock(mutex_);
  // The running request is not "waiting": capacity counts the ones behind it.
  const size_t waiting = tickets_.empty() ? 0 : tickets_.size() - 1;
  if (!tickets_.empty() && waiting >= max_waiting_) return 0;
  const uint64_t t = next_ticket_++;
  tickets_.push_back(t);
  return t;
}

bool GenerationQueue::wait_turn(uint64_t ticket, const std::atomic<bool>& cancelled,
                                const std::function<void(int)>& on_position) {
  std::unique_lock<std::mutex> lock(mutex_);
  int last_reported = -1;
  for (;;) {
    auto it = std::find(tickets_.begin(), tickets_.end(), ticket);
    if (it == tickets_.end()) return false;
    const int pos = static_cast<int>(it - tickets_.begin());
    if (cancelled.load()) {
      tickets_.erase(it);
      cv_.notify_all();  // the ones behind moved up
      return false;
    }
    if (pos != last_reported && on_position) {
      last_reported = pos;
      lock.unlock();
      on_position(pos);
      lock.lock();
      continue;  // re-check: the queue may have moved while unlocked
    }
    if (pos == 0) return true;
    // Timed wait as a safety net; cancel() and finish() notify.
    cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

void GenerationQueue::finish(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find(tickets_.begin(), tickets_.end(), ticket);
  if (it != tickets_.end()) tickets_.erase(it);
  cv_.notify_all();
}

void GenerationQueue::poke() {
  std::lock_guard<std::mutex> lock(mutex_);
  cv_.notify_all();
}

int GenerationQueue::position(uint64_t ticket) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find(tickets_.begin(), tickets_.end(), ticket);
  return it == tickets_.end() ? -1 : static_cast<int>(it - tickets_.begin());
}

size_t GenerationQueue::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tickets_.size();
}

}  // namespace guild
