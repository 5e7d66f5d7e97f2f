// Leases pin kernel providers (and, later, runners) while a model or session
// uses them: a pinned provider cannot be disabled or uninstalled (seed §2,
// "Pinning"). The registry answers who pins what.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace guild {

struct LeaseHolder {
  uint64_t id = 0;
  std::string provider;  // e.g. "cpu-avx2"
  std::string holder;    // e.g. "model qwen3moe-a-Q8_0.gguf" or "session 3 (model …)"
};

class LeaseRegistry {
 public:
  static LeaseRegistry& instance();
  uint64_t acquire(const std::string& provider, const std::string& holder);
  void release(uint64_t id);
  std::vector<LeaseHolder> holders(const std::string& provider) const;
  std::vector<LeaseHolder> all() const;

 private:
  mutable std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::vector<LeaseHolder> leases_;
};

// RAII handle on one lease.
class Lease {
 public:
  Lease() = default;
  Lease(const std::string& provider, const std::string& holder)
      : id_(LeaseRegistry::instance().acquire(provider, holder)) {}
  ~Lease() { reset(); }
  Lease(Lease&& o) noexcept : id_(o.id_) { o.id_ = 0; }
  Lease& operator=(Lease&& o) noexcept { if (this != &o) { reset(); id_ = o.id_; o.id_ = 0; } return *this; }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  void reset() { if (id_) LeaseRegistry::instance().release(id_); id_ = 0; }

 private:
  uint64_t id_ = 0;
};

}  // namespace guild
