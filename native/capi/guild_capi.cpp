// The C ABI (include/guild/guild.h) over GuildModel / GuildSession. Every entry
// point catches everything: nothing throws across this boundary.
#include "guild/guild.h"
#include "guild/guild_testing.h"

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "artifact/inspect.h"
#include "core/json.h"
#include "packages/archive.h"
#include "packages/store.h"
#include "runtime/model.h"
#include "runtime/session.h"

struct guild_model {
  std::unique_ptr<guild::GuildModel> impl;
};

struct guild_session {
  std::unique_ptr<guild::GuildSession> impl;
};

namespace {

char* dup_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (!out) return nullptr;
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

void set_error(char** error, const std::string& msg) {
  if (error) *error = dup_string(msg);
}

template <typename Fn>
auto guarded(char** error, Fn&& fn, decltype(fn()) on_fail) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    set_error(error, "out of memory");
  } catch (const std::exception& e) {
    set_error(error, std::string("internal error: ") + e.what());
  } catch (...) {
    set_error(error, "internal error");
  }
  return on_fail;
}

guild_status status_of(guild::GenerateError kind) {
  switch (kind) {
    case guild::GenerateError::ContextFull: return GUILD_ERR_CONTEXT_FULL;
    case guild::GenerateError::QueueFull: return GUILD_ERR_QUEUE_FULL;
    case guild::GenerateError::NotReady: return GUILD_ERR_NOT_READY;
    case guild::GenerateError::Device: return GUILD_ERR_DEVICE;
    case guild::GenerateError::ModelChanged: return GUILD_ERR_IO;  // the file can no longer be read as loaded
    case guild::GenerateError::None: return GUILD_ERR_CANCELLED;   // eval: cancelled while queued
    case guild::GenerateError::InvalidArgument: break;
  }
  return GUILD_ERR_INVALID_ARGUMENT;
}

}  // namespace

extern "C" {

int32_t guild_abi_version(void) { return GUILD_ABI_VERSION; }

void guild_string_free(char* s) { std::free(s); }

const char* guild_status_name(guild_status s) {
  switch (s) {
    case GUILD_OK: return "ok";
    case GUILD_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case GUILD_ERR_IO: return "io";
    case GUILD_ERR_FORMAT: return "format";
    case GUILD_ERR_UNSUPPORTED: return "unsupported";
    case GUILD_ERR_OUT_OF_MEMORY: return "out_of_memory";
    case GUILD_ERR_CONTEXT_FULL: return "context_full";
    case GUILD_ERR_CANCELLED: return "cancelled";
    case GUILD_ERR_NOT_READY: return "not_ready";
    case GUILD_ERR_INTERNAL: return "internal";
    case GUILD_ERR_QUEUE_FULL: return "queue_full";
    case GUILD_ERR_DEVICE: return "device";
    case GUILD_ERR_BUSY: return "busy";
    case GUILD_ERR_NOT_FOUND: return "not_found";
  }
  return "unknown";
}

guild_load_params guild_load_params_default(void) {
  guild_load_params p{};
  p.struct_size = sizeof(guild_load_params);
  p.kv_type = "f16";
  return p;
}

}  // extern "C"

namespace {

// guild_load_params -> LoadOptions, shared by guild_model_load and
// guild_model_check (so a check sees exactly what the load would). False and
// *error for a malformed field.
bool load_options_from(const guild_load_params* params, guild::LoadOptions* opt, std::string* error) {
  if (!params) return true;
  if (params->struct_size < sizeof(uint32_t)) { *error = "guild_load_params.struct_size is not set"; return false; }
  if (params->n_threads < 0 || params->n_threads > 1024) { *error = "n_threads out of range"; return false; }
  if (params->n_ctx < 0) { *error = "n_ctx out of range"; return false; }
  opt->n_threads = params->n_threads;
  opt->n_ctx = params->n_ctx;
  if (params->kv_type && std::strcmp(params->kv_type, "f32") == 0) opt->kv_type = guild::KvType::F32;
  else if (params->kv_type && std::strcmp(params->kv_type, "f16") != 0) {
    *error = std::string("unknown kv_type '") + params->kv_type + "' (expected f16 or f32)";
    return false;
  }
  if (params->struct_size >= offsetof(guild_load_params, packages_dir) + sizeof(params->packages_dir) &&
      params->packages_dir)
    opt->packages_dir = params->packages_dir;
  if (params->struct_size >= offsetof(guild_load_params, experts_on_cpu) + sizeof(params->experts_on_cpu)) {
    if (params->gpu) opt->gpu = params->gpu;
    if (params->gpu_budget_bytes > 0) opt->gpu_budget_bytes = static_cast<int64_t>(params->gpu_budget_bytes);
    opt->experts_on_cpu = params->experts_on_cpu != 0;
  }
  if (params->struct_size >= offsetof(guild_load_params, gpu_peer_budget_bytes) + sizeof(params->gpu_peer_budget_bytes)) {
    if (params->gpu_peers) opt->gpu_peers = params->gpu_peers;
    const double peer_budget = params->gpu_peer_budget_bytes;
    if (std::isnan(peer_budget) || peer_budget > 9.0e18) {
      *error = "gpu_peer_budget_bytes out of range";
      return false;
    }
    if (peer_budget > 0) opt->gpu_peer_budget_bytes = static_cast<int64_t>(peer_budget);
  }
  if (params->struct_size >= offsetof(guild_load_params, vocab_only) + sizeof(params->vocab_only))
    opt->vocab_only = params->vocab_only != 0;
  if (params->progress) {
    auto cb = params->progress;
    void* user = params->progress_user;
    opt->progress = [cb, user](const char* stage, double f) { return cb(stage, f, user) == 0; };
  }
  return true;
}

}  // namespace

extern "C" {

guild_model* guild_model_load(const char* path, const guild_load_params* params, char** error) {
  if (error) *error = nullptr;
  if (!path) { set_error(error, "model path is null"); return nullptr; }
  return guarded(error, [&]() -> guild_model* {
    guild::LoadOptions opt;
    std::string err;
    if (!load_options_from(params, &opt, &err)) { set_error(error, err); return nullptr; }
    guild::LoadErrorKind kind;
    auto model = guild::GuildModel::load(path, opt, &err, &kind);
    if (!model) { set_error(error, err); return nullptr; }
    auto* out = new guild_model();
    out->impl = std::move(model);
    return out;
  }, nullptr);
}

guild_status guild_model_check(const char* path, const guild_load_params* params, char** result_json, char** error) {
  if (error) *error = nullptr;
  if (result_json) *result_json = nullptr;
  if (!path) { set_error(error, "model path is null"); return GUILD_ERR_INVALID_ARGUMENT; }
  if (!result_json) { set_error(error, "result_json is null"); return GUILD_ERR_INVALID_ARGUMENT; }
  return guarded(error, [&]() -> guild_status {
    guild::LoadOptions opt;
    std::string err;
    if (!load_options_from(params, &opt, &err)) { set_error(error, err); return GUILD_ERR_INVALID_ARGUMENT; }
    const guild::LoadCheck check = guild::GuildModel::check(path, opt);
    char* json = dup_string(guild::json::serialize(check.to_json()));
    if (!json) { set_error(error, "out of memory"); return GUILD_ERR_OUT_OF_MEMORY; }
    *result_json = json;
    return GUILD_OK;
  }, GUILD_ERR_INTERNAL);
}

void guild_model_free(guild_model* model) { delete model; }

char* guild_model_info_json(const guild_model* model) {
  if (!model) return nullptr;
  return guarded(nullptr, [&]() -> char* {
    const auto& m = *model->impl;
    const auto& hp = m.hparams();
    guild::json::Value v = guild::json::Value::object();
    v.set("path", m.path());
    v.set("architecture", hp.arch);
    v.set("n_layer", hp.n_layer);
    v.set("n_embd", hp.n_embd);
    v.set("n_head", hp.n_head);
    v.set("n_head_kv", hp.n_head_kv);
    v.set("n_vocab", hp.n_vocab);
    v.set("n_ctx_train", hp.n_ctx_train);
    v.set("n_ctx", m.default_n_ctx());
    v.set("n_expert", hp.n_expert);
    v.set("n_expert_used", hp.n_expert_used);
    v.set("weight_bytes", static_cast<int64_t>(m.weight_bytes()));
    v.set("vocab_only", m.vocab_only());
    // A vocab-only model has no kernels and no pool.
    v.set("kernels", m.vocab_only() ? guild::json::Value() : guild::json::Value(m.kernels().name));
    v.set("n_threads", m.vocab_only() ? 0 : m.pool().size());
    return dup_string(guild::json::serialize(v));
  }, nullptr);
}

char* guild_model_profile_json(const guild_model* model) {
  if (!model) return nullptr;
  return guarded(nullptr, [&]() -> char* {
    return dup_string(guild::json::serialize(model->impl->profile().to_json()));
  }, nullptr);
}

char* guild_inspect_json(const char* path, char** error) {
  if (error) *error = nullptr;
  if (!path) { set_error(error, "model path is null"); return nullptr; }
  return guarded(error, [&]() -> char* {
    std::string err;
    auto files = guild::gguf::ModelFiles::open(path, &err);
    if (!files) { set_error(error, err); return nullptr; }
    return dup_string(guild::json::serialize(guild::inspect_model(*files)));
  }, nullptr);
}

int32_t guild_model_n_vocab(const guild_model* model) { return model ? model->impl->hparams().n_vocab : -1; }
int32_t guild_model_n_ctx_train(const guild_model* model) { return model ? model->impl->hparams().n_ctx_train : -1; }
int32_t guild_token_bos(const guild_model* model) { return model ? model->impl->vocab().bos() : -1; }
int32_t guild_token_eos(const guild_model* model) { return model ? model->impl->vocab().eos() : -1; }
int32_t guild_token_is_eog(const guild_model* model, int32_t token) {
  return model && model->impl->vocab().is_eog(token) ? 1 : 0;
}

char* guild_model_chat_template(const guild_model* model) {
  if (!model) return nullptr;
  return guarded(nullptr, [&]() -> char* {
    auto t = model->impl->files().get_string("tokenizer.chat_template");
    return t ? dup_string(std::string(*t)) : nullptr;
  }, nullptr);
}

int32_t guild_tokenize(const guild_model* model, const char* text, size_t text_len, int32_t add_special,
                       int32_t parse_special, int32_t* tokens, int32_t capacity) {
  if (!model || (!text && text_len) || capacity < 0 || (!tokens && capacity > 0)) return -1;
  return guarded(nullptr, [&]() -> int32_t {
    auto ids = model->impl->vocab().tokenize(std::string_view(text ? text : "", text_len), add_special != 0,
                                             parse_special != 0);
    if (ids.size() > static_cast<size_t>(INT32_MAX)) return -1;
    const int32_t n = static_cast<int32_t>(ids.size());
    const int32_t copy = std::min(n, capacity);
    if (copy > 0) std::memcpy(tokens, ids.data(), sizeof(int32_t) * static_cast<size_t>(copy));
    return n;
  }, -1);
}

int32_t guild_token_to_piece(const guild_model* model, int32_t token, int32_t render_special, char* buf,
                             int32_t capacity) {
  if (!model || capacity < 0 || (!buf && capacity > 0)) return -1;
  if (token < 0 || token >= model->impl->vocab().n_tokens()) return -1;
  return guarded(nullptr, [&]() -> int32_t {
    std::string piece = model->impl->vocab().token_to_piece(token, render_special != 0);
    const int32_t n = static_cast<int32_t>(piece.size());
    if (n <= capacity) std::memcpy(buf, piece.data(), piece.size());
    return n;
  }, -1);
}

char* guild_detokenize(const guild_model* model, const int32_t* tokens, int32_t n_tokens, int32_t remove_special,
                       int32_t unparse_special, size_t* out_len) {
  if (!model || n_tokens < 0 || (!tokens && n_tokens > 0)) return nullptr;
  const int32_t n_vocab = model->impl->vocab().n_tokens();
  for (int32_t i = 0; i < n_tokens; ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab) return nullptr;
  return guarded(nullptr, [&]() -> char* {
    std::string text = model->impl->vocab().detokenize(std::span<const int32_t>(tokens, static_cast<size_t>(n_tokens)),
                                                       remove_special != 0, unparse_special != 0);
    if (out_len) *out_len = text.size();
    return dup_string(text);
  }, nullptr);
}

guild_session* guild_session_create(guild_model* model, int32_t n_ctx, char** error) {
  if (error) *error = nullptr;
  if (!model) { set_error(error, "model is null"); return nullptr; }
  if (n_ctx < 0) { set_error(error, "n_ctx out of range"); return nullptr; }
  return guarded(error, [&]() -> guild_session* {
    std::string err;
    auto s = guild::GuildSession::create(*model->impl, n_ctx, &err);
    if (!s) { set_error(error, err); return nullptr; }
    auto* out = new guild_session();
    out->impl = std::move(s);
    return out;
  }, nullptr);
}

void guild_session_free(guild_session* session) { delete session; }

void guild_session_reset(guild_session* session) {
  if (session) session->impl->reset();
}

guild_status guild_eval(guild_session* session, const int32_t* tokens, int32_t n_tokens, int32_t all_rows,
                        float* logits, char** error) {
  if (error) *error = nullptr;
  if (!session || !tokens || n_tokens <= 0 || !logits) {
    set_error(error, "guild_eval: null session, tokens or logits, or no tokens");
    return GUILD_ERR_INVALID_ARGUMENT;
  }
  return guarded(error, [&]() -> guild_status {
    std::string err;
    guild::GenerateError kind = guild::GenerateError::None;
    if (!session->impl->eval(std::span<const int32_t>(tokens, static_cast<size_t>(n_tokens)), all_rows != 0, logits, &err,
                             &kind)) {
      set_error(error, err);
      return status_of(kind);
    }
    return GUILD_OK;
  }, GUILD_ERR_INTERNAL);
}

guild_sampling_params guild_sampling_params_default(void) {
  guild_sampling_params p{};
  p.struct_size = sizeof(guild_sampling_params);
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.repeat_penalty = 1.0f;
  p.repeat_last_n = 64;
  p.seed = 0;
  return p;
}

guild_generate_params guild_generate_params_default(void) {
  guild_generate_params p{};
  p.struct_size = sizeof(guild_generate_params);
  p.max_new_tokens = 256;
  p.sampling = guild_sampling_params_default();
  p.draft = GUILD_DRAFT_NONE;
  p.spec_max = 4;
  p.spec_min_p = 0.0f;
  p.spec_by_cost = 1;
  return p;
}

guild_status guild_generate(guild_session* session, const guild_generate_params* params,
                            guild_generate_result* result, char** error) {
  if (error) *error = nullptr;
  if (!session || !params || !params->prompt || params->n_prompt <= 0 || params->max_new_tokens < 0) {
    set_error(error, "guild_generate: null session/params, empty prompt or negative max_new_tokens");
    return GUILD_ERR_INVALID_ARGUMENT;
  }
  const guild_sampling_params& sp = params->sampling;
  if (!(sp.temperature >= 0.0f) || sp.top_k < 0 || !(sp.top_p > 0.0f && sp.top_p <= 1.0f) ||
      !(sp.min_p >= 0.0f && sp.min_p <= 1.0f) || !(sp.repeat_penalty > 0.0f)) {
    set_error(error, "guild_generate: sampling parameter out of range");
    return GUILD_ERR_INVALID_ARGUMENT;
  }
  return guarded(error, [&]() -> guild_status {
    guild::GenerateRequest req;
    req.prompt = std::span<const int32_t>(params->prompt, static_cast<size_t>(params->n_prompt));
    req.max_new_tokens = params->max_new_tokens;
    req.sampling.temperature = sp.temperature;
    req.sampling.top_k = sp.top_k;
    req.sampling.top_p = sp.top_p;
    req.sampling.min_p = sp.min_p;
    req.sampling.repeat_penalty = sp.repeat_penalty;
    req.sampling.repeat_last_n = sp.repeat_last_n;
    req.sampling.seed = sp.seed;
    if (params->struct_size >= offsetof(guild_generate_params, on_queue) + sizeof(params->on_queue) &&
        params->on_queue) {
      auto cb = params->on_queue;
      void* user = params->user;
      req.on_queue = [cb, user](int position) { cb(position, user); };
    }
    if (params->struct_size >= offsetof(guild_generate_params, spec_min_p) + sizeof(params->spec_min_p)) {
      // Ranges are checked by the session (one place, one message).
      switch (params->draft) {
        case GUILD_DRAFT_NONE: req.speculative.mode = guild::DraftMode::None; break;
        case GUILD_DRAFT_AUTO: req.speculative.mode = guild::DraftMode::Auto; break;
        case GUILD_DRAFT_MTP: req.speculative.mode = guild::DraftMode::Mtp; break;
        default: set_error(error, "guild_generate: unknown draft mode"); return GUILD_ERR_INVALID_ARGUMENT;
      }
      req.speculative.max_window = params->spec_max;
      req.speculative.min_p = params->spec_min_p;
    }
    if (params->struct_size >= offsetof(guild_generate_params, spec_by_cost) + sizeof(params->spec_by_cost))
      req.speculative.by_cost = params->spec_by_cost != 0;
    if (params->on_token) {
      auto cb = params->on_token;
      void* user = params->user;
      req.on_token = [cb, user](int32_t tok, const std::string& piece) {
        return cb(tok, piece.data(), static_cast<int32_t>(piece.size()), user) == 0;
      };
    }
    guild::GenerateResult r = session->impl->generate(req);
    if (result) {
      result->stop_reason = static_cast<guild_stop_reason>(r.stop);
      result->n_prompt = r.n_prompt;
      result->n_reused = r.n_reused;
      result->n_generated = static_cast<int32_t>(r.tokens.size());
      result->prompt_ms = r.prompt_ms;
      result->decode_ms = r.decode_ms;
      result->ttft_ms = r.ttft_ms;
      if (result->struct_size >= sizeof(guild_generate_result)) {
        result->queue_ms = r.queue_ms;
        result->n_drafted = r.n_drafted;
        result->n_accepted = r.n_accepted;
        result->n_windows = r.n_windows;
        result->drafted_by_mtp = std::string(r.drafter) == "mtp" ? 1 : 0;
      }
    }
    if (r.stop == guild::StopReason::Error) {
      set_error(error, r.error);
      return status_of(r.error_kind);
    }
    return GUILD_OK;
  }, GUILD_ERR_INTERNAL);
}

void guild_session_cancel(guild_session* session) {
  if (session) session->impl->cancel();
}

int32_t guild_model_queue_length(const guild_model* model) {
  return model ? static_cast<int32_t>(model->impl->queue().size()) : -1;
}

int32_t guild_model_ready(const guild_model* model) { return model && model->impl->ready() ? 1 : 0; }

char* guild_leases_json(void) {
  return guarded(nullptr, [&]() -> char* {
    guild::json::Value arr = guild::json::Value::array();
    for (const auto& l : guild::LeaseRegistry::instance().all()) {
      guild::json::Value v = guild::json::Value::object();
      v.set("provider", l.provider);
      v.set("holder", l.holder);
      arr.push_back(std::move(v));
    }
    return dup_string(guild::json::serialize(arr));
  }, nullptr);
}

void guild_testing_inject_fault(guild_model* model) {
  if (model) model->impl->inject_fault_for_testing();
}

}  // extern "C"

/* ---- kernel packages ------------------------------------------------------ */

namespace {

guild_status to_status(guild::packages::PackageStatus st) {
  using guild::packages::PackageStatus;
  switch (st) {
    case PackageStatus::Ok: return GUILD_OK;
    case PackageStatus::NotFound: return GUILD_ERR_NOT_FOUND;
    case PackageStatus::InvalidArgument: return GUILD_ERR_INVALID_ARGUMENT;
    case PackageStatus::Busy: return GUILD_ERR_BUSY;
    case PackageStatus::Io: return GUILD_ERR_IO;
    case PackageStatus::Corrupt: return GUILD_ERR_FORMAT;
    case PackageStatus::Incompatible: return GUILD_ERR_UNSUPPORTED;
  }
  return GUILD_ERR_INTERNAL;
}

std::string package_dir_arg(const char* dir) {
  return guild::packages::PackageStore::resolve_dir(dir ? std::string(dir) : std::string());
}

template <typename Op>
guild_status package_op(char** error, Op&& op) {
  if (error) *error = nullptr;
  return guarded(error, [&]() -> guild_status {
    std::string err;
    const guild_status st = to_status(op(&err));
    if (st != GUILD_OK) set_error(error, err);
    return st;
  }, GUILD_ERR_INTERNAL);
}

}  // namespace

extern "C" {

char* guild_packages_default_dir(void) {
  return guarded(nullptr, [&]() -> char* { return dup_string(guild::packages::PackageStore::default_dir()); }, nullptr);
}

char* guild_packages_list_json(const char* dir) {
  return guarded(nullptr, [&]() -> char* {
    guild::packages::PackageStore store(package_dir_arg(dir));
    return dup_string(guild::json::serialize(store.list_json()));
  }, nullptr);
}

guild_status guild_package_enable(const char* dir, const char* name, char** error) {
  if (!name) { set_error(error, "package name is null"); return GUILD_ERR_INVALID_ARGUMENT; }
  return package_op(error, [&](std::string* e) { return guild::packages::PackageStore(package_dir_arg(dir)).enable(name, e); });
}

guild_status guild_package_disable(const char* dir, const char* name, char** error) {
  if (!name) { set_error(error, "package name is null"); return GUILD_ERR_INVALID_ARGUMENT; }
  return package_op(error, [&](std::string* e) { return guild::packages::PackageStore(package_dir_arg(dir)).disable(name, e); });
}

guild_status guild_package_install(const char* dir, const char* archive_file, char** installed_name, char** error) {
  if (installed_name) *installed_name = nullptr;
  if (!archive_file) { set_error(error, "archive path is null"); return GUILD_ERR_INVALID_ARGUMENT; }
  std::string name;
  const guild_status st = package_op(error, [&](std::string* e) {
    return guild::packages::PackageStore(package_dir_arg(dir)).install(archive_file, e, &name);
  });
  if (st == GUILD_OK && installed_name) *installed_name = dup_string(name);
  return st;
}

guild_status guild_package_uninstall(const char* dir, const char* name, char** error) {
  if (!name) { set_error(error, "package name is null"); return GUILD_ERR_INVALID_ARGUMENT; }
  return package_op(error, [&](std::string* e) { return guild::packages::PackageStore(package_dir_arg(dir)).uninstall(name, e); });
}

guild_status guild_package_pin(const char* dir, const char* model, const char* name, const char* version, char** error) {
  if (!model || !name) { set_error(error, "model or package name is null"); return GUILD_ERR_INVALID_ARGUMENT; }
  return package_op(error, [&](std::string* e) {
    return guild::packages::PackageStore(package_dir_arg(dir)).pin(model, name, version ? version : "", e);
  });
}

guild_status guild_packages_reset_state(const char* dir, char** moved_to, char** error) {
  if (moved_to) *moved_to = nullptr;
  std::string aside;
  const guild_status st = package_op(error, [&](std::string* e) {
    return guild::packages::PackageStore(package_dir_arg(dir)).reset_state(&aside, e);
  });
  if (st == GUILD_OK && moved_to && !aside.empty()) *moved_to = dup_string(aside);
  return st;
}

guild_status guild_package_pack(const char* package_dir, const char* out_file, char** error) {
  if (error) *error = nullptr;
  if (!package_dir || !out_file) { set_error(error, "package directory or output file is null"); return GUILD_ERR_INVALID_ARGUMENT; }
  return guarded(error, [&]() -> guild_status {
    std::string err;
    if (guild::packages::pack_package_dir(package_dir, out_file, &err)) return GUILD_OK;
    set_error(error, err);
    return GUILD_ERR_IO;
  }, GUILD_ERR_INTERNAL);
}

}  // extern "C"
