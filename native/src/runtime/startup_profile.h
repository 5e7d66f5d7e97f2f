// StartupProfile: the load as a timeline. Each stage of GuildModel::load is
// one entry (start, end, bytes, detail) in the order the stages ran; the JSON
// form is the versioned contract "guild.startup-profile/1" (docs/STARTUP_PROFILE.md).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"

namespace guild {

inline constexpr const char* kStartupProfileSchema = "guild.startup-profile/1";

// The stages, in load order (ARCHITECTURE.md §2; the seed's lifecycle).
inline constexpr const char* kLoadStages[] = {
    "device_policy", "packages",      "container",    "runner",        "execution_state",
    "expert_pool",   "stream_and_lease", "gexec",     "dense_weights", "expert_tiers",
    "calibration",   "ram_complement", "session_state", "tokenizer",
};
inline constexpr int kLoadStageCount = sizeof(kLoadStages) / sizeof(kLoadStages[0]);

struct StageRecord {
  std::string name;
  double start_ms = 0.0;
  double end_ms = 0.0;
  uint64_t bytes = 0;
  json::Value detail = json::Value::object();
};

struct Fallback {
  std::string stage;
  std::string reason;
};

class StartupProfile {
 public:
  StartupProfile() : t0_(std::chrono::steady_clock::now()) {}

  // Opens the next stage; closes the previous one if still open.
  StageRecord& begin(const char* name);
  // Closes the open stage.
  void end();
  StageRecord* current() { return open_ ? &stages_.back() : nullptr; }
  // A recorded stage by name (to add detail learned later), or null.
  StageRecord* find(const char* name) {
    for (auto& s : stages_) if (s.name == name) return &s;
    return nullptr;
  }
  void add_fallback(std::string stage, std::string reason) { fallbacks_.push_back({std::move(stage), std::move(reason)}); }

  json::Value& model() { return model_; }
  json::Value& machine() { return machine_; }
  json::Value& placement() { return placement_; }
  const std::vector<StageRecord>& stages() const { return stages_; }
  const std::vector<Fallback>& fallbacks() const { return fallbacks_; }

  // Stops the clock for total_ms (call once the load has finished).
  void finish();
  double total_ms() const { return total_ms_; }
  json::Value to_json() const;

 private:
  double now_ms() const;
  std::chrono::steady_clock::time_point t0_;
  std::vector<StageRecord> stages_;
  std::vector<Fallback> fallbacks_;
  json::Value model_ = json::Value::object();
  json::Value machine_ = json::Value::object();
  json::Value placement_ = json::Value::object();
  bool open_ = false;
  double total_ms_ = 0.0;
};

}  // namespace guild
