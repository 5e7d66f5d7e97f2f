// The standard decoder (qwen3moe, llama with or without experts) on one GPU,
// everything resident: CudaDecoder copies a model's weights to device memory
// as they are (GGUF blocks, rows padded to 16 bytes, one pass), owns an fp16
// KV cache and all scratch, and runs forward() with decoder_forward's
// semantics. Everything is allocated in create(); a forward pass allocates
// nothing and synchronizes once, at the end, to hand logits to the host.
// Single-token steps (decode) are captured as CUDA graphs, one per range of
// positions (decode attention's grid follows the range), and replayed: the
// token id and position live in device memory, written by cudaMemcpyAsync
// before each replay. docs/CUDA.md describes the kernels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "gpu/gpu_backend.h"
#include "models/hparams.h"
#include "models/weights.h"

namespace guild::cuda {

// The backend-neutral types of gpu/gpu_backend.h under their CUDA names.
using DeviceInfo = gpu::DeviceInfo;
using DeviceTopology = gpu::DeviceTopology;
using CpuExperts = gpu::CpuExperts;
using HostCopy = gpu::HostCopy;
using PeerOptions = gpu::PeerOptions;
using CudaDecoderOptions = gpu::DecoderOptions;
using CudaDecoderMemory = gpu::DecoderMemory;

// True when a CUDA device with compute capability >= 8.0 is usable; else
// false with the reason (no driver, no device, too old).
bool cuda_available(std::string* why);
bool device_info(int device, DeviceInfo* out, std::string* why);
bool device_topology(DeviceTopology* out, std::string* why);
// Free and total device memory (cudaMemGetInfo on that device).
bool device_memory(int device, size_t* free_bytes, size_t* total_bytes, std::string* why);

// The CUDA package's table (gpu::BackendV1) over the functions above and CudaDecoder.
const gpu::BackendV1* backend_v1();

class CudaDecoder final : public gpu::Decoder {
 public:
  // Fails (null + *error) when the device is unusable, the model uses a head
  // size or gating the kernels do not support, a type neither the kernels nor
  // the F16 upload fallback (a CPU dequantizer) handle, or memory runs out.
  // expert_cache_slots non-empty: hybrid (per-layer caches start empty; cpu must be set).
  static std::unique_ptr<CudaDecoder> create(const ModelHparams& hp, const ModelWeights& w,
                                             const CudaDecoderOptions& options, std::string* error);
  // create() with the weight tensors of the types in force_f16_types (bit t =
  // GGUF type id t) uploaded as F16 although they have kernels: the upload
  // fallback of types without a kernel (docs/CUDA.md), for tests. Not in the
  // backend table.
  static std::unique_ptr<CudaDecoder> create_with_f16_upload(const ModelHparams& hp, const ModelWeights& w,
                                                             const CudaDecoderOptions& options,
                                                             uint64_t force_f16_types, std::string* error);
  // Weight tensors that took the F16 upload fallback.
  int f16_upload_tensors() const;
  // What create() would allocate, without touching the device.
  static bool estimate(const ModelHparams& hp, const ModelWeights& w, const CudaDecoderOptions& options,
                       CudaDecoderMemory* out, std::string* error);
  // Bytes of one expert (gate + up + down, as cached) of a layer; 0 for dense layers.
  static size_t expert_cache_bytes(const ModelHparams& hp, const ModelWeights& w, int layer);
  ~CudaDecoder() override;
  CudaDecoder(const CudaDecoder&) = delete;
  CudaDecoder& operator=(const CudaDecoder&) = delete;

  // Runs tokens[0..n) at positions pos0.. (1 <= n <= max_tokens, pos0 + n <= n_ctx,
  // ids < n_vocab) like decoder_forward: the KV cache rows pos0.. are (re)written,
  // earlier rows are read. Writes logits of all n rows (all_rows) or only the
  // last one to logits_out (host, may be null), and the argmax of each written
  // row to argmax_out (host, may be null). False with *error on bad arguments
  // or a device error (the decoder should then be treated as failed).
  bool forward(const int32_t* tokens, int n, int pos0, float* logits_out, bool all_rows, std::string* error,
               int32_t* argmax_out = nullptr) override;
  int resume_point(int n_reuse) const override;

  // ---- hybrid expert placement (only with options.expert_cache_slots) ----
  bool hybrid() const override;
  int cache_slots(int layer) const override;
  // Expert held by a cache slot (-1: empty); slot of an expert (-1: the CPU computes it).
  int cached_expert(int layer, int slot) const override;
  int slot_of(int layer, int expert) const override;
  // Copies expert `expert`'s gate/up/down rows into `slot` (expert -1 empties it);
  // the expert previously there goes back to the CPU. Between forward calls only.
  bool set_cached_expert(int layer, int slot, int expert, std::string* error) override;
  // Makes the layer's cache hold exactly `experts` (at most cache_slots(layer)),
  // keeping experts already resident in their slots (no copy for them).
  bool set_layer_experts(int layer, const std::vector<int>& experts, std::string* error) override;
  // Routing counts [n_layer][n_expert] since the last reset (hybrid mode: every
  // routed choice of every forward), and optionally reset them.
  bool routing_counts(std::vector<uint32_t>* out, bool reset, std::string* error) override;
  // Steps of at least this many tokens stream the uncached experts (0: never).
  void set_stream_min_tokens(int n) override;
  int stream_min_tokens() const override;
  double measure_stream_us_per_expert(int layer, std::string* error) override;
  double measure_token_experts_us(int who, int layer, bool copies_only, std::string* error) override;
  int set_host_choices(int n) override;
  bool set_host_experts(int layer, const ExpertMatrices& gate, const ExpertMatrices& up, const ExpertMatrices& down,
                        bool pinned, std::string* error) override;
  uint64_t streamed_layers() const override;
  int peer_count() const override;
  int peer_device(int peer) const override;
  int peer_cache_slots(int peer, int layer) const override;
  bool set_peer_layer_experts(int peer, int layer, const std::vector<int>& experts, std::string* error) override;
  int owner_of(int layer, int expert) const override;

  void set_use_graphs(bool on) override;
  bool use_graphs() const override;
  int graph_replays() const override;  // single-token steps served by graph replay
  bool prepare_graphs(int first, int last, std::string* error) override;
  int graph_captures() const override;
  int n_ctx() const override;
  int max_tokens() const override;
  const CudaDecoderMemory& memory() const override;
  bool has_nextn() const override;
  bool nextn_feed(const int32_t* tokens, int h_row, int n, int pos0, std::string* error) override;
  bool nextn_hold(int row, std::string* error) override;
  bool nextn_step(int32_t token, bool from_step, int pos, int32_t* top1, float* p_top1, std::string* error) override;
  cudaStream_t stream() const;

  struct Impl;

 private:
  explicit CudaDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace guild::cuda
