// CudaDecoder::Impl, the decoder's state and methods, declared once for the
// files that implement it, one job each (internal to guild_cuda):
//   cuda_decoder.cpp       create / estimate / ~Impl, forward, small accessors
//   weight_layout.{h,cpp}  the memory plan behind estimate and create
//   decoder_blocks.cpp     the per-layer blocks a forward enqueues
//   decode_graphs.cpp      single-token steps captured per position range
//   cpu_expert_server.cpp  the thread that answers the hybrid mailbox
//   expert_cache.cpp       which expert is where: cache slots, owner maps, counts
//   host_experts.cpp       the host expert stacks and the GPU's share of them
//   expert_staging.cpp     streamed prefill: uncached experts copied in
//   peers.cpp              other GPUs' expert caches and their share of a layer
//   probes.cpp             measurements for the placement plan
//   device_query.cpp, backend_table.cpp: no decoder needed.
// Methods stay plain members (no virtual calls inside the decoder). The small
// helpers the blocks call around every launch (activation formats and views,
// decode ranges, fail, peer_copy) are defined here, inline.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda/cuda_decoder.h"
#include "cuda/cuda_error.h"
#include "cuda/cuda_kernels.h"
#include "cuda/weight_layout.h"

namespace guild::cuda {

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
  // What a layer's experts compute beyond bias-free SwiGLU (gpt-oss): the
  // gated unit and per-expert biases [n_expert][n], indexed by the routed
  // expert ids (groups.ids), whichever stack or cache the weights come from.
  struct ExpertMath {
    GluArgs glu;
    const float* gate_bias = nullptr;
    const float* up_bias = nullptr;
    const float* down_bias = nullptr;
    bool plain() const { return glu.kind == GluKind::Silu && !gate_bias && !up_bias && !down_bias; }
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
    DevMatrix shexp_gate, shexp_up, shexp_down;  // the shared expert (steps.experts.shared_expert)
    bool moe = false;
    // The recipe's parameters of this layer's attention and FFN steps, and
    // the tensors they name (device copies; null when the step has none).
    ExecutorLayer steps;
    // Experts uploaded whole (all-GPU placements, and the MTP block in any):
    // the routed-experts step runs without the hybrid machinery.
    bool resident = true;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;
    const float* sinks = nullptr;
    const float* router_bias = nullptr;
    const float* choice_bias = nullptr;  // sigmoid gating's exp_probs_b (steps.experts.choice_bias)
    ExpertMath math;
    GluArgs dense_glu;
    uint16_t* k_cache = nullptr;
    uint16_t* v_cache = nullptr;
    int kv_ring = 0;  // a sliding-window layer's ring rows (0: n_ctx rows, row = position)
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

  // ---- the MTP block (options.nextn; Decoder::nextn_*) ----
  struct Nextn {
    bool on = false;
    Layer block;  // KV after the trunk's (slot n_layer)
    DevMatrix eh_proj, embed, head;
    const float *enorm = nullptr, *hnorm = nullptr, *shared_head_norm = nullptr;
    float* h_table = nullptr;  // [1 + T][n_embd]: row 0 held, rows 1.. the last forward's h rows
    float* h_step = nullptr;   // [n_embd] the last step's block output (after shared_head_norm)
    float* cat = nullptr;      // [T][2 n_embd] concat(enorm(e), hnorm(h)): eh_proj's input
    float* p_top1 = nullptr;   // [1] the last step's top-1 probability
  };
  Nextn nextn;

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
  int kv_high = 0;  // one past the furthest position written since a pass from 0 (resume_point)
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

  // ---- lifetime and weight views (cuda_decoder.cpp) ----
  ~Impl();
  bool build_layer(const LayerWeights& lw, int kv_slot, const ExecutorLayer& steps, Layer* out, std::string* error);
  // Every id within the vocabulary (else false and a one-line *error).
  bool tokens_in_vocab(const int32_t* tokens, int n, std::string* error) const;
  // A pass's tokens and first position to d_tokens / d_pos0 (through pinned
  // memory, ordered on the stream).
  bool stage_inputs(const int32_t* tokens, int n, int pos0, std::string* error);
  DevMatrix dev_matrix(const QMatrix& m, int64_t n_expert) const;
  const float* dev_vector(const float* v) const;

  // The reason of a failed step, kept in err for the caller's *error.
  bool fail(const char* what, cudaError_t e) {
    err = cuda_msg(what, e);
    return false;
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

  // ---- the per-layer blocks (decoder_blocks.cpp) ----
  bool matmul(const DevMatrix& w, Src& src, float* y, int64_t y_stride, bool accumulate);
  bool norm(float* xin, const float* w, int rows, Src* out, std::initializer_list<const DevMatrix*> consumers,
            int n_for_format);
  bool qkv_projections(const Layer& ly, Src& xs);
  bool attention_block(const Layer& ly, int n);
  // How long the GPU waits for the CPU expert server before failing the step.
  static constexpr uint64_t kServerTimeoutNs = 60ull * 1000 * 1000 * 1000;
  bool moe_block(const Layer& ly, int layer, int n);
  // The router's choices and weights of n normed rows into groups.ids/weights.
  bool route(const Layer& ly, int n, Src* xs);
  // The experts' passes; math: the layer's gated unit and biases (plain for
  // the peers, which run standard layers only).
  bool gpu_experts(const Experts& ly, const MoeGroups& groups, int n_groups, Src& xs, int n, const Work& w,
                   const ExpertMath& math);
  bool token_experts(const Experts& ex, const int32_t* ids, Src& xs, const Work& w, const ExpertMath& math);
  bool token_experts(const Experts& ex, const int32_t* ids, const float* weights, Src& xs, const Work& w, float* out,
                     const ExpertMath& math);
  bool gpu_experts(const Experts& ly, const MoeGroups& groups, int n_groups, Src& xs, int n, const ExpertMath& math);
  // The layer's combine of the per-slot outputs in ffn_down (mask: skip slots < 0; null: all).
  bool combine(const Layer& ly, const int32_t* mask, int n);
  // x += down(glu(gate · xs, up · xs)) for xs.rows rows of width n_ff: the
  // dense FFN and the shared expert.
  bool glu_ffn(const DevMatrix& gate, const DevMatrix& up, const DevMatrix& down, const GluArgs& glu, Src& xs, int n_ff);
  bool dense_block(const Layer& ly, int n);
  bool enqueue_body(int n);
  // The MTP block over n rows (tokens in d_tokens, position in d_pos0), row i
  // reading h row h_src + i * n_embd; with a head: its output row into
  // h_step, its logits' argmax and top-1 probability (n == 1).
  bool enqueue_nextn(const float* h_src, int n, bool head);
  bool enqueue_head(int first, int rows);

  // ---- decode graphs (decode_graphs.cpp; the ranges inline: attention reads them per layer) ----
  void drop_graph();
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
  bool capture_decode_graph(int range);

  // ---- the CPU expert server (cpu_expert_server.cpp) ----
  void server_loop();
  void start_serving();
  void stop_serving();
  // Held for one forward: the server answers its mailbox requests, then
  // sleeps again however the forward returns.
  struct Serving {
    Impl& I;
    explicit Serving(Impl& i) : I(i) { I.start_serving(); }
    ~Serving() { I.stop_serving(); }
  };

  // ---- streamed experts (expert_staging.cpp) ----
  bool stage_layer(const Layer& ly);
  bool staging_free();
  bool join_staged();
  cudaError_t ring_copy(uint8_t* d, size_t pitch, const uint8_t* h, size_t rb, size_t rows);

  // ---- peers (peers.cpp) ----
  // bytes from primary memory to peer memory (or back), on stream st.
  cudaError_t peer_copy(const Peer& p, void* dst, bool dst_on_peer, const void* src, size_t bytes, cudaStream_t st) const {
    // Unified addressing: cudaMemcpyDefault copies between devices (directly
    // where peer access is enabled) and, unlike cudaMemcpyPeerAsync, can be
    // captured in a graph.
    (void)dst_on_peer;
    return cudaMemcpyAsync(dst, src, bytes, p.same_device ? cudaMemcpyDeviceToDevice : cudaMemcpyDefault, st);
  }
  bool peer_launch(Peer& p, int layer, const Src& xs, int n);
  bool create_peers(const ModelWeights& w, std::string* error);

  // ---- expert placement (expert_cache.cpp) ----
  cudaError_t refresh_owner(int layer);
};

// The experts a cache of `slots` is to hold, as a mask over n_expert; false
// + *error for more experts than slots or an out-of-range or repeated id.
// (expert_cache.cpp; also used for the peers' caches)
bool wanted_experts(const std::vector<int>& experts, int n_expert, int slots, const char* cache,
                    std::vector<char>* wanted, std::string* error);

}  // namespace guild::cuda
