// The primary's expert caches (hybrid mode): which expert each slot holds
// and the maps built from that (slot_of and stage_of, the owner maps that
// tell the CPU, the peers and the remap kernels who computes each expert),
// the copies that fill a slot, and the routing counts the placement policy
// reads. Between forwards only.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_error.h"
#include "cuda/decoder_impl.h"
#include "cuda/weight_layout.h"

namespace guild::cuda {

// Recomputes a layer's owner map and each peer's route from the caches
// (the primary's cache wins where both hold an expert) and uploads them.
cudaError_t CudaDecoder::Impl::refresh_owner(int layer) {
  Layer& ly = layers[layer];
  if (ly.owner_of.empty()) return cudaSuccess;
  for (int x = 0; x < hp.n_expert; ++x) ly.owner_of[x] = ly.slot_of[x];
  std::vector<int32_t> route(static_cast<size_t>(hp.n_expert));
  cudaError_t e = cudaSuccess;
  for (size_t p = 0; p < peers.size() && e == cudaSuccess; ++p) {
    PeerLayer& pl = peers[p].layers[layer];
    if (pl.slots == 0) continue;
    for (int x = 0; x < hp.n_expert; ++x) {
      const bool mine = ly.slot_of[x] < 0 && pl.slot_of[x] >= 0 && ly.owner_of[x] < 0;
      route[x] = mine ? pl.slot_of[x] : -1;
      if (mine) ly.owner_of[x] = hp.n_expert + static_cast<int32_t>(p);
    }
    // On the decoder's stream, waited for before returning: the forward
    // streams do not wait for the legacy default stream.
    e = cudaMemcpyAsync(pl.d_route, route.data(), route.size() * 4, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  }
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(ly.d_owner_of, ly.owner_of.data(), ly.owner_of.size() * 4, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  return e;
}

bool wanted_experts(const std::vector<int>& experts, int n_expert, int slots, const char* cache,
                    std::vector<char>* wanted, std::string* error) {
  if (static_cast<int>(experts.size()) > slots) {
    *error = "CUDA decoder: " + std::to_string(experts.size()) + " experts for " + cache + " of " + std::to_string(slots);
    return false;
  }
  wanted->assign(static_cast<size_t>(n_expert), 0);
  for (int e : experts) {
    if (e < 0 || e >= n_expert || (*wanted)[e]) {
      *error = "CUDA decoder: bad or repeated expert id " + std::to_string(e);
      return false;
    }
    (*wanted)[e] = 1;
  }
  return true;
}

int CudaDecoder::cache_slots(int layer) const {
  const Impl& I = *impl_;
  return layer >= 0 && layer < static_cast<int>(I.layers.size()) ? I.layers[layer].cache_slots : 0;
}
int CudaDecoder::cached_expert(int layer, int slot) const {
  const Impl& I = *impl_;
  if (layer < 0 || layer >= static_cast<int>(I.layers.size())) return -1;
  const auto& c = I.layers[layer].cached;
  return slot >= 0 && slot < static_cast<int>(c.size()) ? c[slot] : -1;
}
int CudaDecoder::slot_of(int layer, int expert) const {
  const Impl& I = *impl_;
  if (layer < 0 || layer >= static_cast<int>(I.layers.size())) return -1;
  const auto& m = I.layers[layer].slot_of;
  return expert >= 0 && expert < static_cast<int>(m.size()) ? m[expert] : -1;
}

int CudaDecoder::owner_of(int layer, int expert) const {
  const Impl& I = *impl_;
  if (layer < 0 || layer >= static_cast<int>(I.layers.size()) || expert < 0 || expert >= I.hp.n_expert) return -1;
  const Impl::Layer& ly = I.layers[layer];
  if (ly.owner_of.empty()) return ly.moe && !I.L.hybrid ? 0 : -1;
  const int o = ly.owner_of[expert];
  return o < 0 ? -1 : o < I.hp.n_expert ? 0 : 1 + (o - I.hp.n_expert);
}

size_t CudaDecoder::expert_cache_bytes(const ModelHparams& hp, const ModelWeights& w, int layer) {
  if (layer < 0 || layer >= static_cast<int>(w.layers.size()) || !w.layers[layer].is_moe()) return 0;
  const LayerWeights& lw = w.layers[layer];
  size_t b = 0;
  for (const ExpertMatrices* m : {&lw.gate_exps, &lw.up_exps, &lw.down_exps})
    b += align_up(m->first.row_bytes, 16) * static_cast<size_t>(m->first.n_out);
  return b;
}

bool CudaDecoder::set_cached_expert(int layer, int slot, int expert, std::string* error) {
  Impl& I = *impl_;
  if (!I.L.hybrid || layer < 0 || layer >= static_cast<int>(I.layers.size()) || !I.layers[layer].moe) {
    *error = "CUDA decoder: layer " + std::to_string(layer) + " has no expert cache";
    return false;
  }
  Impl::Layer& ly = I.layers[layer];
  if (slot < 0 || slot >= ly.cache_slots || expert < -1 || expert >= I.hp.n_expert) {
    *error = "CUDA decoder: bad cache slot " + std::to_string(slot) + " / expert " + std::to_string(expert);
    return false;
  }
  if (expert >= 0 && ly.slot_of[expert] == slot) return true;
  if (expert >= 0 && ly.slot_of[expert] >= 0) {
    *error = "CUDA decoder: expert " + std::to_string(expert) + " is already cached in layer " + std::to_string(layer);
    return false;
  }
  cudaError_t e = cudaSetDevice(I.opt.device);
  if (e == cudaSuccess && expert >= 0) {
    for (auto [dst, src] : {std::pair{&ly.gate_exps, &ly.host_gate}, {&ly.up_exps, &ly.host_up}, {&ly.down_exps, &ly.host_down}}) {
      uint8_t* d = static_cast<uint8_t*>(const_cast<void*>(dst->data)) + static_cast<size_t>(slot) * dst->expert_stride;
      const uint8_t* h = src->first.data + static_cast<size_t>(expert) * src->expert_bytes;
      e = cudaMemcpy2DAsync(d, dst->row_stride, h, src->first.row_bytes, src->first.row_bytes,
                            static_cast<size_t>(src->first.n_out), cudaMemcpyHostToDevice, I.stream);
      if (e != cudaSuccess) break;
    }
  }
  if (e == cudaSuccess) {
    const int old = ly.cached[slot];
    if (old >= 0) ly.slot_of[old] = -1;
    ly.cached[slot] = expert;
    if (expert >= 0) ly.slot_of[expert] = slot;
    ly.n_uncached = 0;
    for (int x = 0; x < I.hp.n_expert; ++x) ly.stage_of[x] = ly.slot_of[x] >= 0 ? -1 : ly.n_uncached++;
    // The host maps are read by the CPU runner and the staging copies; the device copies by the remap kernel.
    e = cudaMemcpyAsync(ly.d_slot_of, ly.slot_of.data(), ly.slot_of.size() * 4, cudaMemcpyHostToDevice, I.stream);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(ly.d_stage_of, ly.stage_of.data(), ly.stage_of.size() * 4, cudaMemcpyHostToDevice, I.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(I.stream);
    if (e == cudaSuccess) e = I.refresh_owner(layer);
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(I.stream);
  if (e != cudaSuccess) {
    *error = "CUDA decoder: " + cuda_msg("expert cache copy", e);
    cudaGetLastError();
    return false;
  }
  return true;
}

bool CudaDecoder::set_layer_experts(int layer, const std::vector<int>& experts, std::string* error) {
  Impl& I = *impl_;
  if (!I.L.hybrid || layer < 0 || layer >= static_cast<int>(I.layers.size()) || !I.layers[layer].moe) {
    *error = "CUDA decoder: layer " + std::to_string(layer) + " has no expert cache";
    return false;
  }
  Impl::Layer& ly = I.layers[layer];
  std::vector<char> wanted;
  if (!wanted_experts(experts, I.hp.n_expert, ly.cache_slots, "a cache", &wanted, error)) return false;
  // Free the slots of experts no longer wanted, then fill free slots.
  for (int s = 0; s < ly.cache_slots; ++s)
    if (ly.cached[s] >= 0 && !wanted[ly.cached[s]] && !set_cached_expert(layer, s, -1, error)) return false;
  int next_free = 0;
  for (int e : experts) {
    if (ly.slot_of[e] >= 0) continue;
    while (next_free < ly.cache_slots && ly.cached[next_free] >= 0) ++next_free;
    if (!set_cached_expert(layer, next_free, e, error)) return false;
  }
  return true;
}

bool CudaDecoder::routing_counts(std::vector<uint32_t>* out, bool reset, std::string* error) {
  Impl& I = *impl_;
  const size_t n = static_cast<size_t>(I.hp.n_layer) * std::max(0, I.hp.n_expert);
  out->assign(n, 0);
  if (!I.L.hybrid || n == 0) return true;
  cudaError_t e = cudaSetDevice(I.opt.device);
  if (e == cudaSuccess) e = cudaMemcpyAsync(out->data(), I.d_counts, n * 4, cudaMemcpyDeviceToHost, I.stream);
  if (e == cudaSuccess && reset) e = cudaMemsetAsync(I.d_counts, 0, n * 4, I.stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(I.stream);
  if (e != cudaSuccess) {
    *error = "CUDA decoder: " + cuda_msg("routing counts", e);
    cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace guild::cuda
