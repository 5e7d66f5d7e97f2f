#include "runtime/session_memory.h"

#include <algorithm>
#include <cstdio>

#include "models/decoder_forward.h"
#include "runtime/mtp_drafter.h"
#include "runtime/session.h"

namespace guild {
namespace {
constexpr int kMaxBatch = 512;  // tokens per forward pass during prefill
}  // namespace

int session_max_batch(int n_ctx, int max_batch) {
  return std::min(max_batch > 0 ? std::min(max_batch, kMaxBatch) : kMaxBatch, n_ctx);
}

int session_scratch_tokens(int n_ctx, int max_batch) {
  return std::max(session_max_batch(n_ctx, max_batch), std::min(kMaxWindow, n_ctx));
}

SessionMemory estimate_session_memory(const ModelHparams& hp, int n_ctx, int n_threads, KvType kv_type, bool on_gpu,
                                      const SessionShape& shape) {
  SessionMemory m;
  m.n_ctx = n_ctx;
  m.max_tokens = session_scratch_tokens(n_ctx, shape.max_batch);
  if (!on_gpu) {
    // KvCache::init: per layer n_ctx rows of K and V (a sliding-window layer fewer).
    const uint64_t elem = kv_type == KvType::F16 ? 2 : 4;
    const uint64_t row = static_cast<uint64_t>(hp.n_head_kv) * (static_cast<uint64_t>(hp.head_dim_k) + hp.head_dim_v);
    for (int l = 0; l < hp.n_layer; ++l) {
      const int w = static_cast<size_t>(l) < shape.windows.size() ? shape.windows[static_cast<size_t>(l)] : 0;
      m.kv += static_cast<uint64_t>(KvCache::sliding_rows(w, n_ctx, m.max_tokens, shape.sliding_history)) * row * elem;
    }
    const DecoderScratchSizes z = DecoderScratch::sizes(hp, m.max_tokens, n_ctx, std::max(1, n_threads));
    m.per_thread = z.per_thread_bytes();
    m.scratch = z.bytes() - m.per_thread;
    if (hp.n_nextn > 0) m.drafter = MtpDrafter::bytes(hp, n_ctx, m.max_tokens, kv_type);
  }
  m.logits = static_cast<uint64_t>(1 + kMaxWindow) * static_cast<uint64_t>(hp.n_vocab) * sizeof(float);
  m.history = static_cast<uint64_t>(n_ctx) * sizeof(int32_t);
  return m;
}

std::string byte_size_text(uint64_t bytes) {
  char buf[64];
  if (bytes < (uint64_t{1} << 10)) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else if (bytes < (uint64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.0f KiB", bytes / 1024.0);
  else if (bytes < (uint64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / 1048576.0);
  else std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / 1073741824.0);
  return buf;
}

json::Value SessionMemory::to_json() const {
  json::Value v = json::Value::object();
  v.set("n_ctx", n_ctx);
  v.set("kv_bytes", static_cast<unsigned long long>(kv));
  v.set("scratch_bytes", static_cast<unsigned long long>(scratch));
  v.set("per_thread_bytes", static_cast<unsigned long long>(per_thread));
  v.set("logits_bytes", static_cast<unsigned long long>(logits));
  v.set("history_bytes", static_cast<unsigned long long>(history));
  if (drafter > 0) v.set("drafter_bytes", static_cast<unsigned long long>(drafter));
  v.set("total_bytes", static_cast<unsigned long long>(total()));
  return v;
}

std::string SessionMemory::summary() const {
  return "KV cache " + byte_size_text(kv) + " + scratch " + byte_size_text(scratch) + " + per-thread buffers " +
         byte_size_text(per_thread) + " + logits " + byte_size_text(logits) + " + history " + byte_size_text(history) +
         (drafter > 0 ? " + MTP drafter " + byte_size_text(drafter) : std::string()) + " = " + byte_size_text(total());
}

bool session_memory_fits(const SessionMemory& need, uint64_t limit, std::string* error) {
  if (need.total() <= limit) return true;
  if (error)
    *error = "a session of " + std::to_string(need.n_ctx) + " tokens needs " + byte_size_text(need.total()) + " (" +
             need.summary() + ") but only " + byte_size_text(limit) +
             " can be allocated on this machine now (available memory less headroom); use a smaller context";
  return false;
}

}  // namespace guild
