// Peers (docs/CUDA.md, "Several GPUs"): other GPUs that hold expert caches
// only. create_peers allocates each one's caches, buffers, stream and events;
// peer_launch runs its share of a MoE layer beside the primary (ordered by
// events, so it is captured in decode graphs); set_peer_layer_experts fills
// its caches. The public peer accessors too.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/cuda_error.h"
#include "cuda/cuda_kernels.h"
#include "cuda/decoder_impl.h"
#include "cuda/weight_layout.h"

namespace guild::cuda {

// A peer's share of a MoE layer: the choices of the experts it computes
// (remapped to its slots on the primary), the normed rows and the weights
// go over; it groups and computes them, sums them per token into a partial
// output (zero where it has no choice) and sends that back. Ordered with
// the primary stream by events, so it is captured in the decode graph.
bool CudaDecoder::Impl::peer_launch(Peer& p, int layer, const Src& xs, int n) {
  const PeerLayer& pl = p.layers[layer];
  const int kk = hp.n_expert_used;
  const int n_slots = n * kk;
  cudaError_t e = moe_remap_ids(groups.ids, n_slots, pl.d_route, p.d_ids, nullptr, stream);
  if (e == cudaSuccess) e = cudaEventRecord(p.ev_in, stream);
  if (e != cudaSuccess) return fail("peer MoE (fork)", e);
  if (!p.same_device && (e = cudaSetDevice(p.device)) != cudaSuccess) return fail("cudaSetDevice (peer)", e);
  auto run = [&]() -> bool {
    cudaError_t r = cudaStreamWaitEvent(p.stream, p.ev_in, 0);
    if (r == cudaSuccess) r = peer_copy(p, p.xn, true, xs.f32, static_cast<size_t>(n) * hp.n_embd * 4, p.stream);
    if (r == cudaSuccess) r = peer_copy(p, p.ids, true, p.d_ids, static_cast<size_t>(n_slots) * 4, p.stream);
    if (r == cudaSuccess) r = peer_copy(p, p.weights, true, groups.weights, static_cast<size_t>(n_slots) * 4, p.stream);
    if (r != cudaSuccess) return fail("peer MoE (inputs)", r);
    Src px{p.xn, n, hp.n_embd};
    const size_t out_bytes = static_cast<size_t>(n) * hp.n_embd * 4;
    if (n == 1) {  // decode: its choices straight from the remapped ids, summed into out
      if ((r = cudaMemsetAsync(p.out, 0, out_bytes, p.stream)) != cudaSuccess) return fail("peer MoE (clear)", r);
      if (!token_experts(pl.cache, p.ids, p.weights, px, p.work, p.out, ExpertMath{})) return false;
    } else {
      MoeGroups g = p.groups;
      g.ids = p.ids;
      g.weights = p.weights;
      if ((r = moe_group(g, n, kk, pl.slots, p.stream)) != cudaSuccess) return fail("moe_group (peer)", r);
      if (!gpu_experts(pl.cache, g, pl.slots, px, n, p.work, ExpertMath{})) return false;
      if ((r = cudaMemsetAsync(p.out, 0, out_bytes, p.stream)) == cudaSuccess)
        r = moe_combine_masked(p.work.ffn_down, p.weights, p.ids, n, kk, hp.n_embd, p.out, p.stream);
    }
    if (r == cudaSuccess) r = peer_copy(p, p.out_primary, false, p.out, out_bytes, p.stream);
    if (r == cudaSuccess) r = cudaEventRecord(p.ev_out, p.stream);
    return r == cudaSuccess || fail("peer MoE (output)", r);
  };
  const bool ok = run();
  if (!p.same_device && (e = cudaSetDevice(opt.device)) != cudaSuccess) return fail("cudaSetDevice (primary)", e);
  return ok;
}

// Allocates each peer's expert caches (empty), buffers, stream and events,
// and enables peer-to-peer access where the devices allow it.
bool CudaDecoder::Impl::create_peers(const ModelWeights& w, std::string* error) {
  auto bail = [&](const std::string& what, cudaError_t e) {
    *error = "CUDA decoder: " + cuda_msg(what.c_str(), e);
    cudaGetLastError();
    cudaSetDevice(opt.device);
    return false;
  };
  const size_t T = L.T, K = L.K;
  for (size_t pi = 0; pi < opt.peers.size(); ++pi) {
    const PeerOptions& po = opt.peers[pi];
    peers.emplace_back();
    Peer& p = peers.back();
    p.device = po.device;
    p.same_device = po.device == opt.device;
    const std::string who = "peer " + std::to_string(pi) + " (cuda:" + std::to_string(po.device) + ")";
    if (p.same_device && !opt.peer_on_same_device_stand_in) {
      *error = "CUDA decoder: " + who + " is the primary device";
      return false;
    }
    if (po.expert_cache_slots.size() != layers.size()) {
      *error = "CUDA decoder: " + who + ": expert_cache_slots needs one entry per layer";
      return false;
    }
    int n_dev = 0;
    cudaGetDeviceCount(&n_dev);
    if (po.device < 0 || po.device >= n_dev) {
      *error = "CUDA decoder: " + who + ": no such device (" + std::to_string(n_dev) + " found)";
      return false;
    }
    cudaError_t e = cudaSuccess;
    if (!p.same_device) {
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, opt.device, po.device) == cudaSuccess && can) {
        e = cudaDeviceEnablePeerAccess(po.device, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) e = cudaSuccess;
        cudaGetLastError();
      }
      if ((e = cudaSetDevice(po.device)) != cudaSuccess) return bail("cudaSetDevice (" + who + ")", e);
      if ((e = kernels_init(KernelSwitches{opt.pdl, opt.gemm_direct})) != cudaSuccess)
        return bail("kernels_init (" + who + ")", e);
      if (cudaDeviceCanAccessPeer(&can, po.device, opt.device) == cudaSuccess && can) {
        e = cudaDeviceEnablePeerAccess(opt.device, 0);
        cudaGetLastError();
      }
    }
    // Caches: the primary's row strides, slots per layer.
    size_t coff = 0;
    std::vector<std::array<size_t, 3>> offs(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      const int slots = po.expert_cache_slots[l];
      if (!layers[l].moe || slots <= 0) continue;
      if (slots > hp.n_expert) {
        *error = "CUDA decoder: " + who + ": layer " + std::to_string(l) + " cache of " + std::to_string(slots) + " experts";
        cudaSetDevice(opt.device);
        return false;
      }
      const Layout::Cache& c = L.caches[l];
      const LayerWeights& lw = w.layers[l];
      int i = 0;
      for (auto [stride, m] : {std::pair{c.gate_stride, &lw.gate_exps.first}, {c.up_stride, &lw.up_exps.first},
                               {c.down_stride, &lw.down_exps.first}}) {
        coff = align_up(coff, 256);
        offs[l][i++] = coff;
        coff += static_cast<size_t>(slots) * static_cast<size_t>(m->n_out) * stride;
      }
    }
    const size_t cache_bytes = align_up(coff, 256);
    if (cache_bytes > 0 && (e = cudaMalloc(reinterpret_cast<void**>(&p.cache_mem), cache_bytes)) != cudaSuccess)
      return bail("cudaMalloc (" + who + " expert cache)", e);
    // Work buffers on the peer (offsets first, then one allocation).
    Offsets wo;
    auto take = [&](size_t bytes) { return wo.take(bytes); };
    const size_t n_ff = static_cast<size_t>(hp.n_ff_exp), act_rows = static_cast<size_t>(L.act_rows);
    const size_t o_xn = take(T * hp.n_embd * 4), o_w = take(T * K * 4), o_out = take(T * hp.n_embd * 4),
                 o_ids = take(T * K * 4), o_off = take((hp.n_expert + 1) * 4), o_slots = take(T * K * 4),
                 o_active = take(hp.n_expert * 4), o_cnt = take(2 * 4), o_tiles = take(static_cast<size_t>(L.max_tiles) * 4),
                 o_gate = take(T * K * n_ff * 4), o_up = take(T * K * n_ff * 4), o_h = take(T * K * n_ff * 4),
                 o_down = take(T * K * hp.n_embd * 4), o_qs = take(act_rows * L.widest),
                 o_ds = take(act_rows * (L.widest / 32) * 4), o_f16 = take(act_rows * L.widest * 2);
    const size_t work_bytes = wo.total();
    if ((e = cudaMalloc(reinterpret_cast<void**>(&p.work_mem), work_bytes)) != cudaSuccess ||
        (e = cudaMemset(p.work_mem, 0, work_bytes)) != cudaSuccess)
      return bail("cudaMalloc (" + who + " buffers)", e);
    uint8_t* b = p.work_mem;
    p.xn = reinterpret_cast<float*>(b + o_xn);
    p.weights = reinterpret_cast<float*>(b + o_w);
    p.out = reinterpret_cast<float*>(b + o_out);
    p.ids = reinterpret_cast<int32_t*>(b + o_ids);
    p.groups.offsets = reinterpret_cast<int32_t*>(b + o_off);
    p.groups.slots = reinterpret_cast<int32_t*>(b + o_slots);
    p.groups.active = reinterpret_cast<int32_t*>(b + o_active);
    p.groups.counters = reinterpret_cast<int32_t*>(b + o_cnt);
    p.groups.tiles = reinterpret_cast<int32_t*>(b + o_tiles);
    p.groups.max_tiles = L.max_tiles;
    if ((e = cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking)) != cudaSuccess)
      return bail("cudaStreamCreate (" + who + ")", e);
    p.work.stream = p.stream;
    p.work.ffn_gate = reinterpret_cast<float*>(b + o_gate);
    p.work.ffn_up = reinterpret_cast<float*>(b + o_up);
    p.work.ffn_h = reinterpret_cast<float*>(b + o_h);
    p.work.ffn_down = reinterpret_cast<float*>(b + o_down);
    p.work.act_q8.qs = reinterpret_cast<int8_t*>(b + o_qs);
    p.work.act_q8.qs_stride = L.widest;
    p.work.act_q8.ds = reinterpret_cast<uint32_t*>(b + o_ds);
    p.work.act_q8.ds_stride = L.widest / 32;
    p.work.act_f16 = reinterpret_cast<uint16_t*>(b + o_f16);
    p.layers.resize(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      PeerLayer& pl = p.layers[l];
      const int slots = layers[l].moe ? std::max(0, po.expert_cache_slots[l]) : 0;
      pl.slots = slots;
      pl.slot_of.assign(hp.n_expert, -1);
      pl.cached.assign(slots, -1);
      if (slots == 0) continue;
      const Layout::Cache& c = L.caches[l];
      const LayerWeights& lw = w.layers[l];
      int i = 0;
      for (auto [dst, stride, m] : {std::tuple{&pl.cache.gate, c.gate_stride, &lw.gate_exps.first},
                                    {&pl.cache.up, c.up_stride, &lw.up_exps.first},
                                    {&pl.cache.down, c.down_stride, &lw.down_exps.first}}) {
        dst->data = p.cache_mem + offs[l][i++];
        dst->type = m->type;
        dst->n_in = m->n_in;
        dst->n_out = m->n_out;
        dst->row_stride = stride;
        dst->expert_stride = stride * static_cast<size_t>(m->n_out);
        dst->n_expert = slots;
      }
    }
    // ev_out is recorded on the peer's stream, so it belongs to the peer's
    // device (an event is recorded only on a stream of its own device; a
    // stream of another device may wait on it). ev_in belongs to the primary.
    if ((e = cudaEventCreateWithFlags(&p.ev_out, cudaEventDisableTiming)) != cudaSuccess)
      return bail("cudaEventCreate (" + who + ")", e);
    if (!p.same_device && (e = cudaSetDevice(opt.device)) != cudaSuccess) return bail("cudaSetDevice", e);
    if ((e = cudaEventCreateWithFlags(&p.ev_in, cudaEventDisableTiming)) != cudaSuccess) return bail("cudaEventCreate (peer)", e);
    // On the primary: remapped ids, the partial output, the route maps (every expert: not this peer's).
    const size_t maps = static_cast<size_t>(hp.n_layer) * hp.n_expert;
    Offsets ro;
    const size_t r_ids = ro.take(T * K * 4), r_out = ro.take(T * hp.n_embd * 4), r_maps = ro.take(maps * 4);
    if ((e = cudaMalloc(reinterpret_cast<void**>(&p.route_mem), ro.total())) != cudaSuccess ||
        (e = cudaMemset(p.route_mem, 0xff, ro.total())) != cudaSuccess)
      return bail("cudaMalloc (" + who + " routes)", e);
    p.d_ids = reinterpret_cast<int32_t*>(p.route_mem + r_ids);
    p.out_primary = reinterpret_cast<float*>(p.route_mem + r_out);
    for (size_t l = 0; l < layers.size(); ++l)
      p.layers[l].d_route = reinterpret_cast<int32_t*>(p.route_mem + r_maps) + l * hp.n_expert;
    mem.peers += cache_bytes + work_bytes;
    mem.scratch += ro.total();
  }
  return true;
}

int CudaDecoder::peer_count() const { return static_cast<int>(impl_->peers.size()); }
int CudaDecoder::peer_device(int peer) const {
  const Impl& I = *impl_;
  return peer >= 0 && peer < static_cast<int>(I.peers.size()) ? I.peers[peer].device : -1;
}
int CudaDecoder::peer_cache_slots(int peer, int layer) const {
  const Impl& I = *impl_;
  if (peer < 0 || peer >= static_cast<int>(I.peers.size()) || layer < 0 || layer >= static_cast<int>(I.layers.size())) return 0;
  return I.peers[peer].layers[layer].slots;
}

bool CudaDecoder::set_peer_layer_experts(int peer, int layer, const std::vector<int>& experts, std::string* error) {
  Impl& I = *impl_;
  if (peer < 0 || peer >= static_cast<int>(I.peers.size()) || layer < 0 || layer >= static_cast<int>(I.layers.size())) {
    *error = "CUDA decoder: no peer " + std::to_string(peer) + " / layer " + std::to_string(layer);
    return false;
  }
  Impl::Peer& p = I.peers[peer];
  Impl::PeerLayer& pl = p.layers[layer];
  const Impl::Layer& ly = I.layers[layer];
  std::vector<char> wanted;
  if (!wanted_experts(experts, I.hp.n_expert, pl.slots, "a peer cache", &wanted, error)) return false;
  // Keep what is resident; empty the slots of experts no longer wanted; fill free slots.
  for (int s = 0; s < pl.slots; ++s)
    if (pl.cached[s] >= 0 && !wanted[pl.cached[s]]) {
      pl.slot_of[pl.cached[s]] = -1;
      pl.cached[s] = -1;
    }
  cudaError_t e = cudaSuccess;
  if (!p.same_device) e = cudaSetDevice(p.device);
  int s = 0;
  for (int x : experts) {
    if (e != cudaSuccess) break;
    if (pl.slot_of[x] >= 0) continue;
    while (pl.cached[s] >= 0) ++s;
    for (auto [dst, src] : {std::pair{&pl.cache.gate, &ly.host_gate}, {&pl.cache.up, &ly.host_up}, {&pl.cache.down, &ly.host_down}}) {
      uint8_t* d = static_cast<uint8_t*>(const_cast<void*>(dst->data)) + static_cast<size_t>(s) * dst->expert_stride;
      const uint8_t* h = src->first.data + static_cast<size_t>(x) * src->expert_bytes;
      e = cudaMemcpy2DAsync(d, dst->row_stride, h, src->first.row_bytes, src->first.row_bytes,
                            static_cast<size_t>(src->first.n_out), cudaMemcpyHostToDevice, p.stream);
      if (e != cudaSuccess) break;
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(p.stream);
    if (e != cudaSuccess) break;  // the slot stays empty: its bytes may be partly written
    pl.cached[s] = x;
    pl.slot_of[x] = s;
  }
  const cudaError_t back = p.same_device ? cudaSuccess : cudaSetDevice(I.opt.device);
  if (e == cudaSuccess) e = back;
  // The routes follow the host maps whatever happened, so no choice is sent
  // to a slot that no longer holds its expert.
  const cudaError_t routed = I.refresh_owner(layer);
  if (e == cudaSuccess) e = routed;
  if (e != cudaSuccess) {
    *error = "CUDA decoder: " + cuda_msg("peer expert cache copy", e);
    cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace guild::cuda
