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
// Free and total device memory (cudaMemGetInfo on that device).
bool device_memory(int device, size_t* free_bytes, size_t* total_bytes, std::string* why);

struct CudaDecoderOptions {
  int device = 0;
  int n_ctx = 4096;       // KV cache positions
  int max_tokens = 512;   // most tokens per forward call (prefill batch)
  bool use_graphs = true; // capture and replay single-token steps
};

// Device bytes, by owner.
struct CudaDecoderMemory {
  size_t weights = 0;
  size_t kv_cache = 0;
  size_t scratch = 0;
  size_t total() const { return weights + kv_cache + scratch; }
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
