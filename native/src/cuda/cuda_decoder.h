// The standard decoder (qwen3moe, llama with or without experts) on one GPU,
// everything resident: CudaDecoder copies a model's weights to device memory
// as they are (GGUF blocks, rows padded to 16 bytes, one pass), owns an fp16
// KV cache and all scratch, and runs forward() with decoder_forward's
// semantics. Everything is allocated in create(); a forward pass allocates
// nothing and synchronizes once, at the end, to hand logits to the host.
// Single-token steps (decode) are captured once as a CUDA graph and replayed:
// the token id and position live in device memory, written by
// cudaMemcpyAsync before each replay. docs/CUDA.md describes the kernels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "models/hparams.h"
#include "models/weights.h"

namespace guild::cuda {

// True when a CUDA device with compute capability >= 8.0 is usable; else
// false with the reason (no driver, no device, too old).
bool cuda_available(std::string* why);

struct DeviceInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
};
bool device_info(int device, DeviceInfo* out, std::string* why);
// Every CUDA device and which ordered pairs (i, j) let device i read device
// j's memory directly (peer-to-peer; cudaDeviceCanAccessPeer).
struct DeviceTopology {
  std::vector<DeviceInfo> devices;
  std::vector<std::vector<bool>> peer;  // [i][j], false on the diagonal
};
bool device_topology(DeviceTopology* out, std::string* why);
// Free and total device memory (cudaMemGetInfo on that device).
bool device_memory(int device, size_t* free_bytes, size_t* total_bytes, std::string* why);

// The CPU half of a hybrid MoE layer (docs/CUDA.md, "Hybrid MoE"). run() is
// called from a CUDA host node on the decoder's side stream while the GPU
// computes the experts it caches; it must not call CUDA. For each token t it
// writes out[t][0..n_embd) = sum over choices j with slot_of[ids[t*k+j]] < 0 of
//   weights[t*k+j] * down_e(silu(gate_e . xn[t]) * (up_e . xn[t])),
// zeros where no choice of t is on the CPU. All pointers are pinned host memory
// owned by the decoder, valid for the call.
struct CpuExperts {
  void* ctx = nullptr;
  void (*run)(void* ctx, int layer, int n_tokens, const float* xn, const int32_t* ids, const float* weights,
              const int32_t* slot_of, float* out) = nullptr;
};

// Copies host bytes fast (the runtime spreads it over its thread pool); used
// to fill the pinned staging ring from the mapped model file.
struct HostCopy {
  void* ctx = nullptr;
  void (*copy)(void* ctx, void* dst, const void* src, size_t bytes) = nullptr;
};

struct CudaDecoderOptions {
  int device = 0;
  int n_ctx = 4096;       // KV cache positions
  int max_tokens = 512;   // most tokens per forward call (prefill batch)
  bool use_graphs = true; // capture and replay single-token steps
  // Hybrid expert placement. Empty: every expert of every MoE layer is
  // uploaded (all on the GPU). Otherwise one entry per layer: the number of
  // experts that layer's GPU expert cache holds (0: all its experts are
  // computed by the CPU; dense layers ignore it). The caches start empty;
  // set_layer_experts / set_cached_expert fill them. cpu must be set.
  std::vector<int> expert_cache_slots;
  CpuExperts cpu;
  // Hybrid prefill: steps of at least stream_min_tokens tokens copy each MoE
  // layer's uncached experts to a device staging area (one layer's stack) and
  // compute every expert on the GPU — for big batches copying is cheaper than
  // computing on the CPU. 0: never (the CPU computes its experts).
  bool stream_prefill = true;
  int stream_min_tokens = 32;
  // Streamed copies go through a pinned ring of this many bytes (4 slots),
  // filled by host_copy, then DMA on a copy stream; 0 or no host_copy: the
  // driver's pageable path (bounce buffers, ~3 GB/s measured).
  size_t staging_ring_bytes = size_t{256} << 20;
  HostCopy host_copy;
};

// Device bytes, by owner.
struct CudaDecoderMemory {
  size_t weights = 0;       // dense weights (and, without a cache, all experts)
  size_t expert_cache = 0;  // hybrid: the GPU expert caches
  size_t staging = 0;       // hybrid: one layer's expert stack, for streamed prefill
  size_t kv_cache = 0;
  size_t scratch = 0;
  size_t total() const { return weights + expert_cache + staging + kv_cache + scratch; }
};

class CudaDecoder {
 public:
  // Fails (null + *error) when the device is unusable, the model uses a type,
  // head size or gating the kernels do not support, or memory runs out.
  static std::unique_ptr<CudaDecoder> create(const ModelHparams& hp, const ModelWeights& w,
                                             const CudaDecoderOptions& options, std::string* error);
  // What create() would allocate, without touching the device.
  static bool estimate(const ModelHparams& hp, const ModelWeights& w, const CudaDecoderOptions& options,
                       CudaDecoderMemory* out, std::string* error);
  ~CudaDecoder();
  CudaDecoder(const CudaDecoder&) = delete;
  CudaDecoder& operator=(const CudaDecoder&) = delete;

  // Runs tokens[0..n) at positions pos0.. (1 <= n <= max_tokens, pos0 + n <= n_ctx,
  // ids < n_vocab) like decoder_forward: the KV cache rows pos0.. are (re)written,
  // earlier rows are read. Writes logits of all n rows (all_rows) or only the
  // last one to logits_out (host, may be null), and the argmax of each written
  // row to argmax_out (host, may be null). False with *error on bad arguments
  // or a device error (the decoder should then be treated as failed).
  bool forward(const int32_t* tokens, int n, int pos0, float* logits_out, bool all_rows, std::string* error,
               int32_t* argmax_out = nullptr);

  // ---- hybrid expert placement (only with options.expert_cache_slots) ----
  bool hybrid() const;
  int cache_slots(int layer) const;
  // Expert held by a cache slot (-1: empty); slot of an expert (-1: the CPU computes it).
  int cached_expert(int layer, int slot) const;
  int slot_of(int layer, int expert) const;
  // Copies expert `expert`'s gate/up/down rows into `slot` (expert -1 empties it);
  // the expert previously there goes back to the CPU. Between forward calls only.
  bool set_cached_expert(int layer, int slot, int expert, std::string* error);
  // Makes the layer's cache hold exactly `experts` (at most cache_slots(layer)),
  // keeping experts already resident in their slots (no copy for them).
  bool set_layer_experts(int layer, const std::vector<int>& experts, std::string* error);
  // Routing counts [n_layer][n_expert] since the last reset (hybrid mode: every
  // routed choice of every forward), and optionally reset them.
  bool routing_counts(std::vector<uint32_t>* out, bool reset, std::string* error);
  // Steps of at least this many tokens stream the uncached experts (0: never).
  void set_stream_min_tokens(int n);
  int stream_min_tokens() const;
  // Stages layer `layer`'s whole expert stack once (as streamed prefill does)
  // and returns the time per uncached expert in µs (-1 when nothing to copy).
  double measure_stream_us_per_expert(int layer, std::string* error);
  // Page-locks the host memory of the experts (cudaHostRegister, read-only) so
  // streamed copies run at full DMA speed; false + *why when it fails (copies
  // then go through the driver's bounce buffers).
  bool pin_host_experts(size_t* bytes, std::string* why);
  // Bytes of one expert (gate + up + down, as cached) of a layer; 0 for dense layers.
  static size_t expert_cache_bytes(const ModelHparams& hp, const ModelWeights& w, int layer);

  void set_use_graphs(bool on);
  bool use_graphs() const;
  int graph_replays() const;      // single-token steps served by graph replay
  int n_ctx() const;
  int max_tokens() const;
  const CudaDecoderMemory& memory() const;
  cudaStream_t stream() const;

  struct Impl;

 private:
  explicit CudaDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace guild::cuda
