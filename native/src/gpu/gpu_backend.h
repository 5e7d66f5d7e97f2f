// The GPU backend as the runtime sees it (docs/CUDA.md, docs/PACKAGES.md "GPU
// packages"): a kernel package library (cuda) exports a BackendV1 table of
// device queries and a decoder factory; the decoder is used through the
// Decoder interface. No CUDA header is needed here, so the runtime is built
// without CUDA and finds the GPU, if any, as a package at run time.
//
// ABI: the package and the runtime are built from the same source tree (the
// types below are C++ and cross the library boundary as they are); any change
// to them bumps kBackendAbi, and a package with another number is refused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/hparams.h"
#include "models/recipe.h"
#include "models/weights.h"

namespace guild::gpu {

inline constexpr uint32_t kBackendAbi = 7;
inline constexpr const char* kBackendSymbol = "guild_gpu_backend_v1";

struct DeviceInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
};

// Every device and which ordered pairs (i, j) let device i read j's memory directly.
struct DeviceTopology {
  std::vector<DeviceInfo> devices;
  std::vector<std::vector<bool>> peer;  // [i][j], false on the diagonal
};

// The CPU half of a hybrid MoE layer (see cuda/cuda_decoder.h).
struct CpuExperts {
  void* ctx = nullptr;
  void (*run)(void* ctx, int layer, int n_tokens, const float* xn, const int32_t* ids, const float* weights,
              const int32_t* slot_of, float* out) = nullptr;
};

// Copies host bytes fast (the runtime spreads it over its thread pool); fills
// the pinned staging ring of streamed prefill from the mapped model file.
struct HostCopy {
  void* ctx = nullptr;
  void (*copy)(void* ctx, void* dst, const void* src, size_t bytes) = nullptr;
};

// A peer GPU of a hybrid decoder (docs/CUDA.md, "Several GPUs"): it holds an
// expert cache of its own and computes the choices routed to it, beside the
// primary's cache and the CPU pool.
struct PeerOptions {
  int device = 1;
  std::vector<int> expert_cache_slots;  // [n_layer] experts it caches per MoE layer
};

struct DecoderOptions {
  int device = 0;
  int n_ctx = 4096;
  int max_tokens = 512;
  bool use_graphs = true;
  // The kernels' A/B switches (core/tuning.h: cuda_fused, cuda_pdl, gemm_direct).
  bool fused = true;
  bool pdl = true;
  bool gemm_direct = true;
  std::vector<int> expert_cache_slots;  // hybrid: per-layer GPU expert cache size; empty = all resident
  // The layers' step parameters (ModelRecipe::executor_layers): biases,
  // sinks, windows, gating, the gated unit. Empty: the standard layer
  // (q/k norm as hp.qk_norm says, softmax top-k routing, SwiGLU).
  std::vector<ExecutorLayer> layers;
  // A sliding-window layer's KV is a ring of sliding_kv_rows(window, n_ctx,
  // max_tokens, sliding_history) rows (models/recipe.h): positions up to this
  // many before the last one written stay resumable (Decoder::resume_point).
  int sliding_history = 2048;
  // The MTP ("nextn") block ModelWeights::nextn[0] on the device beside the
  // trunk, its steps nextn_layer (ModelRecipe::executor_nextn): its weights
  // and experts all resident, its own KV, and the trunk's h rows kept for it
  // (Decoder::nextn_*). Off: no drafter on the GPU.
  bool nextn = false;
  ExecutorLayer nextn_layer;
  CpuExperts cpu;
  bool stream_prefill = true;
  int stream_min_tokens = 32;
  // Streamed copies go through a pinned ring of this many bytes (4 slots),
  // filled by host_copy, then DMA on a copy stream; 0 or no host_copy: the
  // driver's pageable path (bounce buffers, ~3 GB/s measured).
  size_t staging_ring_bytes = size_t{256} << 20;
  HostCopy host_copy;
  std::vector<PeerOptions> peers;  // hybrid only
  // Test stand-in for a machine with one GPU: a peer on the primary's own
  // device (its own stream and memory) runs every multi-GPU code path.
  bool peer_on_same_device_stand_in = false;
};

struct DecoderMemory {
  size_t weights = 0;
  size_t expert_cache = 0;
  size_t staging = 0;
  size_t kv_cache = 0;
  size_t scratch = 0;
  size_t peers = 0;  // on the peer devices (expert caches + their buffers); not in total()
  size_t total() const { return weights + expert_cache + staging + kv_cache + scratch; }
};

// A model's decoder on one device (the CUDA package's CudaDecoder). One call
// per forward pass: nothing here runs per layer.
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual bool forward(const int32_t* tokens, int n, int pos0, float* logits_out, bool all_rows, std::string* error,
                       int32_t* argmax_out = nullptr) = 0;
  // The longest prefix of the positions written so far that a forward may
  // continue from: n_reuse, or 0 when a sliding-window layer's ring no longer
  // holds the rows its first query would attend to (run again from the start).
  virtual int resume_point(int n_reuse) const = 0;
  virtual bool hybrid() const = 0;
  virtual int cache_slots(int layer) const = 0;
  virtual int cached_expert(int layer, int slot) const = 0;
  virtual int slot_of(int layer, int expert) const = 0;
  virtual bool set_cached_expert(int layer, int slot, int expert, std::string* error) = 0;
  virtual bool set_layer_experts(int layer, const std::vector<int>& experts, std::string* error) = 0;
  virtual bool routing_counts(std::vector<uint32_t>* out, bool reset, std::string* error) = 0;
  virtual void set_stream_min_tokens(int n) = 0;
  virtual int stream_min_tokens() const = 0;
  // Stages layer `layer`'s uncached experts once (as streamed prefill does);
  // the time per uncached expert in µs (-1 when nothing to copy).
  virtual double measure_stream_us_per_expert(int layer, std::string* error) = 0;
  // One token's share of MoE layer `layer` on one device, in µs (CUDA events,
  // mean of 20 after a warm-up; hybrid only): who 0, the primary computing k
  // of its cached experts; who -1, the primary computing k of the CPU's
  // experts reading them from page-locked host memory (see set_host_choices);
  // who 1 + p, peer p computing k of the experts it owns with the activations
  // sent over and its output brought back (the whole round trip), or with
  // copies_only just those two copies. -1 when that device holds no expert of
  // the layer. Between forward calls only.
  virtual double measure_token_experts_us(int who, int layer, bool copies_only, std::string* error) = 0;
  // Single-token steps: in every MoE layer whose experts are page-locked
  // (set_host_experts with pinned) the GPU takes up to n of the choices the
  // CPU would compute (the first ones in choice order) and computes them
  // reading those experts from host memory, beside the CPU's share. 0 turns
  // it off. Returns the number of MoE layers that will do it.
  virtual int set_host_choices(int n) = 0;
  // The host copies of a MoE layer's expert stacks moved (e.g. into pinned
  // memory from host_alloc: pinned = true lets streamed copies DMA straight
  // from them). Between forward calls only.
  virtual bool set_host_experts(int layer, const ExpertMatrices& gate, const ExpertMatrices& up,
                                const ExpertMatrices& down, bool pinned, std::string* error) = 0;
  // MoE layer passes that streamed their uncached experts to the GPU (prefill).
  virtual uint64_t streamed_layers() const = 0;
  // Peers (options.peers): their count, device, per-layer cache size; which
  // experts a peer caches (the primary's cache wins where both hold one);
  // who computes an expert: 0 the primary, 1 + p peer p, -1 the CPU.
  virtual int peer_count() const = 0;
  virtual int peer_device(int peer) const = 0;
  virtual int peer_cache_slots(int peer, int layer) const = 0;
  virtual bool set_peer_layer_experts(int peer, int layer, const std::vector<int>& experts, std::string* error) = 0;
  virtual int owner_of(int layer, int expert) const = 0;
  virtual void set_use_graphs(bool on) = 0;
  virtual bool use_graphs() const = 0;
  virtual int graph_replays() const = 0;
  // Single-token steps are captured per range of positions, each the first
  // time a step needs it; prepare_graphs captures those serving positions
  // [first, last] now (a bench's warm-up; no capture inside timed steps).
  virtual bool prepare_graphs(int first, int last, std::string* error) = 0;
  virtual int graph_captures() const = 0;  // single-token step graphs captured so far
  virtual int n_ctx() const = 0;
  virtual int max_tokens() const = 0;
  virtual const DecoderMemory& memory() const = 0;

  // The MTP block (DecoderOptions::nextn; runtime/mtp_drafter.h has the
  // protocol). The device keeps an h table of 1 + max_tokens rows: row 0
  // the held h, rows 1.. each forward's h rows (output_norm of every row's
  // final residual), and a step row (the block's output after
  // shared_head_norm of the last nextn_step).
  virtual bool has_nextn() const = 0;
  // The block over n rows at pos0..: row i is (tokens[i], h table row
  // h_row + i); only its KV is kept.
  virtual bool nextn_feed(const int32_t* tokens, int h_row, int n, int pos0, std::string* error) = 0;
  // h table row 0 = row `row` (row < 0: zeros).
  virtual bool nextn_hold(int row, std::string* error) = 0;
  // One draft row at pos: (token, h table row 0, or the step row when
  // from_step); the head's argmax (lowest id on ties) and its softmax
  // probability; the step row becomes the block's output.
  virtual bool nextn_step(int32_t token, bool from_step, int pos, int32_t* top1, float* p_top1, std::string* error) = 0;
};

// What a GPU package exports (kBackendSymbol returns a pointer to it).
struct BackendV1 {
  uint32_t struct_size = sizeof(BackendV1);
  uint32_t abi = kBackendAbi;
  const char* device_kind = "cuda";
  // A usable device (compute capability >= 8.0), else false with the reason.
  bool (*available)(std::string* why) = nullptr;
  bool (*device_info)(int device, DeviceInfo* out, std::string* why) = nullptr;
  bool (*topology)(DeviceTopology* out, std::string* why) = nullptr;
  bool (*device_memory)(int device, size_t* free_bytes, size_t* total_bytes, std::string* why) = nullptr;
  bool (*estimate)(const ModelHparams& hp, const ModelWeights& w, const DecoderOptions& o, DecoderMemory* out,
                   std::string* error) = nullptr;
  // Owned by the caller (delete through the interface's virtual destructor,
  // before the package library is closed).
  Decoder* (*create)(const ModelHparams& hp, const ModelWeights& w, const DecoderOptions& o, std::string* error) = nullptr;
  size_t (*expert_cache_bytes)(const ModelHparams& hp, const ModelWeights& w, int layer) = nullptr;
  // Page-locked host memory every device can DMA from (the RAM tier of the
  // experts); null + *why when it cannot be had. Freed with host_free.
  void* (*host_alloc)(size_t bytes, std::string* why) = nullptr;
  void (*host_free)(void* p) = nullptr;
};

using BackendQueryFn = const BackendV1* (*)();

}  // namespace guild::gpu
