#include "runtime/startup_profile.h"

namespace guild {

double StartupProfile::now_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

StageRecord& StartupProfile::begin(const char* name) {
  if (open_) end();
  StageRecord r;
  r.name = name;
  r.start_ms = now_ms();
  stages_.push_back(std::move(r));
  open_ = true;
  return stages_.back();
}

void StartupProfile::end() {
  if (!open_) return;
  stages_.back().end_ms = now_ms();
  open_ = false;
}

void StartupProfile::finish() {
  end();
  total_ms_ = now_ms();
}

json::Value StartupProfile::to_json() const {
  json::Value out = json::Value::object();
  out.set("schema", kStartupProfileSchema);
  out.set("model", model_);
  out.set("machine", machine_);
  json::Value stages = json::Value::array();
  for (const StageRecord& s : stages_) {
    json::Value v = json::Value::object();
    v.set("name", s.name);
    v.set("start_ms", s.start_ms);
    v.set("end_ms", s.end_ms);
    v.set("duration_ms", s.end_ms - s.start_ms);
    v.set("bytes", static_cast<unsigned long long>(s.bytes));
    v.set("detail", s.detail);
    stages.push_back(std::move(v));
  }
  out.set("stages", std::move(stages));
  json::Value fb = json::Value::array();
  for (const Fallback& f : fallbacks_) {
    json::Value v = json::Value::object();
    v.set("stage", f.stage);
    v.set("reason", f.reason);
    fb.push_back(std::move(v));
  }
  out.set("fallbacks", std::move(fb));
  out.set("placement", placement_);
  out.set("total_ms", total_ms_);
  return out;
}

}  // namespace guild
