#include "runtime/leases.h"

#include <algorithm>

namespace guild {

LeaseRegistry& LeaseRegistry::instance() {
  static LeaseRegistry registry;
  return registry;
}

uint64_t LeaseRegistry::acquire(const std::string& provider, const std::string& holder) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_id_++;
  leases_.push_back({id, provider, holder});
  return id;
}

void LeaseRegistry::release(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  leases_.erase(std::remove_if(leases_.begin(), leases_.end(), [id](const LeaseHolder& l) { return l.id == id; }),
                leases_.end());
}

std::vector<LeaseHolder> LeaseRegistry::holders(const std::string& provider) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LeaseHolder> out;
  for (const auto& l : leases_)
    if (l.provider == provider) out.push_back(l);
  return out;
}

std::vector<LeaseHolder> LeaseRegistry::all() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return leases_;
}

}  // namespace guild
