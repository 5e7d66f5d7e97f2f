// The host expert stacks of a hybrid decoder: where the CPU's experts live
// (cache fills and streamed copies read them), and when they are page-locked
// and suit the kernels, a device view of them so that a decode step's GPU can
// compute some of the CPU's choices in place (set_host_choices).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "cuda/cuda_kernels.h"
#include "cuda/decoder_impl.h"

namespace guild::cuda {

bool CudaDecoder::set_host_experts(int layer, const ExpertMatrices& gate, const ExpertMatrices& up,
                                   const ExpertMatrices& down, bool pinned, std::string* error) {
  Impl& I = *impl_;
  if (layer < 0 || layer >= static_cast<int>(I.layers.size()) || !I.layers[layer].moe || !I.L.hybrid) {
    *error = "CUDA decoder: set_host_experts: layer " + std::to_string(layer) + " has no host experts";
    return false;
  }
  Impl::Layer& ly = I.layers[layer];
  // Same shapes and types: only where the bytes live may change.
  for (auto [a, b] : {std::pair{&ly.host_gate, &gate}, {&ly.host_up, &up}, {&ly.host_down, &down}}) {
    if (a->n_expert != b->n_expert || a->expert_bytes != b->expert_bytes || a->first.n_in != b->first.n_in ||
        a->first.n_out != b->first.n_out || a->first.row_bytes != b->first.row_bytes || a->first.type != b->first.type) {
      *error = "CUDA decoder: set_host_experts: layer " + std::to_string(layer) + ": the new stacks differ in shape";
      return false;
    }
  }
  ly.host_gate = gate;
  ly.host_up = up;
  ly.host_down = down;
  ly.host_pinned = pinned;
  I.drop_graph();  // a captured step may read the old stacks in place (host_choices)
  // Page-locked (mapped) stacks whose rows suit the matrix kernels (16-byte
  // aligned rows of a supported type) can be read by the GPU in place.
  ly.host_readable = false;
  if (pinned) {
    Impl::Experts v;
    bool ok = true;
    for (auto [dst, src] : {std::pair{&v.gate, &gate}, {&v.up, &up}, {&v.down, &down}}) {
      void* dev = nullptr;
      const QMatrix& m = src->first;
      ok = ok && matrix_type_supported(m.type) && m.row_bytes % 16 == 0 && src->expert_bytes % 16 == 0 &&
           cudaHostGetDevicePointer(&dev, const_cast<uint8_t*>(m.data), 0) == cudaSuccess &&
           reinterpret_cast<uintptr_t>(dev) % 16 == 0;
      cudaGetLastError();
      if (!ok) break;
      dst->data = dev;
      dst->type = m.type;
      dst->n_in = m.n_in;
      dst->n_out = m.n_out;
      dst->row_stride = m.row_bytes;
      dst->expert_stride = src->expert_bytes;
      dst->n_expert = static_cast<int>(src->n_expert);
    }
    if (ok) {
      ly.host_view = v;
      ly.host_readable = true;
    }
  }
  return true;
}

int CudaDecoder::set_host_choices(int n) {
  Impl& I = *impl_;
  // One warp splits a token's choices (hybrid_export): not for k > 32.
  const int want = I.hp.n_expert_used > 32 ? 0 : std::clamp(n, 0, I.hp.n_expert_used);
  int layers = 0;
  for (const Impl::Layer& ly : I.layers) layers += ly.moe && ly.host_readable;
  if (want != I.host_choices) {
    I.host_choices = want;
    I.drop_graph();  // the count is a kernel argument of the captured step
  }
  return want > 0 ? layers : 0;
}

}  // namespace guild::cuda
