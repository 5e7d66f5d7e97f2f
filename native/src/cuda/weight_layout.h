// The decoder's memory plan, shared by CudaDecoder::estimate() and create():
// plan() checks a model against what the kernels support and lays out the
// weight arena (each tensor once, rows padded to 16 bytes, tensors 256-byte
// aligned), the hybrid expert caches and staging area, the KV cache and the
// scratch sizes. It is separate from the decoder because sizing a model
// touches no device. Offsets and Arena pack buffers 256-byte aligned into one
// allocation (peer buffers, scratch). Internal to guild_cuda.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda/cuda_decoder.h"

namespace guild::cuda {

inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// One weight tensor to upload: rows of row_bytes from host, to rows of stride
// bytes. to_f16: a type without a CUDA kernel, dequantized on the host and
// uploaded as F16 rows of n_in halves (f16_fallback.h); dev_type is then F16.
struct Upload {
  const uint8_t* src = nullptr;
  int64_t rows = 0;          // total rows (all experts)
  size_t row_bytes = 0;      // host bytes per row
  size_t stride = 0;         // device row stride (multiple of 16)
  size_t offset = 0;         // in the weight arena
  uint32_t src_type = 0;     // GGUF type of the host rows (matrices)
  uint32_t dev_type = 0;     // type the kernels see
  int64_t n_in = 0;          // elements per row (matrices)
  bool to_f16 = false;
  size_t bytes() const { return static_cast<size_t>(rows) * stride; }
};

// Weight types uploaded as F16 even though they have kernels (bit t = GGUF
// type id t): tests of the fallback path for types without one.
struct UploadPolicy {
  uint64_t force_f16_types = 0;
  bool forced(uint32_t type) const { return type < 64 && ((force_f16_types >> type) & 1u); }
};

// Sizes shared by estimate() and create().
struct Layout {
  // scratch floats / bytes
  int T = 0, K = 1, n_ff_max = 0, q_dim = 0, kv_dim = 0, widest = 0, act_rows = 0, logits_rows = 0, max_tiles = 1;
  size_t ffn_floats = 0;  // each of the gate, up and hidden buffers: T*K expert rows, T dense or shared-expert rows
  size_t weight_bytes = 0, kv_bytes = 0, scratch_bytes = 0, cache_bytes = 0, staging_bytes = 0;
  std::vector<Upload> uploads;
  int f16_uploads = 0;  // tensors that take the F16 fallback
  // Hybrid: per layer, the GPU expert cache (offsets in the cache arena).
  struct Cache {
    int slots = 0;
    size_t gate_off = 0, up_off = 0, down_off = 0;
    size_t gate_stride = 0, up_stride = 0, down_stride = 0;  // row strides
  };
  std::vector<Cache> caches;
  // Per layer: KV rows (n_ctx, or a sliding-window layer's ring) and where its
  // K and V start in the KV allocation (elements).
  std::vector<int> kv_rows;
  std::vector<size_t> kv_offset;
  bool hybrid = false;
  std::unordered_map<const void*, size_t> index;  // host data -> uploads index
};

// Fills *out for the model and options (false + *error where the kernels
// cannot run it or the options do not fit it). A tensor whose type has no
// kernel (or is forced by the policy) is planned as an F16 copy where the CPU
// can dequantize it; hybrid expert stacks need a kernel for their own type
// (they are cached and streamed as stored).
bool plan(const ModelHparams& hp, const ModelWeights& w, const CudaDecoderOptions& o, Layout* out,
          std::string* error, const UploadPolicy& policy = {});

// Byte offsets of buffers packed 256-aligned, laid out before the one
// allocation that holds them.
struct Offsets {
  size_t used = 0;
  size_t take(size_t bytes) {
    used = align_up(used, 256);
    const size_t o = used;
    used += bytes;
    return o;
  }
  size_t total() const { return align_up(used, 256); }
};

struct Arena {
  uint8_t* base = nullptr;
  size_t used = 0;
  template <typename T>
  T* take(size_t count) {
    used = align_up(used, 256);
    T* p = reinterpret_cast<T*>(base + used);
    used += count * sizeof(T);
    return p;
  }
};

}  // namespace guild::cuda
