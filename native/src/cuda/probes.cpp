// Measurements the placement plan is built from (runtime/gpu_execution):
// how long streaming one uncached expert takes, and how long a token's
// expert pass takes on the primary, from host memory, or on a peer. They run
// the decoder's own passes between forwards and report microseconds.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/cuda_error.h"
#include "cuda/decoder_impl.h"

namespace guild::cuda {

double CudaDecoder::measure_stream_us_per_expert(int layer, std::string* error) {
  Impl& I = *impl_;
  if (!I.staging_mem || layer < 0 || layer >= static_cast<int>(I.layers.size()) || !I.layers[layer].moe) return -1;
  const Impl::Layer& ly = I.layers[layer];
  int uncached = 0;
  for (int e = 0; e < I.hp.n_expert; ++e) uncached += ly.slot_of[e] < 0;
  if (uncached == 0) return -1;
  cudaError_t e = cudaSetDevice(I.opt.device);
  if (e == cudaSuccess) e = cudaStreamSynchronize(I.stream);
  const auto t0 = std::chrono::steady_clock::now();
  if (e == cudaSuccess && (!I.staging_free() || !I.stage_layer(ly) || !I.join_staged())) {
    *error = I.err;
    return -1;
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(I.stream);
  if (e != cudaSuccess) {
    *error = "CUDA decoder: " + cuda_msg("staging", e);
    cudaGetLastError();
    return -1;
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return us / uncached;
}

double CudaDecoder::measure_token_experts_us(int who, int layer, bool copies_only, std::string* error) {
  Impl& I = *impl_;
  if (!I.L.hybrid || layer < 0 || layer >= static_cast<int>(I.layers.size()) || !I.layers[layer].moe) return -1;
  const int kk = I.hp.n_expert_used;
  const Impl::Layer& ly = I.layers[layer];
  // k choices of experts this device holds per repetition, a different set
  // each time where it holds enough (a real token's experts are not in L2).
  constexpr int kReps = 20;
  const bool own_sets = who <= 0 && static_cast<size_t>(I.L.T) * I.L.K >= static_cast<size_t>(kReps + 1) * kk;
  const int sets = own_sets ? kReps + 1 : 1;
  std::vector<int32_t> ids(static_cast<size_t>(kk) * sets, -1);
  Impl::Peer* peer = nullptr;
  if (who == 0) {
    if (ly.cache_slots == 0) return -1;
    for (size_t j = 0; j < ids.size(); ++j) ids[j] = static_cast<int32_t>(j % ly.cache_slots);  // the primary's cache slots
  } else if (who == -1) {
    if (!ly.host_readable) return -1;
    std::vector<int32_t> cpu;  // experts the CPU computes, read from host memory instead
    for (int x = 0; x < I.hp.n_expert; ++x)
      if ((ly.owner_of.empty() ? ly.slot_of[x] : ly.owner_of[x]) < 0) cpu.push_back(x);
    if (cpu.empty()) return -1;
    for (size_t j = 0; j < ids.size(); ++j) ids[j] = cpu[j % cpu.size()];
  } else {
    if (who < 1 || who > static_cast<int>(I.peers.size())) return -1;
    peer = &I.peers[who - 1];
    std::vector<int32_t> owned;  // expert ids this peer computes (its route maps them to its slots)
    for (int32_t x : peer->layers[layer].cached)
      if (x >= 0 && !ly.owner_of.empty() && ly.owner_of[x] == I.hp.n_expert + who - 1) owned.push_back(x);
    if (owned.empty()) return -1;
    for (int j = 0; j < kk; ++j) ids[j] = owned[j % owned.size()];
  }
  const std::vector<float> wts(static_cast<size_t>(kk), 1.0f / static_cast<float>(kk));
  int32_t* d_ids = own_sets ? I.groups.ids : who == 0 ? I.d_cache_ids : who == -1 ? I.d_host_ids : I.groups.ids;
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  // A failure leaves the reason in *error (a CUDA call's, or the decoder's own).
  auto bad = [&](const char* what, cudaError_t e) {
    *error = "CUDA decoder: " + (e != cudaSuccess ? cuda_msg(what, e) : I.err);
    cudaGetLastError();
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    return -1.0;
  };
  cudaError_t e = cudaSetDevice(I.opt.device);
  if (e == cudaSuccess) e = cudaStreamSynchronize(I.stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(d_ids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, I.stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(I.groups.weights, wts.data(), wts.size() * 4, cudaMemcpyHostToDevice, I.stream);
  if (e == cudaSuccess) e = cudaEventCreate(&t0);
  if (e == cudaSuccess) e = cudaEventCreate(&t1);
  if (e != cudaSuccess) return bad("measure (setup)", e);
  const size_t row = static_cast<size_t>(I.hp.n_embd) * 4;
  int rep = 0;
  auto once = [&]() -> bool {
    Impl::Src xs{I.xn, 1, I.hp.n_embd};
    const int32_t* set = d_ids + static_cast<size_t>(kk) * (rep++ % sets);
    if (who == 0) return I.token_experts(Impl::Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, set, xs, I.main_work(), ly.math);
    if (who == -1) return I.token_experts(ly.host_view, set, xs, I.main_work(), ly.math);
    if (copies_only) {
      cudaError_t r = I.peer_copy(*peer, peer->xn, true, I.xn, row, I.stream);
      if (r == cudaSuccess) r = I.peer_copy(*peer, peer->out_primary, false, peer->out, row, I.stream);
      return r == cudaSuccess || I.fail("peer copies", r);
    }
    if (!I.peer_launch(*peer, layer, xs, 1)) return false;
    const cudaError_t r = cudaStreamWaitEvent(I.stream, peer->ev_out, 0);
    return r == cudaSuccess || I.fail("peer join", r);
  };
  if (!once()) return bad("measure", cudaSuccess);  // warm-up
  // The fastest of a few trials: another process on the device (or the host
  // thread descheduled between launches) only ever adds time, and one such
  // stall inside a single trial would make the placement plan follow it.
  constexpr int kTrials = 5;
  float best_ms = -1.0f;
  for (int trial = 0; trial < kTrials; ++trial) {
    if ((e = cudaEventRecord(t0, I.stream)) != cudaSuccess) return bad("cudaEventRecord", e);
    for (int r = 0; r < kReps; ++r)
      if (!once()) return bad("measure", cudaSuccess);
    float ms = 0;
    if ((e = cudaEventRecord(t1, I.stream)) != cudaSuccess || (e = cudaEventSynchronize(t1)) != cudaSuccess ||
        (e = cudaEventElapsedTime(&ms, t0, t1)) != cudaSuccess)
      return bad("measure (time)", e);
    if (best_ms < 0 || ms < best_ms) best_ms = ms;
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return static_cast<double>(best_ms) * 1e3 / kReps;
}

}  // namespace guild::cuda
