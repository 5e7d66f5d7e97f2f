/* Guild C ABI. Nothing throws across it: every call reports failure through
 * its return value plus a message. Strings returned by the library are
 * NUL-terminated UTF-8 owned by the caller and freed with guild_string_free.
 * All structs start with struct_size so they can grow without breaking callers;
 * use the *_default() initialisers. See docs/C_ABI.md. */
#ifndef GUILD_GUILD_H
#define GUILD_GUILD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define GUILD_API __declspec(dllexport)
#else
#define GUILD_API __attribute__((visibility("default")))
#endif

#define GUILD_ABI_VERSION 1

typedef enum guild_status {
  GUILD_OK = 0,
  GUILD_ERR_INVALID_ARGUMENT = 1, /* a null handle, a bad size or option */
  GUILD_ERR_IO = 2,               /* a file could not be opened or read */
  GUILD_ERR_FORMAT = 3,           /* the file is not a valid/supported model */
  GUILD_ERR_UNSUPPORTED = 4,      /* valid file, but an architecture or type Guild lacks */
  GUILD_ERR_OUT_OF_MEMORY = 5,
  GUILD_ERR_CONTEXT_FULL = 6,     /* the tokens do not fit the session's context */
  GUILD_ERR_CANCELLED = 7,
  GUILD_ERR_NOT_READY = 8,        /* fail-closed readiness: the model is not valid */
  GUILD_ERR_INTERNAL = 9,
  GUILD_ERR_QUEUE_FULL = 10,      /* too many generations are already waiting */
  GUILD_ERR_DEVICE = 11,          /* a device failed mid-generation; the model is no longer ready */
  GUILD_ERR_BUSY = 12,            /* a kernel package is leased by a loaded model or live session */
  GUILD_ERR_NOT_FOUND = 13,       /* no such kernel package */
} guild_status;

typedef struct guild_model guild_model;
typedef struct guild_session guild_session;

GUILD_API int32_t guild_abi_version(void);
GUILD_API void guild_string_free(char* s);
GUILD_API const char* guild_status_name(guild_status s);

/* ---- model ---------------------------------------------------------------- */

typedef struct guild_load_params {
  uint32_t struct_size;
  int32_t n_threads;        /* CPU worker threads; 0 = all physical cores */
  int32_t n_ctx;            /* default context of sessions; 0 = min(model's, 4096) */
  const char* kv_type;      /* "f16" (default) or "f32" */
  /* Progress: called on the loading thread; return nonzero to cancel the load. */
  int32_t (*progress)(const char* stage, double fraction, void* user);
  void* progress_user;
  /* The user's kernel packages directory (docs/PACKAGES.md); null or "" =
   * $GUILD_PACKAGES_DIR, else ~/.local/share/guild/packages. The bundled packages
   * are searched too; with no usable CPU package the load fails (UNSUPPORTED). */
  const char* packages_dir;
  /* GPU use (builds with CUDA; docs/CUDA.md): null or "" = $GUILD_GPU, else "auto";
   * "auto" = device 0 when usable, else the CPU; "cpu" = never; "cuda:N" = device N
   * (the load fails when it is unusable). */
  const char* gpu;
  /* Device memory the model may use, in bytes; <= 0 = free memory less 1 GiB. */
  double gpu_budget_bytes;
  /* Nonzero: every routed expert is computed by the CPU (dense weights and KV on the GPU). */
  int32_t experts_on_cpu;
  /* Peer GPUs of a hybrid model (docs/CUDA.md, "Several GPUs"): null or "" = none, else
   * "cuda:N" entries separated by commas ("cuda:1,cuda:2"); each holds an expert cache of
   * its own. Not with gpu = "cpu"; the primary device may not be named. */
  const char* gpu_peers;
  /* Device memory of each peer's expert cache, in bytes; <= 0 = its free memory less 1 GiB. */
  double gpu_peer_budget_bytes;
  /* Nonzero: open the file for its tokenizer only (a vocab-only GGUF, or any model without
   * reading its weights or kernel packages). The tokenizer functions and the getters work;
   * guild_session_create fails and guild_model_ready is 0. */
  int32_t vocab_only;
} guild_load_params;

GUILD_API guild_load_params guild_load_params_default(void);

/* Loads a model (a .gguf file or the first/any shard of a split model).
 * Returns null and sets *error (if error is non-null) on failure. */
GUILD_API guild_model* guild_model_load(const char* path, const guild_load_params* params,
                                        char** error);
GUILD_API void guild_model_free(guild_model* model);

/* Pre-flight check: would guild_model_load(path, params) succeed, and what
 * would it take? Runs the load stages that decide it with the load's own code
 * (device policy, kernel packages as a load picks them, container, runner,
 * execution state, every tensor as stages 9-10 bind it, the GPU budget,
 * session memory, tokenizer) and skips the rest: no worker pool, no lease, no
 * copy or upload, no weight page read. On GUILD_OK, *result_json (free with
 * guild_string_free; schema "guild.load-check/1", docs/C_ABI.md) holds the
 * verdict: {"ok", "status", "stage", "error", "estimate", "profile"}, where
 * "error" is the line the load would fail with, word for word, and "stage"
 * the stage that gives it. Any other status (a null path or result_json, a
 * malformed params field, with the load's message in *error) has no verdict.
 * params->progress is honoured; vocab_only is ignored. */
GUILD_API guild_status guild_model_check(const char* path, const guild_load_params* params, char** result_json,
                                         char** error);

/* JSON description of a loaded model (architecture, sizes, vocab, ...). */
GUILD_API char* guild_model_info_json(const guild_model* model);
/* The model's StartupProfile as JSON (schema "guild.startup-profile/1"). */
GUILD_API char* guild_model_profile_json(const guild_model* model);
/* JSON inspection of a model file without loading weights (guild inspect). */
GUILD_API char* guild_inspect_json(const char* path, char** error);

GUILD_API int32_t guild_model_n_vocab(const guild_model* model);
GUILD_API int32_t guild_model_n_ctx_train(const guild_model* model);
GUILD_API int32_t guild_token_bos(const guild_model* model); /* -1 if none */
GUILD_API int32_t guild_token_eos(const guild_model* model); /* -1 if none */
GUILD_API int32_t guild_token_is_eog(const guild_model* model, int32_t token);
/* The model's chat template (tokenizer.chat_template), or null if absent. */
GUILD_API char* guild_model_chat_template(const guild_model* model);

/* ---- tokenizer ------------------------------------------------------------ */

/* Tokenizes text. Returns the number of tokens; if it exceeds capacity nothing
 * beyond capacity is written and the caller retries with a larger buffer.
 * Returns -1 on invalid arguments. add_special: BOS/EOS as the vocab says. */
GUILD_API int32_t guild_tokenize(const guild_model* model, const char* text, size_t text_len,
                                 int32_t add_special, int32_t parse_special, int32_t* tokens,
                                 int32_t capacity);
/* Writes the bytes of one token's piece (no NUL). Returns the byte count, or
 * the needed size if larger than capacity, or -1 for an invalid token. */
GUILD_API int32_t guild_token_to_piece(const guild_model* model, int32_t token, int32_t render_special,
                                       char* buf, int32_t capacity);
/* Detokenizes a sequence into newly allocated UTF-8 bytes (may be invalid UTF-8
 * when a multibyte character is split); *out_len receives its length. */
GUILD_API char* guild_detokenize(const guild_model* model, const int32_t* tokens, int32_t n_tokens,
                                 int32_t remove_special, int32_t unparse_special, size_t* out_len);

/* ---- sessions ------------------------------------------------------------- */

GUILD_API guild_session* guild_session_create(guild_model* model, int32_t n_ctx, char** error);
GUILD_API void guild_session_free(guild_session* session);
/* Clears the session's KV cache and history. */
GUILD_API void guild_session_reset(guild_session* session);

/* Appends tokens to the session (prefill) and writes logits: one row of
 * n_vocab floats per token if all_rows, else only the last row.
 * GUILD_ERR_IO when the model file changed on disk since the load (the model
 * is then not ready: reload it); GUILD_ERR_NOT_READY after that. */
GUILD_API guild_status guild_eval(guild_session* session, const int32_t* tokens, int32_t n_tokens,
                                  int32_t all_rows, float* logits, char** error);

typedef struct guild_sampling_params {
  uint32_t struct_size;
  float temperature;     /* 0 = greedy (ties go to the lowest id) */
  int32_t top_k;         /* 0 = off */
  float top_p;           /* 1 = off */
  float min_p;           /* 0 = off */
  float repeat_penalty;  /* 1 = off */
  int32_t repeat_last_n; /* window for repeat_penalty */
  uint64_t seed;
} guild_sampling_params;

GUILD_API guild_sampling_params guild_sampling_params_default(void);

typedef enum guild_stop_reason {
  GUILD_STOP_EOS = 0,
  GUILD_STOP_LENGTH = 1,
  GUILD_STOP_CONTEXT = 2,
  GUILD_STOP_CANCEL = 3,
  GUILD_STOP_ERROR = 4,
} guild_stop_reason;

/* Called for every generated token on the generating thread. Return nonzero to stop. */
typedef int32_t (*guild_token_callback)(int32_t token, const char* piece, int32_t piece_len,
                                        void* user);

/* Who drafts the speculative windows (seed §3; docs/SPECULATIVE.md). AUTO:
 * the model's MTP (nextn) block when it has one and the session decodes on
 * the CPU, else one token per window; MTP: the same, GUILD_ERR_INVALID_ARGUMENT
 * without one. Greedy output is identical either way; with sampling the
 * distribution is. */
typedef enum guild_draft_mode {
  GUILD_DRAFT_NONE = 0,
  GUILD_DRAFT_AUTO = 1,
  GUILD_DRAFT_MTP = 2,
} guild_draft_mode;

typedef struct guild_generate_params {
  uint32_t struct_size;
  const int32_t* prompt;
  int32_t n_prompt;
  int32_t max_new_tokens;
  guild_sampling_params sampling;
  guild_token_callback on_token;
  void* user;
  /* Called (on the waiting thread) with the number of requests ahead while this
   * one waits for the model; 0 when it starts. May be null. */
  void (*on_queue)(int32_t position, void* user);
  guild_draft_mode draft;  /* default GUILD_DRAFT_NONE */
  int32_t spec_max;        /* S: the last token + up to S-1 drafts per window, 1..16 (default 4) */
  float spec_min_p;        /* drafting stops at a draft whose probability is below this, 0..1 (default 0) */
  int32_t spec_by_cost;    /* 1 (default): also stop where the measured window costs say one more
                            * draft lowers the expected tokens per ms; 0: confidence only */
} guild_generate_params;

GUILD_API guild_generate_params guild_generate_params_default(void);

typedef struct guild_generate_result {
  uint32_t struct_size;
  guild_stop_reason stop_reason;
  int32_t n_prompt;          /* tokens prefilled (after prefix reuse) */
  int32_t n_reused;          /* prompt tokens served from the session's cache */
  int32_t n_generated;
  double prompt_ms;          /* prefill time */
  double decode_ms;          /* time from first to last generated token */
  double ttft_ms;            /* from call to first token */
  double queue_ms;           /* time spent waiting for the model */
  int32_t n_drafted;         /* speculative draft tokens proposed */
  int32_t n_accepted;        /* of which accepted */
  int32_t n_windows;         /* verifier passes of the decode (n_generated / n_windows tokens per pass) */
  int32_t drafted_by_mtp;    /* 1 when the model's MTP block drafted the windows */
} guild_generate_result;

/* Generates from the prompt. Blocks; call from a worker thread. GUILD_ERR_IO
 * when the model file changed on disk since the load (checked before the
 * request and after every pass; the model is then not ready). */
GUILD_API guild_status guild_generate(guild_session* session, const guild_generate_params* params,
                                      guild_generate_result* result, char** error);

/* Requests cancellation of the session's running or queued generation (or,
 * if none, of its next one). Thread-safe. */
GUILD_API void guild_session_cancel(guild_session* session);

/* Generation queue: requests running or waiting on this model. */
GUILD_API int32_t guild_model_queue_length(const guild_model* model);
/* Nonzero while the model is valid (fail-closed readiness). */
GUILD_API int32_t guild_model_ready(const guild_model* model);

/* Who pins which kernel provider: JSON [{"provider":…,"holder":…}, …]. */
GUILD_API char* guild_leases_json(void);

/* ---- kernel packages (docs/PACKAGES.md) ------------------------------------ */
/* dir: a packages directory; null or "" = the default ($GUILD_PACKAGES_DIR,
 * else $XDG_DATA_HOME/guild/packages, else ~/.local/share/guild/packages). */

/* The default packages directory. */
GUILD_API char* guild_packages_default_dir(void);
/* JSON (schema "guild.packages-list/1"): {dir, exists, bundled_dir,
 * state_error, leases_error, packages: [{name, version, enabled, compatible,
 * reason, pinned_by: [holder…], …}]}. state_error ({status: "corrupt"|"io",
 * message} or null): the state file cannot be read, so every package reads
 * as disabled and state changes fail until it is fixed or reset;
 * leases_error (string or null): the lease records cannot be read. */
GUILD_API char* guild_packages_list_json(const char* dir);
GUILD_API guild_status guild_package_enable(const char* dir, const char* name, char** error);
/* Fails with GUILD_ERR_BUSY, naming the holders, while a model or session leases it. */
GUILD_API guild_status guild_package_disable(const char* dir, const char* name, char** error);
/* Installs (or replaces) a package from a .gkpkg archive; *installed_name (if
 * non-null) receives its name. Checksums, the manifest, ABI and CPU
 * requirements and the library's ELF header are checked by reading files; its
 * provider ABI by guild-package-probe in a child process (the library never
 * runs in this process): UNSUPPORTED with one line when it crashes, exits,
 * hangs (10 s) or is not a provider; IO when the probe is missing. */
GUILD_API guild_status guild_package_install(const char* dir, const char* archive_file, char** installed_name,
                                             char** error);
GUILD_API guild_status guild_package_uninstall(const char* dir, const char* name, char** error);
/* Pins a model (file name) to a package version; version null or "" unpins. */
GUILD_API guild_status guild_package_pin(const char* dir, const char* model, const char* name, const char* version,
                                         char** error);
/* Packs a package directory (manifest + library) into a .gkpkg archive. */
GUILD_API guild_status guild_package_pack(const char* package_dir, const char* out_file, char** error);
/* Sets the state file (state.json) aside so the defaults apply (every package
 * enabled, no pins): the way out of a corrupt one. *moved_to (if non-null)
 * receives its new path, or null when there was no state file. */
GUILD_API guild_status guild_packages_reset_state(const char* dir, char** moved_to, char** error);

#ifdef __cplusplus
}
#endif
#endif /* GUILD_GUILD_H */
