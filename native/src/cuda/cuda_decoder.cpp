#include "cuda/cuda_decoder.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "core/tensor_type.h"
#include "cuda/cuda_kernels.h"

namespace guild::cuda {
namespace {

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

std::string cuda_msg(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// One weight tensor to upload: rows of row_bytes from host, to rows of stride bytes.
struct Upload {
  const uint8_t* src = nullptr;
  int64_t rows = 0;          // total rows (all experts)
  size_t row_bytes = 0;
  size_t stride = 0;         // device row stride (multiple of 16)
  size_t offset = 0;         // in the weight arena
  size_t bytes() const { return static_cast<size_t>(rows) * stride; }
};

// Sizes shared by estimate() and create().
struct Layout {
  // scratch floats / bytes
  int T = 0, K = 1, n_ff_max = 0, q_dim = 0, kv_dim = 0, widest = 0, act_rows = 0, logits_rows = 0, max_tiles = 1;
  size_t weight_bytes = 0, kv_bytes = 0, scratch_bytes = 0, cache_bytes = 0, staging_bytes = 0;
  std::vector<Upload> uploads;
  // Hybrid: per layer, the GPU expert cache (offsets in the cache arena).
  struct Cache {
    int slots = 0;
    size_t gate_off = 0, up_off = 0, down_off = 0;
    size_t gate_stride = 0, up_stride = 0, down_stride = 0;  // row strides
  };
  std::vector<Cache> caches;
  bool hybrid = false;
  std::unordered_map<const void*, size_t> index;  // host data -> uploads index
};

bool plan_matrix(Layout& L, const QMatrix& m, int64_t n_expert, size_t expert_bytes, std::string* error,
                 const char* what) {
  if (!m.data) return true;
  if (L.index.count(m.data)) return true;
  if (!matrix_type_supported(m.type)) {
    *error = std::string("CUDA decoder: tensor type ") + std::string(tensor_type_name(m.type)) + " of " + what +
             " has no CUDA kernel";
    return false;
  }
  if (n_expert > 1 && expert_bytes != static_cast<size_t>(m.n_out) * m.row_bytes) {
    *error = std::string("CUDA decoder: expert stack ") + what + " is not contiguous";
    return false;
  }
  Upload u;
  u.src = m.data;
  u.rows = m.n_out * n_expert;
  u.row_bytes = m.row_bytes;
  u.stride = align_up(m.row_bytes, 16);
  L.index[m.data] = L.uploads.size();
  L.uploads.push_back(u);
  return true;
}

bool plan_vector(Layout& L, const float* v, int64_t n) {
  if (!v || L.index.count(v)) return true;
  Upload u;
  u.src = reinterpret_cast<const uint8_t*>(v);
  u.rows = 1;
  u.row_bytes = static_cast<size_t>(n) * 4;
  u.stride = align_up(u.row_bytes, 16);
  L.index[v] = L.uploads.size();
  L.uploads.push_back(u);
  return true;
}

bool plan(const ModelHparams& hp, const ModelWeights& w, const CudaDecoderOptions& o, Layout* out,
          std::string* error) {
  Layout& L = *out;
  L.hybrid = !o.expert_cache_slots.empty() && hp.n_expert > 0;
  if (hp.head_dim_k != hp.head_dim_v) { *error = "CUDA decoder: head_dim_k != head_dim_v is not supported"; return false; }
  if (!attention_head_dim_supported(hp.head_dim_k, false) || !attention_head_dim_supported(hp.head_dim_k, true)) {
    *error = "CUDA decoder: head size " + std::to_string(hp.head_dim_k) + " is not supported";
    return false;
  }
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0) { *error = "CUDA decoder: bad head counts"; return false; }
  if (hp.rope.n_rot > hp.head_dim_k || hp.rope.n_rot % 2 != 0) { *error = "CUDA decoder: bad rope dims"; return false; }
  if (hp.n_expert > 0 && (hp.n_expert > 512 || hp.n_expert_used > 32 || hp.n_expert_used < 1)) {
    *error = "CUDA decoder: expert counts beyond the kernels' limits (512 experts, 32 used)";
    return false;
  }
  if (hp.n_embd % 32 != 0) { *error = "CUDA decoder: n_embd must be a multiple of 32"; return false; }
  if (o.n_ctx < 1 || o.max_tokens < 1 || o.max_tokens > 65535) { *error = "CUDA decoder: bad n_ctx / max_tokens"; return false; }

  if (!plan_matrix(L, w.token_embd, 1, 0, error, "token_embd") || !plan_matrix(L, w.output, 1, 0, error, "output") ||
      !plan_vector(L, w.output_norm, hp.n_embd))
    return false;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    const std::string n = "blk." + std::to_string(l);
    if (!plan_vector(L, lw.attn_norm, hp.n_embd) || !plan_vector(L, lw.ffn_norm, hp.n_embd) ||
        !plan_vector(L, lw.q_norm, hp.head_dim_k) || !plan_vector(L, lw.k_norm, hp.head_dim_k))
      return false;
    for (auto [m, name] : {std::pair{&lw.wq, ".attn_q"}, {&lw.wk, ".attn_k"}, {&lw.wv, ".attn_v"},
                           {&lw.wo, ".attn_output"}, {&lw.router, ".ffn_gate_inp"}, {&lw.ffn_gate, ".ffn_gate"},
                           {&lw.ffn_up, ".ffn_up"}, {&lw.ffn_down, ".ffn_down"}})
      if (!plan_matrix(L, *m, 1, 0, error, (n + name).c_str())) return false;
    for (auto [e, name] : {std::pair{&lw.gate_exps, ".ffn_gate_exps"}, {&lw.up_exps, ".ffn_up_exps"},
                           {&lw.down_exps, ".ffn_down_exps"}}) {
      if (!L.hybrid) {
        if (!plan_matrix(L, e->first, e->n_expert, e->expert_bytes, error, (n + name).c_str())) return false;
      } else if (e->first.data && !matrix_type_supported(e->first.type)) {
        *error = std::string("CUDA decoder: tensor type ") + std::string(tensor_type_name(e->first.type)) + " of " +
                 n + name + " has no CUDA kernel";
        return false;
      } else if (e->first.data && e->expert_bytes != static_cast<size_t>(e->first.n_out) * e->first.row_bytes) {
        // Cache fills and staging copy whole runs of experts as rows.
        *error = "CUDA decoder: " + n + name + ": expert matrices are not stored back to back";
        return false;
      }
    }
    if (lw.is_moe() && (!lw.gate_exps.first.data || !lw.up_exps.first.data || !lw.down_exps.first.data)) {
      *error = "CUDA decoder: " + n + " has a router but its experts are not bound";
      return false;
    }
  }
  size_t off = 0;
  for (Upload& u : L.uploads) {
    off = align_up(off, 256);
    u.offset = off;
    off += u.bytes();
  }
  L.weight_bytes = align_up(off, 256);
  if (L.hybrid) {
    if (o.expert_cache_slots.size() != w.layers.size()) {
      *error = "CUDA decoder: expert_cache_slots needs one entry per layer";
      return false;
    }
    size_t coff = 0;
    L.caches.resize(w.layers.size());
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const LayerWeights& lw = w.layers[l];
      Layout::Cache& c = L.caches[l];
      const int slots = o.expert_cache_slots[l];
      if (!lw.is_moe()) continue;
      if (slots < 0 || slots > hp.n_expert) {
        *error = "CUDA decoder: layer " + std::to_string(l) + " cache of " + std::to_string(slots) + " experts (model has " +
                 std::to_string(hp.n_expert) + ")";
        return false;
      }
      c.slots = slots;
      c.gate_stride = align_up(lw.gate_exps.first.row_bytes, 16);
      c.up_stride = align_up(lw.up_exps.first.row_bytes, 16);
      c.down_stride = align_up(lw.down_exps.first.row_bytes, 16);
      for (auto [o_off, stride, m] : {std::tuple{&c.gate_off, c.gate_stride, &lw.gate_exps.first},
                                      {&c.up_off, c.up_stride, &lw.up_exps.first},
                                      {&c.down_off, c.down_stride, &lw.down_exps.first}}) {
        coff = align_up(coff, 256);
        *o_off = coff;
        coff += static_cast<size_t>(slots) * static_cast<size_t>(m->n_out) * stride;
      }
    }
    L.cache_bytes = align_up(coff, 256);
    if (o.stream_prefill) {
      for (size_t l = 0; l < w.layers.size(); ++l) {
        const Layout::Cache& c = L.caches[l];
        if (!w.layers[l].is_moe()) continue;
        size_t b = 0;
        for (auto [stride, m] : {std::pair{c.gate_stride, &w.layers[l].gate_exps.first},
                                 {c.up_stride, &w.layers[l].up_exps.first}, {c.down_stride, &w.layers[l].down_exps.first}})
          b = align_up(b, 256) + static_cast<size_t>(hp.n_expert) * static_cast<size_t>(m->n_out) * stride;
        L.staging_bytes = std::max(L.staging_bytes, align_up(b, 256));
      }
    }
  }

  L.T = o.max_tokens;
  L.K = std::max(1, hp.n_expert_used);
  L.n_ff_max = std::max(hp.n_ff, hp.n_ff_exp);
  L.q_dim = hp.n_head * hp.head_dim_k;
  L.kv_dim = hp.n_head_kv * hp.head_dim_k;
  L.widest = static_cast<int>(align_up(static_cast<size_t>(std::max({hp.n_embd, L.q_dim, L.n_ff_max})), 32));
  L.act_rows = L.T * L.K;
  L.logits_rows = std::min(L.T, 32);
  L.max_tiles = hp.n_expert > 0 ? moe_max_tiles(L.T, L.K, hp.n_expert) : 1;
  L.kv_bytes = static_cast<size_t>(hp.n_layer) * 2 * o.n_ctx * L.kv_dim * 2;

  const size_t T = L.T, K = L.K;
  size_t f = 0;  // floats
  f += 2 * T * hp.n_embd;                                 // x, xn
  f += T * L.q_dim + 2 * T * L.kv_dim + T * L.q_dim;      // q, k, v, attn
  f += T * std::max(1, hp.n_expert);                      // router logits
  const size_t ffn = std::max(T * K * hp.n_ff_exp, T * static_cast<size_t>(hp.n_ff));
  f += 3 * ffn;                                           // gate, up, h
  f += T * K * hp.n_embd;                                 // per-slot expert outputs
  f += static_cast<size_t>(L.logits_rows) * hp.n_vocab;   // logits
  f += T * std::max(2, hp.rope.n_rot);                    // rope cos/sin
  f += attention_decode_workspace_floats(hp.n_head, hp.head_dim_k, o.n_ctx);
  size_t bytes = f * 4 + 64 * 256;                        // + alignment slack
  bytes += static_cast<size_t>(L.act_rows) * L.widest;                 // q8 quants
  bytes += static_cast<size_t>(L.act_rows) * (L.widest / 32) * 4;      // q8 scales
  bytes += static_cast<size_t>(L.act_rows) * L.widest * 2;             // f16
  bytes += (2 * T + 2 + 3 * T * K + 2 * (hp.n_expert + 1) + L.max_tiles + 4) * 4;  // ints
  bytes += argmax_workspace_bytes(L.logits_rows) + 256;                              // argmax partials
  bytes += 256;                                                                      // routing counter
  if (L.hybrid)  // cache and staging ids, slot and staging maps, routing counts, pending / seq / error
    bytes += (2 * T * K + K + 3 * static_cast<size_t>(hp.n_layer) * hp.n_expert + 3) * 4 + 9 * 256;
  L.scratch_bytes = align_up(bytes, 256);
  return true;
}

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

// The experts a cache of `slots` is to hold, as a mask over n_expert; false
// + *error for more experts than slots or an out-of-range or repeated id.
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

}  // namespace

struct CudaDecoder::Impl {
  ModelHparams hp;
  CudaDecoderOptions opt;
  Layout L;
  CudaDecoderMemory mem;
  cudaStream_t stream = nullptr;
  uint8_t* weight_mem = nullptr;
  uint8_t* kv_mem = nullptr;
  uint8_t* scratch_mem = nullptr;

  struct Experts {
    DevMatrix gate, up, down;
  };
  // Where an expert computation runs and its buffers: the primary's, or a peer's.
  struct Work {
    cudaStream_t stream;
    float *ffn_gate, *ffn_up, *ffn_h, *ffn_down;
    Q8Act act_q8;
    uint16_t* act_f16;
  };
  struct Layer {
    const float* attn_norm = nullptr;
    const float* q_norm = nullptr;
    const float* k_norm = nullptr;
    const float* ffn_norm = nullptr;
    DevMatrix wq, wk, wv, wo, router, gate_exps, up_exps, down_exps, ffn_gate, ffn_up, ffn_down;
    bool moe = false;
    uint16_t* k_cache = nullptr;
    uint16_t* v_cache = nullptr;
    // Hybrid: the layer's GPU expert cache (gate/up/down_exps point into it,
    // n_expert = slots), the host expert stacks it is filled from, and the
    // expert -> slot map (-1: CPU) on both sides.
    int cache_slots = 0;
    bool cpu_part = false;  // some experts of this layer are computed by the CPU
    ExpertMatrices host_gate, host_up, host_down;
    bool host_pinned = false;  // host_* are page-locked: streamed copies DMA from them directly
    // The page-locked stacks as the device reads them (over PCIe), when their
    // rows suit the matrix kernels: decode's GPU share of the CPU's choices.
    Experts host_view;
    bool host_readable = false;
    Experts staged;  // the staging area viewed as this layer's full stacks
    int32_t* d_slot_of = nullptr;
    std::vector<int32_t> slot_of;  // [n_expert]
    // Streamed prefill: uncached expert e sits at staging index stage_of[e]
    // (uncached experts in increasing order, packed; -1 for cached ones).
    int32_t* d_stage_of = nullptr;
    std::vector<int32_t> stage_of;  // [n_expert]
    int n_uncached = 0;
    // Who computes each expert's choices, for the CPU's mask: >= 0 a GPU (the
    // primary's slot, or n_expert + peer for a peer's expert), -1 the CPU.
    std::vector<int32_t> owner_of;  // [n_expert]
    int32_t* d_owner_of = nullptr;
    std::vector<int32_t> cached;   // [cache_slots] expert per slot, -1 empty
  };
  std::vector<Layer> layers;

  // ---- peers (docs/CUDA.md, "Several GPUs") ----
  struct PeerLayer {
    Experts cache;                 // slots experts, on the peer
    int slots = 0;
    std::vector<int32_t> cached;   // [slots] expert per slot, -1 empty
    std::vector<int32_t> slot_of;  // [n_expert] the peer's slot, -1 none
    int32_t* d_route = nullptr;    // on the primary: [n_expert] the peer's slot where it computes the expert, else -1
  };
  struct Peer {
    int device = 0;
    bool same_device = false;      // the one-GPU stand-in
    cudaStream_t stream = nullptr;
    cudaEvent_t ev_in = nullptr, ev_out = nullptr;
    uint8_t* cache_mem = nullptr;  // on the peer
    uint8_t* work_mem = nullptr;   // on the peer
    uint8_t* route_mem = nullptr;  // on the primary: ids, partial output, route maps
    std::vector<PeerLayer> layers;
    // On the peer.
    float *xn = nullptr, *weights = nullptr, *out = nullptr;
    int32_t* ids = nullptr;
    MoeGroups groups;
    Work work{};
    // On the primary.
    int32_t* d_ids = nullptr;      // the step's choices remapped to this peer's slots
    float* out_primary = nullptr;  // its partial output, copied back
  };
  std::vector<Peer> peers;
  DevMatrix token_embd, output;
  const float* output_norm = nullptr;
  RopeConfig rope;

  float *x = nullptr, *xn = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *attn = nullptr;
  float *router_logits = nullptr, *ffn_gate = nullptr, *ffn_up = nullptr, *ffn_h = nullptr, *ffn_down = nullptr;
  float *logits = nullptr, *rope_cs = nullptr, *attn_work = nullptr;
  Q8Act act_q8;
  uint16_t* act_f16 = nullptr;
  int32_t *d_tokens = nullptr, *d_pos0 = nullptr, *d_argmax = nullptr;
  uint64_t* argmax_work = nullptr;  // argmax_rows' partials (zero between launches)
  uint32_t* route_counter = nullptr;  // moe_norm_route's finished blocks (zero between launches)
  // One-token steps use the fused launches: norm + router + top-k in one
  // (moe_norm_route), q/k norm + rope + K/V store inside decode attention
  // (attention_decode_post); prompts compute the experts' gate, up and
  // SwiGLU in one launch (moe_gemm_glu). GUILD_CUDA_FUSED=0 launches them
  // one by one, for measuring.
  bool fused = true;
  MoeGroups groups;
  int32_t* h_pinned = nullptr;  // [T tokens][1 pos0][T argmax]

  // Captured decode steps, one per range of positions: graph k serves
  // positions [decode_range_start(k), decode_range_end(k)) (ends 512 << k, the
  // last one n_ctx). The range's end sizes the attention grid, its start the
  // heads per block, so a short conversation in a large cache is not launched
  // as if the cache were full. Each is captured the first time it is needed.
  std::vector<cudaGraphExec_t> graph_execs;
  int decode_range = 0;  // the range of this forward's single-token step (decode attention's lengths)
  int replays = 0, captures = 0;
  std::string err;

  // ---- hybrid MoE ----
  uint8_t* cache_mem = nullptr;
  uint8_t* staging_mem = nullptr;     // one layer's whole expert stack (streamed prefill)
  int32_t* owner_mem = nullptr;       // [n_layer][n_expert] owner maps (primary)
  // Pinned staging ring: kRingSlots slots, each reusable once its DMA (on
  // copy_stream) has finished (slot_free events, blocking sync).
  static constexpr int kRingSlots = 4;
  uint8_t* ring = nullptr;
  size_t ring_slot_bytes = 0;
  int ring_next = 0;
  cudaStream_t copy_stream = nullptr;
  cudaEvent_t slot_free[kRingSlots] = {};
  cudaEvent_t ev_main_ready = nullptr;  // main -> copy stream: the staging area is free again
  cudaEvent_t ev_staged = nullptr;      // copy stream -> main: the layer's uncached experts are on the device
  int stream_min = 0;                 // steps of >= this many tokens stream (0: never)
  int host_choices = 0;               // one token: the GPU takes up to this many of the CPU's choices per layer
  int32_t* d_host_ids = nullptr;      // [K] those choices' experts (-1: not the GPU's)
  uint64_t streamed = 0;              // MoE layer passes that streamed
  cudaEvent_t ev_done = nullptr;      // end of a forward (blocking sync: the waiting thread sleeps)
  int32_t* d_cache_ids = nullptr;     // [T*K] slot of each routed choice in its layer's cache, -1 CPU
  int32_t* d_stage_ids = nullptr;     // [T*K] streamed prefill: staging index of each choice, -1 cached
  uint32_t* d_counts = nullptr;       // [n_layer][n_expert] routing counts
  int32_t* d_pending = nullptr;       // CPU choices of the layer in flight
  uint32_t* d_seq = nullptr;          // last mailbox request posted
  int32_t* d_error = nullptr;         // set when the CPU server did not answer in time
  // Host-mapped (pinned) memory shared with the CPU expert server.
  HybridMailbox* mailbox = nullptr;
  float* h_xn = nullptr;              // [T][n_embd]
  int32_t* h_ids = nullptr;           // [T*K]
  float* h_w = nullptr;               // [T*K]
  float* h_out = nullptr;             // [T][n_embd]
  float* h_logits = nullptr;          // pinned [logits_rows][n_vocab]: logits land here in hybrid mode
  // Device views of the same memory.
  HybridMailbox* dv_mailbox = nullptr;
  float *dv_xn = nullptr, *dv_w = nullptr, *dv_out = nullptr;
  int32_t* dv_ids = nullptr;
  // The CPU expert server: spins on the mailbox while a forward is in flight
  // (on the pool's worker-0 core), sleeps otherwise.
  std::thread server;
  std::mutex server_mu;
  std::condition_variable server_cv;
  std::atomic<bool> serving{false};
  bool server_stop = false;

  void server_loop() {
    uint32_t last = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(server_mu);
        server_cv.wait(lk, [&] { return server_stop || serving.load(); });
        if (server_stop) return;
      }
      while (serving.load(std::memory_order_acquire)) {
        const uint32_t s = __atomic_load_n(&mailbox->req_seq, __ATOMIC_ACQUIRE);
        if (s == last) {
          __builtin_ia32_pause();
          continue;
        }
        last = s;
        const int layer = mailbox->layer, n = mailbox->n;
        if (layer >= 0 && layer < static_cast<int>(layers.size()) && n >= 1 && n <= L.T)
          opt.cpu.run(opt.cpu.ctx, layer, n, h_xn, h_ids, h_w, layers[layer].owner_of.data(), h_out);
        __atomic_store_n(&mailbox->done_seq, s, __ATOMIC_RELEASE);
      }
    }
  }
  void start_serving() {
    if (!L.hybrid) return;
    {
      std::lock_guard<std::mutex> lk(server_mu);
      serving.store(true);
    }
    server_cv.notify_one();
  }
  void stop_serving() { serving.store(false); }

  ~Impl() {
    // Nothing may still be in flight on any stream when buffers are freed
    // (after a failed forward only the main stream was synchronized).
    if (stream || copy_stream) cudaSetDevice(opt.device);
    if (stream) cudaStreamSynchronize(stream);
    if (copy_stream) cudaStreamSynchronize(copy_stream);
    for (Peer& p : peers)
      if (p.stream) {
        if (!p.same_device) cudaSetDevice(p.device);
        cudaStreamSynchronize(p.stream);
        if (!p.same_device) cudaSetDevice(opt.device);
      }
    if (server.joinable()) {
      {
        std::lock_guard<std::mutex> lk(server_mu);
        server_stop = true;
        serving.store(false);
      }
      server_cv.notify_one();
      server.join();
    }
    drop_graph();
    if (stream) cudaStreamDestroy(stream);
    if (ev_done) cudaEventDestroy(ev_done);
    if (weight_mem) cudaFree(weight_mem);
    if (cache_mem) cudaFree(cache_mem);
    if (staging_mem) cudaFree(staging_mem);
    if (owner_mem) cudaFree(owner_mem);
    for (Peer& p : peers) {
      if (!p.same_device) cudaSetDevice(p.device);
      if (p.stream) cudaStreamSynchronize(p.stream);
      if (p.cache_mem) cudaFree(p.cache_mem);
      if (p.work_mem) cudaFree(p.work_mem);
      if (p.stream) cudaStreamDestroy(p.stream);
      if (p.ev_out) cudaEventDestroy(p.ev_out);
      if (!p.same_device) cudaSetDevice(opt.device);
      if (p.ev_in) cudaEventDestroy(p.ev_in);
      if (p.route_mem) cudaFree(p.route_mem);
    }
    if (ring) cudaFreeHost(ring);
    if (copy_stream) cudaStreamDestroy(copy_stream);
    for (cudaEvent_t ev : slot_free)
      if (ev) cudaEventDestroy(ev);
    if (ev_main_ready) cudaEventDestroy(ev_main_ready);
    if (ev_staged) cudaEventDestroy(ev_staged);
    if (kv_mem) cudaFree(kv_mem);
    if (scratch_mem) cudaFree(scratch_mem);
    if (h_pinned) cudaFreeHost(h_pinned);
    if (h_logits) cudaFreeHost(h_logits);
    for (void* p : {static_cast<void*>(mailbox), static_cast<void*>(h_xn), static_cast<void*>(h_ids),
                    static_cast<void*>(h_w), static_cast<void*>(h_out)})
      if (p) cudaFreeHost(p);
  }

  bool fail(const char* what, cudaError_t e) {
    err = cuda_msg(what, e);
    return false;
  }

  // The captured decode steps are recaptured at the next single-token steps
  // (after a change to something they have as a kernel argument).
  void drop_graph() {
    for (cudaGraphExec_t& g : graph_execs) {
      if (g) cudaGraphExecDestroy(g);
      g = nullptr;
    }
  }

  // Decode graph ranges: positions [0, 512), [512, 1024), [1024, 2048), ...
  static constexpr int kFirstDecodeRange = 512;
  int decode_range_of(int pos) const {
    int k = 0;
    while (static_cast<int64_t>(kFirstDecodeRange) << k <= pos) ++k;
    return k;
  }
  int decode_range_end(int k) const {
    return static_cast<int>(std::min<int64_t>(static_cast<int64_t>(kFirstDecodeRange) << k, opt.n_ctx));
  }
  int decode_range_start(int k) const { return k == 0 ? 0 : decode_range_end(k - 1); }
  // Range k's step, captured the first time it is needed.
  bool ensure_graph(int k) { return graph_execs[k] || capture_decode_graph(k); }

  DevMatrix dev_matrix(const QMatrix& m, int64_t n_expert) const {
    DevMatrix d;
    if (!m.data) return d;
    const Upload& u = L.uploads[L.index.at(m.data)];
    d.data = weight_mem + u.offset;
    d.type = m.type;
    d.n_in = m.n_in;
    d.n_out = m.n_out;
    d.row_stride = u.stride;
    d.expert_stride = n_expert > 1 ? u.stride * static_cast<size_t>(m.n_out) : 0;
    d.n_expert = static_cast<int>(n_expert);
    return d;
  }
  const float* dev_vector(const float* v) const {
    if (!v) return nullptr;
    return reinterpret_cast<const float*>(weight_mem + L.uploads[L.index.at(v)].offset);
  }

  // ---- activation sources: a float buffer and the formats made from it so far ----
  struct Src {
    const float* f32;
    int rows;
    int n;
    bool q8 = false, f16 = false;
  };

  Work main_work() const { return Work{stream, ffn_gate, ffn_up, ffn_h, ffn_down, act_q8, act_f16}; }

  static bool use_gemv(const DevMatrix& m, int n) {
    return n <= kGemvMaxCols || (m.type != 0 && m.n_in % 32 != 0);
  }
  static ActFormat format_for(const DevMatrix& m, int n) {
    return use_gemv(m, n) ? act_format_gemv(m.type) : act_format_gemm(m.type);
  }

  bool ensure(Src& s, ActFormat f, const Work& w) {
    cudaError_t e = cudaSuccess;
    if (f == ActFormat::Q8_1 && !s.q8) {
      e = quantize_q8_1(s.f32, s.n, s.rows, s.n, w.act_q8, w.stream);
      s.q8 = true;
    } else if (f == ActFormat::F16 && !s.f16) {
      e = convert_f16(s.f32, s.n, s.rows, s.n, w.act_f16, L.widest, w.stream);
      s.f16 = true;
    }
    return e == cudaSuccess || fail("activation conversion", e);
  }
  bool ensure(Src& s, ActFormat f) { return ensure(s, f, main_work()); }

  ActView view(const Src& s, int row0, const Work& w) const {
    ActView a;
    a.f32 = s.f32 + static_cast<int64_t>(row0) * s.n;
    a.f32_stride = s.n;
    a.q8 = w.act_q8;
    a.q8.qs += static_cast<int64_t>(row0) * w.act_q8.qs_stride;
    a.q8.ds += static_cast<int64_t>(row0) * w.act_q8.ds_stride;
    a.f16 = w.act_f16 + static_cast<int64_t>(row0) * L.widest;
    a.f16_stride = L.widest;
    return a;
  }
  ActView view(const Src& s, int row0 = 0) const { return view(s, row0, main_work()); }

  // y = src · Wᵀ for src.rows rows.
  bool matmul(const DevMatrix& w, Src& src, float* y, int64_t y_stride, bool accumulate) {
    const int n = src.rows;
    if (!ensure(src, format_for(w, n))) return false;
    cudaError_t e;
    if (use_gemv(w, n)) {
      for (int c0 = 0; c0 < n; c0 += kGemvMaxCols) {
        e = gemv(w, view(src, c0), std::min(kGemvMaxCols, n - c0), y + static_cast<int64_t>(c0) * y_stride, y_stride,
                 accumulate, stream);
        if (e != cudaSuccess) return fail("gemv", e);
      }
      return true;
    }
    e = gemm(w, view(src), n, y, y_stride, accumulate, stream);
    return e == cudaSuccess || fail("gemm", e);
  }

  // RMSNorm of rows of x into xn, also producing the formats the consumers want.
  bool norm(float* xin, const float* w, int rows, Src* out, std::initializer_list<const DevMatrix*> consumers,
            int n_for_format) {
    bool want_q8 = false, want_f16 = false;
    for (const DevMatrix* m : consumers) {
      if (!m || !m->data) continue;
      const ActFormat f = format_for(*m, n_for_format);
      want_q8 |= f == ActFormat::Q8_1;
      want_f16 |= f == ActFormat::F16;
    }
    const cudaError_t e = rms_norm(xin, nullptr, w, hp.rms_eps, rows, hp.n_embd, xn, want_q8 ? &act_q8 : nullptr,
                                   want_f16 ? act_f16 : nullptr, L.widest, stream);
    if (e != cudaSuccess) return fail("rms_norm", e);
    *out = Src{xn, rows, hp.n_embd, want_q8, want_f16};
    return true;
  }

  // q, k and v: one launch when the three are quantized alike and small
  // steps use the matrix-vector path, else three products.
  bool qkv_projections(const Layer& ly, Src& xs) {
    const int n = xs.rows;
    const bool one_launch = use_gemv(ly.wq, n) && act_format_gemv(ly.wq.type) == ActFormat::Q8_1 &&
                            ly.wk.type == ly.wq.type && ly.wv.type == ly.wq.type && ly.wk.row_stride == ly.wq.row_stride &&
                            ly.wv.row_stride == ly.wq.row_stride && ly.wk.n_in == ly.wq.n_in && ly.wv.n_in == ly.wq.n_in;
    const DevMatrix ws[3] = {ly.wq, ly.wk, ly.wv};
    const int64_t strides[3] = {L.q_dim, L.kv_dim, L.kv_dim};
    if (!use_gemv(ly.wq, n) && !use_gemv(ly.wk, n) && !use_gemv(ly.wv, n)) {
      // A prompt: the products of the matrices quantized alike in one grid
      // (k and v alone would leave most of the GPU idle; Q4_K_M-style files
      // keep v in another type, which then gets its own launch).
      float* const outs[3] = {q, k, v};
      bool done[3] = {false, false, false};
      for (int i = 0; i < 3; ++i) {
        if (done[i]) continue;
        DevMatrix group[3];
        float* ys[3];
        int64_t group_strides[3];
        int m = 0;
        for (int j = i; j < 3; ++j) {
          if (done[j] || ws[j].type != ws[i].type || ws[j].n_in != ws[i].n_in) continue;
          group[m] = ws[j];
          ys[m] = outs[j];
          group_strides[m] = strides[j];
          done[j] = true;
          ++m;
        }
        if (!ensure(xs, act_format_gemm(group[0].type))) return false;
        const cudaError_t e = gemm_multi(group, m, view(xs), n, ys, group_strides, stream);
        if (e != cudaSuccess) return fail("gemm_multi (q, k, v)", e);
      }
      return true;
    }
    if (!one_launch)
      return matmul(ly.wq, xs, q, L.q_dim, false) && matmul(ly.wk, xs, k, L.kv_dim, false) &&
             matmul(ly.wv, xs, v, L.kv_dim, false);
    if (!ensure(xs, ActFormat::Q8_1)) return false;
    for (int c0 = 0; c0 < n; c0 += kGemvMaxCols) {
      float* const ys[3] = {q + static_cast<int64_t>(c0) * L.q_dim, k + static_cast<int64_t>(c0) * L.kv_dim,
                            v + static_cast<int64_t>(c0) * L.kv_dim};
      const cudaError_t e = gemv_multi(ws, 3, view(xs, c0), std::min(kGemvMaxCols, n - c0), ys, strides, stream);
      if (e != cudaSuccess) return fail("gemv_multi (q, k, v)", e);
    }
    return true;
  }

  bool attention_block(const Layer& ly, int n) {
    Src xs{};
    if (!norm(x, ly.attn_norm, n, &xs, {&ly.wq, &ly.wk, &ly.wv}, n)) return false;
    if (!qkv_projections(ly, xs)) return false;
    QkvPost p;
    p.q = q; p.q_stride = L.q_dim;
    p.k = k; p.k_stride = L.kv_dim;
    p.v = v; p.v_stride = L.kv_dim;
    p.q_norm = hp.qk_norm ? ly.q_norm : nullptr;
    p.k_norm = hp.qk_norm ? ly.k_norm : nullptr;
    p.eps = hp.rms_eps;
    p.n_head = hp.n_head;
    p.n_head_kv = hp.n_head_kv;
    p.head_dim = hp.head_dim_k;
    p.k_cache = ly.k_cache;
    p.v_cache = ly.v_cache;
    // One token: attention applies qkv_post itself (one launch fewer).
    const bool post_in_attention = fused && n == 1;
    cudaError_t e = cudaSuccess;
    if (!post_in_attention && (e = qkv_post(p, rope, rope_cs, d_pos0, n, stream)) != cudaSuccess)
      return fail("qkv_post", e);

    AttnArgs a;
    a.q = q; a.q_stride = L.q_dim;
    a.k_cache = ly.k_cache;
    a.v_cache = ly.v_cache;
    a.n_head = hp.n_head;
    a.n_head_kv = hp.n_head_kv;
    a.head_dim = hp.head_dim_k;
    a.n_ctx = opt.n_ctx;
    a.n_kv_min = n == 1 ? decode_range_start(decode_range) + 1 : 0;
    a.n_kv_max = n == 1 ? decode_range_end(decode_range) : 0;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
    a.out = attn; a.out_stride = L.q_dim;
    Src as{attn, n, L.q_dim};
    if (n == 1) {
      const bool q8 = format_for(ly.wo, 1) == ActFormat::Q8_1 && hp.head_dim_k % 32 == 0;
      e = post_in_attention
              ? attention_decode_post(a, p, rope, rope.n_rot > 0 ? rope_cs : nullptr, d_pos0, attn_work,
                                      q8 ? &act_q8 : nullptr, stream)
              : attention_decode(a, d_pos0, attn_work, q8 ? &act_q8 : nullptr, stream);
      if (e != cudaSuccess) return fail("attention_decode", e);
      as.q8 = q8;
    } else {
      e = attention_prefill(a, d_pos0, n, stream);
      if (e != cudaSuccess) return fail("attention_prefill", e);
    }
    return matmul(ly.wo, as, x, hp.n_embd, true);  // x += attn · Woᵀ
  }

  // How long the GPU waits for the CPU expert server before failing the step.
  static constexpr uint64_t kServerTimeoutNs = 60ull * 1000 * 1000 * 1000;

  bool moe_block(const Layer& ly, int layer, int n) {
    const int kk = hp.n_expert_used;
    Src xs{};
    cudaError_t e;
    if (fused && n == 1 && moe_norm_route_supported(ly.router, kk)) {
      // Norm, router and top-k in one launch; the normed row in both formats
      // the expert passes (and the CPU's export) may read.
      const bool q8 = format_for(ly.gate_exps, 1) == ActFormat::Q8_1 || format_for(ly.up_exps, 1) == ActFormat::Q8_1;
      e = moe_norm_route(x, ly.ffn_norm, hp.rms_eps, ly.router, kk, xn, q8 ? &act_q8 : nullptr, router_logits,
                         groups.ids, groups.weights, route_counter, stream);
      if (e != cudaSuccess) return fail("moe_norm_route", e);
      xs = Src{xn, 1, hp.n_embd, q8, false};
    } else {
      if (!norm(x, ly.ffn_norm, n, &xs, {&ly.router, &ly.gate_exps, &ly.up_exps}, n)) return false;
      if (!matmul(ly.router, xs, router_logits, hp.n_expert, false)) return false;
      e = moe_route(router_logits, n, hp.n_expert, kk, groups.ids, groups.weights, stream);
      if (e != cudaSuccess) return fail("moe_route", e);
    }
    if (!L.hybrid) {
      if (n == 1) return token_experts(Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, groups.ids, xs, main_work());
      e = moe_group(groups, n, kk, hp.n_expert, stream);
      if (e != cudaSuccess) return fail("moe_group", e);
      return gpu_experts(Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, groups, hp.n_expert, xs, n) &&
             combine(groups.weights, nullptr, n);
    }
    // Hybrid: the choices whose expert is cached run here; the others are
    // posted to the CPU expert server, which computes them at the same time;
    // its output is added to the residual after both are done.
    const int n_slots = n * kk;
    e = moe_remap_ids(groups.ids, n_slots, ly.d_slot_of, d_cache_ids, d_counts + static_cast<int64_t>(layer) * hp.n_expert,
                      stream);
    if (e != cudaSuccess) return fail("moe_remap_ids", e);
    if (ly.cpu_part && stream_min > 0 && n >= stream_min && n > 1 && staging_mem) {
      // A big batch: bring the uncached experts to the GPU instead. Cached
      // choices run from the cache, the others from the staging area; each
      // pass writes only its own choices' rows of ffn_down, and one combine
      // sums every choice in order, as the all-GPU layer does (bit for bit).
      // Order: the staging area is free, the cached pass is queued, then the
      // copies (with the ring the host fills slots while the GPU computes).
      if (!staging_free()) return false;
      if (ly.cache_slots > 0) {
        MoeGroups g = groups;
        g.ids = d_cache_ids;
        if ((e = moe_group(g, n, kk, ly.cache_slots, stream)) != cudaSuccess) return fail("moe_group", e);
        if (!gpu_experts(Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, g, ly.cache_slots, xs, n)) return false;
      }
      if (!stage_layer(ly)) return false;
      ++streamed;
      // The cached pass quantized its own hidden rows into the shared
      // activation buffer: the layer input must be converted again.
      xs.q8 = xs.f16 = false;
      if ((e = moe_remap_ids(groups.ids, n_slots, ly.d_stage_of, d_stage_ids, nullptr, stream)) != cudaSuccess)
        return fail("moe_remap_ids (staging)", e);
      MoeGroups g = groups;
      g.ids = d_stage_ids;
      if ((e = moe_group(g, n, kk, ly.n_uncached, stream)) != cudaSuccess) return fail("moe_group", e);
      if (!join_staged()) return false;
      return gpu_experts(ly.staged, g, ly.n_uncached, xs, n) && combine(groups.weights, nullptr, n);
    }
    // One token: the GPU also computes up to host_choices of the CPU's
    // choices, reading those experts from page-locked host memory over PCIe,
    // while the CPU computes the rest (the two read RAM side by side).
    const bool host_split = n == 1 && ly.cpu_part && ly.host_readable && host_choices > 0 && kk <= 32;
    if (ly.cpu_part) {
      if ((e = hybrid_export(xs.f32, n, hp.n_embd, groups.ids, groups.weights, kk, ly.d_owner_of, dv_xn, dv_ids, dv_w,
                             d_pending, host_split ? d_host_ids : nullptr, host_choices, stream)) != cudaSuccess ||
          (e = hybrid_post(dv_mailbox, layer, n, d_pending, d_seq, stream)) != cudaSuccess)
        return fail("hybrid MoE (post)", e);
    }
    // The peers compute their choices on their own streams meanwhile.
    for (Peer& p : peers)
      if (p.layers[layer].slots > 0 && !peer_launch(p, layer, xs, n)) return false;
    if (ly.cache_slots > 0 && n == 1) {
      if (!token_experts(Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, d_cache_ids, xs, main_work())) return false;
    } else if (ly.cache_slots > 0) {
      MoeGroups g = groups;
      g.ids = d_cache_ids;
      e = moe_group(g, n, kk, ly.cache_slots, stream);
      if (e != cudaSuccess) return fail("moe_group", e);
      if (!gpu_experts(Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, g, ly.cache_slots, xs, n) ||
          !combine(groups.weights, d_cache_ids, n))
        return false;
    }
    if (host_split) {
      xs.q8 = xs.f16 = false;  // the cached pass reused the activation buffer for its hidden rows
      if (!token_experts(ly.host_view, d_host_ids, xs, main_work())) return false;
    }
    for (Peer& p : peers) {
      if (p.layers[layer].slots == 0) continue;
      if ((e = cudaStreamWaitEvent(stream, p.ev_out, 0)) != cudaSuccess ||
          (e = add_inplace(x, p.out_primary, static_cast<int64_t>(n) * hp.n_embd, stream)) != cudaSuccess)
        return fail("peer MoE (join)", e);
    }
    if (ly.cpu_part) {
      if ((e = hybrid_wait(dv_mailbox, d_pending, d_seq, d_error, kServerTimeoutNs, stream)) != cudaSuccess ||
          (e = hybrid_add(x, dv_out, static_cast<int64_t>(n) * hp.n_embd, d_pending, d_error, stream)) != cudaSuccess)
        return fail("hybrid MoE (wait)", e);
    }
    return true;
  }

  // The layer's uncached experts, packed in the staging area at stage_of[e]
  // (runs of consecutive uncached experts in one copy each); cached experts
  // are read from the cache where they are.
  bool stage_layer(const Layer& ly) {
    cudaError_t e = cudaSuccess;
    // Pinned host copies: DMA straight from them; otherwise through the pinned
    // ring when there is one; else the driver's pageable path.
    const bool use_ring = ring != nullptr && !ly.host_pinned;
    const bool side = copy_stream != nullptr;  // copies on the copy stream (after staging_free), joined below
    cudaStream_t cs = side ? copy_stream : stream;
    for (auto [dst, host] : {std::pair{&ly.staged.gate, &ly.host_gate}, {&ly.staged.up, &ly.host_up},
                             {&ly.staged.down, &ly.host_down}}) {
      uint8_t* base = static_cast<uint8_t*>(const_cast<void*>(dst->data));
      const size_t rows = static_cast<size_t>(host->first.n_out), rb = host->first.row_bytes;
      for (int e0 = 0; e0 < hp.n_expert && e == cudaSuccess;) {
        if (ly.slot_of[e0] >= 0) {
          ++e0;
          continue;
        }
        int e1 = e0 + 1;
        while (e1 < hp.n_expert && ly.slot_of[e1] < 0) ++e1;
        uint8_t* d = base + static_cast<size_t>(ly.stage_of[e0]) * dst->expert_stride;
        const uint8_t* h = host->first.data + static_cast<size_t>(e0) * host->expert_bytes;
        const size_t total_rows = rows * static_cast<size_t>(e1 - e0);
        if (!use_ring) {
          e = cudaMemcpy2DAsync(d, dst->row_stride, h, rb, rb, total_rows, cudaMemcpyHostToDevice, cs);
        } else {
          e = ring_copy(d, dst->row_stride, h, rb, total_rows);
        }
        e0 = e1;
      }
    }
    if (e == cudaSuccess && side && (e = cudaEventRecord(ev_staged, copy_stream)) != cudaSuccess)
      return fail("expert staging (record)", e);
    return e == cudaSuccess || fail("expert staging copy", e);
  }
  // The copy stream may overwrite the staging area only once the main stream
  // is done with the previous layer's staged experts: called where that is
  // so, before the main stream gets more work (the cached pass), so the
  // copies overlap it.
  bool staging_free() {
    cudaError_t e = cudaSuccess;
    if (copy_stream && ((e = cudaEventRecord(ev_main_ready, stream)) != cudaSuccess ||
                        (e = cudaStreamWaitEvent(copy_stream, ev_main_ready, 0)) != cudaSuccess))
      return fail("expert staging (order)", e);
    return true;
  }
  // The main stream waits for stage_layer's copies (issued on the copy stream,
  // so they overlap whatever the main stream does in between).
  bool join_staged() {
    cudaError_t e = cudaSuccess;
    return !copy_stream || (e = cudaStreamWaitEvent(stream, ev_staged, 0)) == cudaSuccess || fail("expert staging (join)", e);
  }

  // rows x rb bytes from host h (rows rb apart) to device d (rows pitch
  // apart), through the pinned ring: whole rows per slot; the host copy of a
  // slot waits until that slot's previous DMA is done, so filling slot i+1
  // overlaps the DMA of slot i.
  cudaError_t ring_copy(uint8_t* d, size_t pitch, const uint8_t* h, size_t rb, size_t rows) {
    const size_t rows_per_slot = std::max<size_t>(1, ring_slot_bytes / rb);
    cudaError_t e = cudaSuccess;
    for (size_t r0 = 0; r0 < rows && e == cudaSuccess; r0 += rows_per_slot) {
      const size_t n = std::min(rows_per_slot, rows - r0);
      const int s = ring_next;
      ring_next = (ring_next + 1) % kRingSlots;
      if ((e = cudaEventSynchronize(slot_free[s])) != cudaSuccess) break;
      uint8_t* slot = ring + static_cast<size_t>(s) * ring_slot_bytes;
      opt.host_copy.copy(opt.host_copy.ctx, slot, h + r0 * rb, n * rb);
      if ((e = cudaMemcpy2DAsync(d + r0 * pitch, pitch, slot, rb, rb, n, cudaMemcpyHostToDevice, copy_stream)) != cudaSuccess)
        break;
      e = cudaEventRecord(slot_free[s], copy_stream);
    }
    return e;
  }

  bool combine(const float* weights, const int32_t* mask, int n) {
    const cudaError_t e = mask ? moe_combine_masked(ffn_down, weights, mask, n, hp.n_expert_used, hp.n_embd, x, stream)
                               : moe_combine(ffn_down, weights, n, hp.n_expert_used, hp.n_embd, x, stream);
    return e == cudaSuccess || fail("moe_combine", e);
  }

  // gate/up GLU and down of the grouped slots (n_groups experts in the stacks),
  // per-slot outputs in ffn_down.
  // bytes from primary memory to peer memory (or back), on stream st.
  cudaError_t peer_copy(const Peer& p, void* dst, bool dst_on_peer, const void* src, size_t bytes, cudaStream_t st) const {
    // Unified addressing: cudaMemcpyDefault copies between devices (directly
    // where peer access is enabled) and, unlike cudaMemcpyPeerAsync, can be
    // captured in a graph.
    (void)dst_on_peer;
    return cudaMemcpyAsync(dst, src, bytes, p.same_device ? cudaMemcpyDeviceToDevice : cudaMemcpyDefault, st);
  }

  // A peer's share of a MoE layer: the choices of the experts it computes
  // (remapped to its slots on the primary), the normed rows and the weights
  // go over; it groups and computes them, sums them per token into a partial
  // output (zero where it has no choice) and sends that back. Ordered with
  // the primary stream by events, so it is captured in the decode graph.
  bool peer_launch(Peer& p, int layer, const Src& xs, int n) {
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
        if (!token_experts(pl.cache, p.ids, p.weights, px, p.work, p.out)) return false;
      } else {
        MoeGroups g = p.groups;
        g.ids = p.ids;
        g.weights = p.weights;
        if ((r = moe_group(g, n, kk, pl.slots, p.stream)) != cudaSuccess) return fail("moe_group (peer)", r);
        if (!gpu_experts(pl.cache, g, pl.slots, px, n, p.work)) return false;
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
  bool create_peers(const ModelWeights& w, std::string* error) {
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
        if ((e = kernels_init()) != cudaSuccess) return bail("kernels_init (" + who + ")", e);
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

  // Recomputes a layer's owner map and each peer's route from the caches
  // (the primary's cache wins where both hold an expert) and uploads them.
  cudaError_t refresh_owner(int layer) {
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

  bool gpu_experts(const Experts& ly, const MoeGroups& groups, int n_groups, Src& xs, int n, const Work& w) {
    const int kk = hp.n_expert_used;
    const int n_slots = n * kk;
    cudaError_t e;
    const int max_active = std::min(n_groups, n_slots);
    const int n_ff = hp.n_ff_exp;
    const bool gemv_up = use_gemv(ly.gate, n) || use_gemv(ly.up, n);
    if (gemv_up) {
      if (!ensure(xs, act_format_gemv(ly.gate.type), w) || !ensure(xs, act_format_gemv(ly.up.type), w)) return false;
      if (ly.gate.type == ly.up.type && ly.gate.row_stride == ly.up.row_stride) {
        e = moe_gemv_glu(ly.gate, ly.up, view(xs, 0, w), groups, kk, max_active, n, w.ffn_h, n_ff, w.stream);
        if (e != cudaSuccess) return fail("moe_gemv_glu", e);
      } else {
        e = moe_gemv(ly.gate, view(xs, 0, w), groups, kk, max_active, n, w.ffn_gate, n_ff, w.stream);
        if (e == cudaSuccess) e = moe_gemv(ly.up, view(xs, 0, w), groups, kk, max_active, n, w.ffn_up, n_ff, w.stream);
        if (e == cudaSuccess) e = swiglu(w.ffn_gate, w.ffn_up, static_cast<int64_t>(n_slots) * n_ff, w.ffn_h, w.stream);
        if (e != cudaSuccess) return fail("moe_gemv", e);
      }
    } else {
      if (!ensure(xs, act_format_gemm(ly.gate.type), w) || !ensure(xs, act_format_gemm(ly.up.type), w)) return false;
      if (fused && moe_gemm_glu_supported(ly.gate, ly.up)) {
        e = moe_gemm_glu(ly.gate, ly.up, view(xs, 0, w), groups, kk, w.ffn_h, n_ff, w.stream);
        if (e != cudaSuccess) return fail("moe_gemm_glu", e);
      } else {
        e = moe_gemm(ly.gate, view(xs, 0, w), groups, kk, w.ffn_gate, n_ff, w.stream);
        if (e == cudaSuccess) e = moe_gemm(ly.up, view(xs, 0, w), groups, kk, w.ffn_up, n_ff, w.stream);
        if (e == cudaSuccess) e = swiglu(w.ffn_gate, w.ffn_up, static_cast<int64_t>(n_slots) * n_ff, w.ffn_h, w.stream);
        if (e != cudaSuccess) return fail("moe_gemm", e);
      }
    }
    Src hs{w.ffn_h, n_slots, n_ff};
    if (use_gemv(ly.down, n)) {
      if (!ensure(hs, act_format_gemv(ly.down.type), w)) return false;
      e = moe_gemv(ly.down, view(hs, 0, w), groups, 1, max_active, n, w.ffn_down, hp.n_embd, w.stream);
      if (e != cudaSuccess) return fail("moe_gemv (down)", e);
    } else {
      if (!ensure(hs, act_format_gemm(ly.down.type), w)) return false;
      e = moe_gemm(ly.down, view(hs, 0, w), groups, 1, w.ffn_down, hp.n_embd, w.stream);
      if (e != cudaSuccess) return fail("moe_gemm (down)", e);
    }
    return true;
  }

  // One token (decode): its k choices straight from the routing (ids[j]: the
  // expert's index in ex's stacks, -1 where another device or the CPU
  // computes it), without grouping; the down projection adds the weighted
  // sum of the choices to the residual x in the same pass.
  bool token_experts(const Experts& ex, const int32_t* ids, Src& xs, const Work& w) {
    return token_experts(ex, ids, groups.weights, xs, w, x);
  }
  bool token_experts(const Experts& ex, const int32_t* ids, const float* weights, Src& xs, const Work& w, float* out) {
    const int kk = hp.n_expert_used;
    const int n_ff = hp.n_ff_exp;
    cudaError_t e;
    if (!ensure(xs, act_format_gemv(ex.gate.type), w) || !ensure(xs, act_format_gemv(ex.up.type), w)) return false;
    if (ex.gate.type == ex.up.type && ex.gate.row_stride == ex.up.row_stride) {
      e = moe_gemv_glu_direct(ex.gate, ex.up, view(xs, 0, w), ids, kk, kk, w.ffn_h, n_ff, w.stream);
    } else {
      e = moe_gemv_direct(ex.gate, view(xs, 0, w), ids, kk, kk, w.ffn_gate, n_ff, w.stream);
      if (e == cudaSuccess) e = moe_gemv_direct(ex.up, view(xs, 0, w), ids, kk, kk, w.ffn_up, n_ff, w.stream);
      if (e == cudaSuccess) e = swiglu(w.ffn_gate, w.ffn_up, static_cast<int64_t>(kk) * n_ff, w.ffn_h, w.stream);
    }
    if (e != cudaSuccess) return fail("moe_gemv (one token)", e);
    // Rows of choices computed elsewhere hold stale values: the quantization
    // reads them but the combine skips them.
    Src hs{w.ffn_h, kk, n_ff};
    if (!ensure(hs, act_format_gemv(ex.down.type), w)) return false;
    e = moe_gemv_combine(ex.down, view(hs, 0, w), ids, weights, kk, out, w.stream);
    return e == cudaSuccess || fail("moe_gemv_combine", e);
  }

  bool gpu_experts(const Experts& ly, const MoeGroups& groups, int n_groups, Src& xs, int n) {
    return gpu_experts(ly, groups, n_groups, xs, n, main_work());
  }

  bool dense_block(const Layer& ly, int n) {
    Src xs{};
    if (!norm(x, ly.ffn_norm, n, &xs, {&ly.ffn_gate, &ly.ffn_up}, n)) return false;
    const int n_ff = hp.n_ff;
    cudaError_t e;
    if (use_gemv(ly.ffn_gate, n) && ly.ffn_gate.type == ly.ffn_up.type &&
        ly.ffn_gate.row_stride == ly.ffn_up.row_stride) {
      if (!ensure(xs, act_format_gemv(ly.ffn_gate.type))) return false;
      for (int c0 = 0; c0 < n; c0 += kGemvMaxCols) {
        e = gemv_glu(ly.ffn_gate, ly.ffn_up, view(xs, c0), std::min(kGemvMaxCols, n - c0),
                     ffn_h + static_cast<int64_t>(c0) * n_ff, n_ff, stream);
        if (e != cudaSuccess) return fail("gemv_glu", e);
      }
    } else {
      if (!matmul(ly.ffn_gate, xs, ffn_gate, n_ff, false) || !matmul(ly.ffn_up, xs, ffn_up, n_ff, false)) return false;
      e = swiglu(ffn_gate, ffn_up, static_cast<int64_t>(n) * n_ff, ffn_h, stream);
      if (e != cudaSuccess) return fail("swiglu", e);
    }
    Src hs{ffn_h, n, n_ff};
    return matmul(ly.ffn_down, hs, x, hp.n_embd, true);  // x += h · Wdownᵀ
  }

  // Embedding, rope table and every layer for n tokens (inputs already on device).
  bool enqueue_body(int n) {
    cudaError_t e = get_rows(token_embd, d_tokens, n, x, hp.n_embd, stream);
    if (e != cudaSuccess) return fail("get_rows", e);
    if (rope.n_rot > 0) {
      e = rope_table(rope, d_pos0, n, rope_cs, stream);
      if (e != cudaSuccess) return fail("rope_table", e);
    }
    for (size_t l = 0; l < layers.size(); ++l) {
      const Layer& ly = layers[l];
      if (!attention_block(ly, n)) return false;
      if (ly.moe ? !moe_block(ly, static_cast<int>(l), n) : !dense_block(ly, n)) return false;
    }
    return true;
  }

  // Final norm, lm_head and argmax for rows [first, first + rows) (rows <= logits_rows).
  bool enqueue_head(int first, int rows) {
    Src ns{};
    if (!norm(x + static_cast<int64_t>(first) * hp.n_embd, output_norm, rows, &ns, {&output}, rows)) return false;
    if (!matmul(output, ns, logits, hp.n_vocab, false)) return false;
    const cudaError_t e = argmax_rows(logits, rows, hp.n_vocab, d_argmax, argmax_work, stream);
    return e == cudaSuccess || fail("argmax_rows", e);
  }

  // The single-token step for positions below decode_range_end(range).
  bool capture_decode_graph(int range) {
    decode_range = range;
    cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return fail("cudaStreamBeginCapture", e);
    const bool ok = enqueue_body(1) && enqueue_head(0, 1);
    cudaGraph_t g = nullptr;
    e = cudaStreamEndCapture(stream, &g);
    if (!ok) {
      if (g) cudaGraphDestroy(g);
      return false;
    }
    if (e != cudaSuccess) return fail("cudaStreamEndCapture", e);
    e = cudaGraphInstantiate(&graph_execs[range], g, 0);
    cudaGraphDestroy(g);  // the executable graph is independent of it
    if (e != cudaSuccess) {
      graph_execs[range] = nullptr;
      return fail("cudaGraphInstantiate", e);
    }
    ++captures;
    return true;
  }
};

// ---- device queries ---------------------------------------------------------------------

bool cuda_available(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cuda_msg("no usable CUDA driver/device", e);
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  for (int d = 0; d < n; ++d) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) == cudaSuccess && major >= 8) return true;
  }
  if (why) *why = "no CUDA device with compute capability >= 8.0";
  return false;
}

bool device_info(int device, DeviceInfo* out, std::string* why) {
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) {
    if (why) *why = cuda_msg("cudaGetDeviceProperties", e);
    return false;
  }
  out->name = prop.name;
  out->cc_major = prop.major;
  out->cc_minor = prop.minor;
  out->sm_count = prop.multiProcessorCount;
  out->total_bytes = prop.totalGlobalMem;
  return device_memory(device, &out->free_bytes, &out->total_bytes, why);
}

bool device_topology(DeviceTopology* out, std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cuda_msg("cudaGetDeviceCount", e);
    cudaGetLastError();
    return false;
  }
  out->devices.assign(n, DeviceInfo{});
  out->peer.assign(n, std::vector<bool>(n, false));
  for (int i = 0; i < n; ++i)
    if (!device_info(i, &out->devices[i], why)) return false;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      int can = 0;
      if (i != j && cudaDeviceCanAccessPeer(&can, i, j) == cudaSuccess) out->peer[i][j] = can != 0;
      cudaGetLastError();
    }
  return true;
}

bool device_memory(int device, size_t* free_bytes, size_t* total_bytes, std::string* why) {
  int prev = 0;
  cudaGetDevice(&prev);
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMemGetInfo(free_bytes, total_bytes);
  cudaSetDevice(prev);
  if (e != cudaSuccess) {
    if (why) *why = cuda_msg("cudaMemGetInfo", e);
    return false;
  }
  return true;
}

// ---- CudaDecoder ----------------------------------------------------------------------------

const gpu::BackendV1* backend_v1() {
  static const gpu::BackendV1 table = [] {
    gpu::BackendV1 t;
    t.available = &cuda_available;
    t.device_info = &device_info;
    t.topology = &device_topology;
    t.device_memory = &device_memory;
    t.estimate = &CudaDecoder::estimate;
    t.create = [](const ModelHparams& hp, const ModelWeights& w, const gpu::DecoderOptions& o,
                  std::string* error) -> gpu::Decoder* { return CudaDecoder::create(hp, w, o, error).release(); };
    t.expert_cache_bytes = &CudaDecoder::expert_cache_bytes;
    t.host_alloc = [](size_t bytes, std::string* why) -> void* {
      void* p = nullptr;
      // Mapped: kernels may read it in place (decode's GPU share of the CPU's experts).
      const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
      if (e == cudaSuccess) return p;
      if (why) *why = cuda_msg("cudaHostAlloc", e);
      cudaGetLastError();
      return nullptr;
    };
    t.host_free = [](void* p) {
      if (p) cudaFreeHost(p);
    };
    return t;
  }();
  return &table;
}

CudaDecoder::CudaDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaDecoder::~CudaDecoder() = default;

bool CudaDecoder::estimate(const ModelHparams& hp, const ModelWeights& w, const CudaDecoderOptions& options,
                           CudaDecoderMemory* out, std::string* error) {
  Layout L;
  if (!plan(hp, w, options, &L, error)) return false;
  out->weights = L.weight_bytes;
  out->expert_cache = L.cache_bytes;
  out->staging = L.staging_bytes;
  out->kv_cache = L.kv_bytes;
  out->scratch = L.scratch_bytes;
  return true;
}

std::unique_ptr<CudaDecoder> CudaDecoder::create(const ModelHparams& hp, const ModelWeights& w,
                                                 const CudaDecoderOptions& options, std::string* error) {
  std::string why;
  if (!cuda_available(&why)) {
    *error = "CUDA decoder: " + why;
    return nullptr;
  }
  if (hp.n_expert > 0 && hp.gating != ExpertGating::SoftmaxTopkRenorm) {
    *error = "CUDA decoder: unsupported expert gating";
    return nullptr;
  }
  auto im = std::make_unique<Impl>();
  Impl& I = *im;
  I.hp = hp;
  I.opt = options;
  if (!plan(hp, w, options, &I.L, error)) return nullptr;
  if (I.L.hybrid && !options.cpu.run) {
    *error = "CUDA decoder: hybrid placement without a CPU expert runner";
    return nullptr;
  }
  Layout& L = I.L;
  auto bail = [&](const char* what, cudaError_t e) {
    *error = "CUDA decoder: " + cuda_msg(what, e);
    cudaGetLastError();
    return nullptr;
  };
  cudaError_t e = cudaSetDevice(options.device);
  if (e != cudaSuccess) return bail("cudaSetDevice", e);
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, options.device);
  if (major < 8) {
    *error = "CUDA decoder: device " + std::to_string(options.device) + " has compute capability < 8.0";
    return nullptr;
  }
  if ((e = kernels_init()) != cudaSuccess) return bail("kernels_init", e);
  if ((e = cudaStreamCreateWithFlags(&I.stream, cudaStreamNonBlocking)) != cudaSuccess) return bail("cudaStreamCreate", e);

  // Weights: one allocation, each tensor copied as it is (rows padded to 16 bytes).
  if ((e = cudaMalloc(reinterpret_cast<void**>(&I.weight_mem), L.weight_bytes)) != cudaSuccess) return bail("cudaMalloc (weights)", e);
  if ((e = cudaMemset(I.weight_mem, 0, L.weight_bytes)) != cudaSuccess) return bail("cudaMemset", e);
  for (const Upload& u : L.uploads) {
    e = cudaMemcpy2D(I.weight_mem + u.offset, u.stride, u.src, u.row_bytes, u.row_bytes, static_cast<size_t>(u.rows),
                     cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return bail("cudaMemcpy2D (weights)", e);
  }
  if ((e = cudaMalloc(reinterpret_cast<void**>(&I.kv_mem), L.kv_bytes)) != cudaSuccess) return bail("cudaMalloc (KV cache)", e);
  if ((e = cudaMemset(I.kv_mem, 0, L.kv_bytes)) != cudaSuccess) return bail("cudaMemset (KV cache)", e);
  if ((e = cudaMalloc(reinterpret_cast<void**>(&I.scratch_mem), L.scratch_bytes)) != cudaSuccess) return bail("cudaMalloc (scratch)", e);
  if ((e = cudaMemset(I.scratch_mem, 0, L.scratch_bytes)) != cudaSuccess) return bail("cudaMemset (scratch)", e);
  const size_t T = L.T;
  if ((e = cudaMallocHost(reinterpret_cast<void**>(&I.h_pinned), (2 * T + 2) * sizeof(int32_t))) != cudaSuccess) return bail("cudaMallocHost", e);
  I.mem = CudaDecoderMemory{L.weight_bytes, L.cache_bytes, L.staging_bytes, L.kv_bytes, L.scratch_bytes};
  if (L.hybrid) {
    if (L.cache_bytes > 0 && (e = cudaMalloc(reinterpret_cast<void**>(&I.cache_mem), L.cache_bytes)) != cudaSuccess)
      return bail("cudaMalloc (expert cache)", e);
    if (L.staging_bytes > 0 && (e = cudaMalloc(reinterpret_cast<void**>(&I.staging_mem), L.staging_bytes)) != cudaSuccess)
      return bail("cudaMalloc (expert staging)", e);
    I.stream_min = options.stream_prefill ? std::max(0, options.stream_min_tokens) : 0;
    if (I.staging_mem) {
      // Streamed copies run on their own stream, beside the layer's cached experts.
      if ((e = cudaStreamCreateWithFlags(&I.copy_stream, cudaStreamNonBlocking)) != cudaSuccess) return bail("cudaStreamCreate", e);
      for (cudaEvent_t* ev : {&I.ev_main_ready, &I.ev_staged})
        if ((e = cudaEventCreateWithFlags(ev, cudaEventDisableTiming)) != cudaSuccess) return bail("cudaEventCreate", e);
    }
    if (I.staging_mem && options.host_copy.copy && options.staging_ring_bytes >= Impl::kRingSlots * (size_t{1} << 20)) {
      // Slots of whole 4 KiB pages; every slot starts "free" (its event recorded once).
      I.ring_slot_bytes = options.staging_ring_bytes / Impl::kRingSlots / 4096 * 4096;
      if ((e = cudaMallocHost(reinterpret_cast<void**>(&I.ring), I.ring_slot_bytes * Impl::kRingSlots)) != cudaSuccess)
        return bail("cudaMallocHost (staging ring)", e);
      for (cudaEvent_t& ev : I.slot_free) {
        if ((e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventBlockingSync)) != cudaSuccess ||
            (e = cudaEventRecord(ev, I.copy_stream)) != cudaSuccess)
          return bail("cudaEventCreate (ring)", e);
      }
    }
    // The thread waiting for a hybrid step sleeps instead of spinning: the CPU
    // expert pool needs those cores.
    if ((e = cudaEventCreateWithFlags(&I.ev_done, cudaEventDisableTiming | cudaEventBlockingSync)) != cudaSuccess)
      return bail("cudaEventCreate", e);
    const size_t rows = T * hp.n_embd * sizeof(float), slots = T * L.K * 4;
    auto mapped = [&](auto** host, auto** dev, size_t bytes) {
      cudaError_t r = cudaHostAlloc(reinterpret_cast<void**>(host), bytes, cudaHostAllocMapped);
      if (r == cudaSuccess) std::memset(*host, 0, bytes);
      if (r == cudaSuccess) r = cudaHostGetDevicePointer(reinterpret_cast<void**>(dev), *host, 0);
      return r;
    };
    if ((e = mapped(&I.mailbox, &I.dv_mailbox, sizeof(HybridMailbox))) != cudaSuccess ||
        (e = mapped(&I.h_xn, &I.dv_xn, rows)) != cudaSuccess || (e = mapped(&I.h_out, &I.dv_out, rows)) != cudaSuccess ||
        (e = mapped(&I.h_ids, &I.dv_ids, slots)) != cudaSuccess || (e = mapped(&I.h_w, &I.dv_w, slots)) != cudaSuccess)
      return bail("cudaHostAlloc (hybrid mailbox)", e);
    if ((e = cudaMallocHost(reinterpret_cast<void**>(&I.h_logits),
                            static_cast<size_t>(L.logits_rows) * hp.n_vocab * sizeof(float))) != cudaSuccess)
      return bail("cudaMallocHost (logits)", e);
  }
  I.token_embd = I.dev_matrix(w.token_embd, 1);
  I.output = I.dev_matrix(w.output, 1);
  I.output_norm = I.dev_vector(w.output_norm);
  const size_t kv_layer = static_cast<size_t>(options.n_ctx) * L.kv_dim;  // elements
  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& lw = w.layers[l];
    Impl::Layer ly;
    ly.attn_norm = I.dev_vector(lw.attn_norm);
    ly.q_norm = I.dev_vector(lw.q_norm);
    ly.k_norm = I.dev_vector(lw.k_norm);
    ly.ffn_norm = I.dev_vector(lw.ffn_norm);
    ly.wq = I.dev_matrix(lw.wq, 1);
    ly.wk = I.dev_matrix(lw.wk, 1);
    ly.wv = I.dev_matrix(lw.wv, 1);
    ly.wo = I.dev_matrix(lw.wo, 1);
    ly.moe = lw.is_moe();
    if (ly.moe && L.hybrid) {
      const Layout::Cache& c = L.caches[l];
      ly.router = I.dev_matrix(lw.router, 1);
      auto cache_matrix = [&](const QMatrix& m, size_t off, size_t stride) {
        DevMatrix d;
        d.data = I.cache_mem ? I.cache_mem + off : nullptr;
        d.type = m.type;
        d.n_in = m.n_in;
        d.n_out = m.n_out;
        d.row_stride = stride;
        d.expert_stride = stride * static_cast<size_t>(m.n_out);
        d.n_expert = std::max(1, c.slots);
        return d;
      };
      ly.gate_exps = cache_matrix(lw.gate_exps.first, c.gate_off, c.gate_stride);
      ly.up_exps = cache_matrix(lw.up_exps.first, c.up_off, c.up_stride);
      ly.down_exps = cache_matrix(lw.down_exps.first, c.down_off, c.down_stride);
      if (I.staging_mem) {
        size_t off = 0;
        for (auto [dst, src] : {std::pair{&ly.staged.gate, &ly.gate_exps}, {&ly.staged.up, &ly.up_exps},
                                {&ly.staged.down, &ly.down_exps}}) {
          off = align_up(off, 256);
          *dst = *src;
          dst->data = I.staging_mem + off;
          dst->n_expert = hp.n_expert;
          off += static_cast<size_t>(hp.n_expert) * src->expert_stride;
        }
      }
      ly.host_gate = lw.gate_exps;
      ly.host_up = lw.up_exps;
      ly.host_down = lw.down_exps;
      ly.cache_slots = c.slots;
      ly.cpu_part = c.slots < hp.n_expert;
      ly.slot_of.assign(hp.n_expert, -1);
      ly.cached.assign(c.slots, -1);
    } else if (ly.moe) {
      ly.router = I.dev_matrix(lw.router, 1);
      ly.gate_exps = I.dev_matrix(lw.gate_exps.first, lw.gate_exps.n_expert);
      ly.up_exps = I.dev_matrix(lw.up_exps.first, lw.up_exps.n_expert);
      ly.down_exps = I.dev_matrix(lw.down_exps.first, lw.down_exps.n_expert);
    } else {
      ly.ffn_gate = I.dev_matrix(lw.ffn_gate, 1);
      ly.ffn_up = I.dev_matrix(lw.ffn_up, 1);
      ly.ffn_down = I.dev_matrix(lw.ffn_down, 1);
      if (!ly.ffn_gate.data || !ly.ffn_up.data || !ly.ffn_down.data) {
        *error = "CUDA decoder: layer " + std::to_string(l) + " has no FFN";
        return nullptr;
      }
    }
    uint16_t* kv = reinterpret_cast<uint16_t*>(I.kv_mem) + static_cast<size_t>(l) * 2 * kv_layer;
    ly.k_cache = kv;
    ly.v_cache = kv + kv_layer;
    I.layers.push_back(ly);
  }
  I.rope.n_rot = hp.rope.n_rot;
  I.rope.neox = hp.rope.style == RopeStyle::Neox;
  I.rope.freq_base = hp.rope.freq_base;
  I.rope.freq_scale = hp.rope.freq_scale;
  I.rope.ext_factor = hp.rope.ext_factor;
  I.rope.attn_factor = hp.rope.attn_factor;
  I.rope.beta_fast = hp.rope.beta_fast;
  I.rope.beta_slow = hp.rope.beta_slow;
  I.rope.n_ctx_orig = hp.rope.n_ctx_orig;

  Arena a{I.scratch_mem, 0};
  const size_t K = L.K;
  const size_t ffn = std::max(T * K * hp.n_ff_exp, T * static_cast<size_t>(hp.n_ff));
  I.x = a.take<float>(T * hp.n_embd);
  I.xn = a.take<float>(T * hp.n_embd);
  I.q = a.take<float>(T * L.q_dim);
  I.k = a.take<float>(T * L.kv_dim);
  I.v = a.take<float>(T * L.kv_dim);
  I.attn = a.take<float>(T * L.q_dim);
  I.router_logits = a.take<float>(T * std::max(1, hp.n_expert));
  I.ffn_gate = a.take<float>(ffn);
  I.ffn_up = a.take<float>(ffn);
  I.ffn_h = a.take<float>(ffn);
  I.ffn_down = a.take<float>(T * K * hp.n_embd);
  I.logits = a.take<float>(static_cast<size_t>(L.logits_rows) * hp.n_vocab);
  I.rope_cs = a.take<float>(T * std::max(2, hp.rope.n_rot));
  I.attn_work = a.take<float>(attention_decode_workspace_floats(hp.n_head, hp.head_dim_k, options.n_ctx));  // zero (scratch): its counters
  I.graph_execs.assign(static_cast<size_t>(I.decode_range_of(options.n_ctx - 1)) + 1, nullptr);
  I.act_q8.qs = a.take<int8_t>(static_cast<size_t>(L.act_rows) * L.widest);
  I.act_q8.qs_stride = L.widest;
  I.act_q8.ds = a.take<uint32_t>(static_cast<size_t>(L.act_rows) * (L.widest / 32));
  I.act_q8.ds_stride = L.widest / 32;
  I.act_f16 = a.take<uint16_t>(static_cast<size_t>(L.act_rows) * L.widest);
  I.d_tokens = a.take<int32_t>(T);
  I.d_pos0 = a.take<int32_t>(1);
  I.d_argmax = a.take<int32_t>(T);
  I.argmax_work = a.take<uint64_t>(argmax_workspace_bytes(L.logits_rows) / sizeof(uint64_t));
  I.route_counter = a.take<uint32_t>(1);
  if (const char* env = std::getenv("GUILD_CUDA_FUSED"); env && std::string(env) == "0") I.fused = false;
  if (hp.n_expert > 0) {
    I.groups.ids = a.take<int32_t>(T * K);
    I.groups.weights = a.take<float>(T * K);
    I.groups.offsets = a.take<int32_t>(hp.n_expert + 1);
    I.groups.slots = a.take<int32_t>(T * K);
    I.groups.active = a.take<int32_t>(hp.n_expert);
    I.groups.counters = a.take<int32_t>(2);
    I.groups.tiles = a.take<int32_t>(L.max_tiles);
    I.groups.max_tiles = L.max_tiles;
  }
  if (L.hybrid) {
    I.d_cache_ids = a.take<int32_t>(T * K);
    I.d_host_ids = a.take<int32_t>(K);
    I.d_stage_ids = a.take<int32_t>(T * K);
    I.d_counts = a.take<uint32_t>(static_cast<size_t>(hp.n_layer) * hp.n_expert);
    I.d_pending = a.take<int32_t>(1);
    I.d_seq = a.take<uint32_t>(1);
    I.d_error = a.take<int32_t>(1);
    int32_t* maps = a.take<int32_t>(static_cast<size_t>(hp.n_layer) * hp.n_expert);
    for (int l = 0; l < hp.n_layer; ++l) I.layers[l].d_slot_of = maps + static_cast<size_t>(l) * hp.n_expert;
    // Every expert starts on the CPU (-1 = 0xffffffff).
    if ((e = cudaMemset(maps, 0xff, static_cast<size_t>(hp.n_layer) * hp.n_expert * 4)) != cudaSuccess)
      return bail("cudaMemset (slot maps)", e);
    // ... so each sits in the staging area at its own index.
    int32_t* stage_maps = a.take<int32_t>(static_cast<size_t>(hp.n_layer) * hp.n_expert);
    for (int l = 0; l < hp.n_layer; ++l) {
      Impl::Layer& ly = I.layers[l];
      ly.d_stage_of = stage_maps + static_cast<size_t>(l) * hp.n_expert;
      ly.stage_of.resize(hp.n_expert);
      for (int x = 0; x < hp.n_expert; ++x) ly.stage_of[x] = x;
      ly.n_uncached = hp.n_expert;
      if ((e = cudaMemcpy(ly.d_stage_of, ly.stage_of.data(), ly.stage_of.size() * 4, cudaMemcpyHostToDevice)) != cudaSuccess)
        return bail("cudaMemcpy (staging maps)", e);
    }
  }
  if (a.used > L.scratch_bytes) {
    *error = "CUDA decoder: internal scratch layout overflow";
    return nullptr;
  }
  if (L.hybrid) {
    // Owner maps: every expert starts with the CPU.
    const size_t maps = static_cast<size_t>(hp.n_layer) * hp.n_expert;
    if ((e = cudaMalloc(reinterpret_cast<void**>(&I.owner_mem), maps * 4)) != cudaSuccess) return bail("cudaMalloc (owner maps)", e);
    if ((e = cudaMemset(I.owner_mem, 0xff, maps * 4)) != cudaSuccess) return bail("cudaMemset (owner maps)", e);
    I.mem.scratch += maps * 4;
    for (int l = 0; l < hp.n_layer; ++l) {
      Impl::Layer& ly = I.layers[l];
      ly.d_owner_of = I.owner_mem + static_cast<size_t>(l) * hp.n_expert;
      if (ly.moe) ly.owner_of.assign(hp.n_expert, -1);
    }
    if (!I.create_peers(w, error)) return nullptr;
  } else if (!options.peers.empty()) {
    *error = "CUDA decoder: peer GPUs need hybrid placement (expert_cache_slots)";
    return nullptr;
  }
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return bail("cudaDeviceSynchronize", e);
  if (L.hybrid) I.server = std::thread([&I] { I.server_loop(); });
  return std::unique_ptr<CudaDecoder>(new CudaDecoder(std::move(im)));
}

bool CudaDecoder::forward(const int32_t* tokens, int n, int pos0, float* logits_out, bool all_rows,
                          std::string* error, int32_t* argmax_out) {
  Impl& I = *impl_;
  const Layout& L = I.L;
  if (n < 1 || n > L.T || pos0 < 0 || pos0 + n > I.opt.n_ctx || !tokens) {
    *error = "CUDA decoder: bad batch (n=" + std::to_string(n) + ", pos0=" + std::to_string(pos0) + ", max " +
             std::to_string(L.T) + " tokens, context " + std::to_string(I.opt.n_ctx) + ")";
    return false;
  }
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= I.hp.n_vocab) {
      *error = "CUDA decoder: token id " + std::to_string(tokens[i]) + " out of range";
      return false;
    }
  }
  cudaError_t e = cudaSetDevice(I.opt.device);
  if (e != cudaSuccess) { *error = cuda_msg("cudaSetDevice", e); return false; }
  int32_t* h_tokens = I.h_pinned;
  int32_t* h_pos0 = I.h_pinned + L.T;
  int32_t* h_argmax = I.h_pinned + L.T + 1;
  std::memcpy(h_tokens, tokens, static_cast<size_t>(n) * sizeof(int32_t));
  *h_pos0 = pos0;
  auto failed = [&](const std::string& msg) {
    *error = "CUDA decoder: " + msg;
    cudaStreamSynchronize(I.stream);
    cudaGetLastError();
    return false;
  };
  if ((e = cudaMemcpyAsync(I.d_tokens, h_tokens, static_cast<size_t>(n) * 4, cudaMemcpyHostToDevice, I.stream)) != cudaSuccess ||
      (e = cudaMemcpyAsync(I.d_pos0, h_pos0, 4, cudaMemcpyHostToDevice, I.stream)) != cudaSuccess)
    return failed(cuda_msg("cudaMemcpyAsync (inputs)", e));

  const int first = all_rows ? 0 : n - 1;
  const int rows = n - first;
  // The CPU expert server answers this forward's mailbox requests.
  struct Serving {
    Impl& I;
    explicit Serving(Impl& i) : I(i) { I.start_serving(); }
    ~Serving() { I.stop_serving(); }
  } serving(I);
  // Waiting: in hybrid mode the thread sleeps (blocking-sync event) and logits
  // land in pinned memory first — a copy to pageable memory would make this
  // thread spin on the core the CPU expert server needs.
  auto wait = [&]() {
    return I.L.hybrid ? (cudaEventRecord(I.ev_done, I.stream) == cudaSuccess ? cudaEventSynchronize(I.ev_done)
                                                                              : cudaGetLastError())
                      : cudaStreamSynchronize(I.stream);
  };
  float* logits_dst = I.L.hybrid ? I.h_logits : logits_out;
  // Logits rows [r0, r0 + cr) of this forward, from the device buffer.
  auto copy_logits = [&](int r0, int cr) {
    if (!logits_out) return cudaSuccess;
    return cudaMemcpyAsync(logits_dst + (I.L.hybrid ? 0 : static_cast<int64_t>(r0) * I.hp.n_vocab), I.logits,
                           static_cast<size_t>(cr) * I.hp.n_vocab * 4, cudaMemcpyDeviceToHost, I.stream);
  };
  auto take_logits = [&](int r0, int cr) {  // after wait(): pinned -> caller (hybrid)
    if (logits_out && I.L.hybrid)
      std::memcpy(logits_out + static_cast<int64_t>(r0) * I.hp.n_vocab, I.h_logits,
                  static_cast<size_t>(cr) * I.hp.n_vocab * 4);
  };
  int pending_r0 = 0, pending_rows = 0;
  if (n == 1 && I.opt.use_graphs) {
    const int range = I.decode_range_of(pos0);
    if (!I.ensure_graph(range)) return failed(I.err);
    if ((e = cudaGraphLaunch(I.graph_execs[range], I.stream)) != cudaSuccess)
      return failed(cuda_msg("cudaGraphLaunch", e));
    ++I.replays;
    if ((e = copy_logits(0, 1)) != cudaSuccess) return failed(cuda_msg("cudaMemcpyAsync (logits)", e));
    if ((e = cudaMemcpyAsync(h_argmax, I.d_argmax, 4, cudaMemcpyDeviceToHost, I.stream)) != cudaSuccess)
      return failed(cuda_msg("cudaMemcpyAsync (argmax)", e));
    pending_rows = 1;
  } else {
    // Plain single-token launches take the graph's range too: graphs on or
    // off, the same grid and head split, so the same bits.
    I.decode_range = I.decode_range_of(pos0);
    if (!I.enqueue_body(n)) return failed(I.err);
    for (int r0 = 0; r0 < rows; r0 += L.logits_rows) {
      const int cr = std::min(L.logits_rows, rows - r0);
      if (!I.enqueue_head(first + r0, cr)) return failed(I.err);
      if ((e = copy_logits(r0, cr)) != cudaSuccess) return failed(cuda_msg("cudaMemcpyAsync (logits)", e));
      if ((e = cudaMemcpyAsync(h_argmax + r0, I.d_argmax, static_cast<size_t>(cr) * 4, cudaMemcpyDeviceToHost,
                               I.stream)) != cudaSuccess)
        return failed(cuda_msg("cudaMemcpyAsync (argmax)", e));
      pending_r0 = r0;
      pending_rows = cr;
      // The next chunk reuses the logits buffers: this copy must finish first.
      if (r0 + cr < rows) {
        if ((e = wait()) != cudaSuccess) return failed(cuda_msg("forward", e));
        take_logits(r0, cr);
      }
    }
  }
  int32_t* h_error = I.h_pinned + 2 * L.T + 1;
  if (I.L.hybrid && (e = cudaMemcpyAsync(h_error, I.d_error, 4, cudaMemcpyDeviceToHost, I.stream)) != cudaSuccess)
    return failed(cuda_msg("cudaMemcpyAsync (error flag)", e));
  if ((e = wait()) != cudaSuccess) return failed(cuda_msg("forward", e));
  take_logits(pending_r0, pending_rows);
  if (I.L.hybrid && *h_error) {
    *error = "CUDA decoder: the CPU expert pool did not answer within 60 s; the model must be reloaded";
    return false;
  }
  if (argmax_out) std::memcpy(argmax_out, h_argmax, static_cast<size_t>(rows) * sizeof(int32_t));
  return true;
}

bool CudaDecoder::hybrid() const { return impl_->L.hybrid; }
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
    if (who == 0) return I.token_experts(Impl::Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, set, xs, I.main_work());
    if (who == -1) return I.token_experts(ly.host_view, set, xs, I.main_work());
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

void CudaDecoder::set_stream_min_tokens(int n) { impl_->stream_min = impl_->staging_mem ? std::max(0, n) : 0; }
int CudaDecoder::stream_min_tokens() const { return impl_->stream_min; }

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
uint64_t CudaDecoder::streamed_layers() const { return impl_->streamed; }

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
int CudaDecoder::owner_of(int layer, int expert) const {
  const Impl& I = *impl_;
  if (layer < 0 || layer >= static_cast<int>(I.layers.size()) || expert < 0 || expert >= I.hp.n_expert) return -1;
  const Impl::Layer& ly = I.layers[layer];
  if (ly.owner_of.empty()) return ly.moe && !I.L.hybrid ? 0 : -1;
  const int o = ly.owner_of[expert];
  return o < 0 ? -1 : o < I.hp.n_expert ? 0 : 1 + (o - I.hp.n_expert);
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

void CudaDecoder::set_use_graphs(bool on) { impl_->opt.use_graphs = on; }
bool CudaDecoder::use_graphs() const { return impl_->opt.use_graphs; }
int CudaDecoder::graph_replays() const { return impl_->replays; }
int CudaDecoder::graph_captures() const { return impl_->captures; }

bool CudaDecoder::prepare_graphs(int first, int last, std::string* error) {
  Impl& I = *impl_;
  if (first < 0 || last < first || last >= I.opt.n_ctx) {
    *error = "CUDA decoder: prepare_graphs: positions " + std::to_string(first) + ".." + std::to_string(last) +
             " outside the context of " + std::to_string(I.opt.n_ctx);
    return false;
  }
  if (!I.opt.use_graphs) return true;
  cudaError_t e = cudaSetDevice(I.opt.device);
  if (e != cudaSuccess) { *error = cuda_msg("cudaSetDevice", e); return false; }
  for (int k = I.decode_range_of(first); k <= I.decode_range_of(last); ++k) {
    if (!I.ensure_graph(k)) {
      *error = "CUDA decoder: " + I.err;
      return false;
    }
  }
  return true;
}
int CudaDecoder::n_ctx() const { return impl_->opt.n_ctx; }
int CudaDecoder::max_tokens() const { return impl_->L.T; }
const CudaDecoderMemory& CudaDecoder::memory() const { return impl_->mem; }
cudaStream_t CudaDecoder::stream() const { return impl_->stream; }

}  // namespace guild::cuda
