// One generation at a time per model, first come first served (seed §2:
// "Solo curl scripts and the web app both see queueing, not parallelism").
// Callers take a ticket, wait for their turn while watching their position,
// and may leave the queue at any time. The queue is bounded.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace guild {

class GenerationQueue {
 public:
  explicit GenerationQueue(size_t max_waiting = 64) : max_waiting_(max_waiting) {}

  void set_max_waiting(size_t n) { std::lock_guard<std::mutex> l(mutex_); max_waiting_ = n; }

  // Takes a ticket; 0 when the queue is full.
  uint64_t enqueue();
  // Blocks until the ticket runs (true) or `cancelled` becomes true (false,
  // and the ticket leaves the queue). on_position(n) is called whenever the
  // number of requests ahead changes (n >= 1 while waiting, 0 when it runs).
  bool wait_turn(uint64_t ticket, const std::atomic<bool>& cancelled,
                 const std::function<void(int)>& on_position);
  // Ends the running ticket's turn; the next one starts.
  void finish(uint64_t ticket);
  // Wakes waiters so they re-check their cancel flags.
  void poke();

  // 0 = running, n = n requests ahead (incl. the running one), -1 = not queued.
  int position(uint64_t ticket) const;
  size_t size() const;  // running + waiting

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<uint64_t> tickets_;  // front = running (or next to run)
  uint64_t next_ticket_ = 1;
  size_t max_waiting_;
};

// RAII: holds a turn from wait_turn() until destruction.
class QueueTurn {
 public:
  QueueTurn(GenerationQueue& q, uint64_t ticket) : q_(q), ticket_(ticket) {}
  ~QueueTurn() { q_.finish(ticket_); }
  QueueTurn(const QueueTurn&) = delete;
  QueueTurn& operator=(const QueueTurn&) = delete;

 private:
  GenerationQueue& q_;
  uint64_t ticket_;
};

}  // namespace guild
