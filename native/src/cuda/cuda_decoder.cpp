// CudaDecoder's lifetime and its forward pass: create() (device checks, the
// weight upload, KV cache, scratch and the hybrid buffers, then the peers and
// the CPU expert server's thread), estimate(), ~Impl, forward() and the small
// accessors. The other jobs of the class have files of their own
// (decoder_impl.h lists them).
#include "cuda/cuda_decoder.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cuda/cuda_error.h"
#include "cuda/cuda_kernels.h"
#include "cuda/decoder_impl.h"
#include "cuda/f16_fallback.h"
#include "cuda/weight_layout.h"

namespace guild::cuda {

CudaDecoder::Impl::~Impl() {
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

namespace {

GluArgs glu_args(const GluParams& g) {
  GluArgs a;
  a.kind = g.kind == Glu::SwigluOai ? GluKind::SwigluOai : GluKind::Silu;
  a.alpha = g.alpha;
  a.limit = g.limit;
  return a;
}

// Layer l's steps: the recipe's (options.layers), or the standard layer.
ExecutorLayer layer_steps(const ModelHparams& hp, const ModelWeights& w, const CudaDecoderOptions& o, int l) {
  if (!o.layers.empty()) return o.layers[static_cast<size_t>(l)];
  ExecutorLayer s;
  s.attention.qk_norm = hp.qk_norm;
  s.moe = w.layers[static_cast<size_t>(l)].is_moe();
  return s;
}

// The steps name only what the kernels run and tensors the weights have.
bool check_layer_steps(const ModelHparams& hp, const ModelWeights& w, const CudaDecoderOptions& o, std::string* error) {
  if (!o.layers.empty() && o.layers.size() != w.layers.size()) {
    *error = "CUDA decoder: " + std::to_string(o.layers.size()) + " layer step sets for " +
             std::to_string(w.layers.size()) + " layers";
    return false;
  }
  const int n_checked = static_cast<int>(w.layers.size()) + (o.nextn && !w.nextn.empty() ? 1 : 0);
  for (int l = 0; l < n_checked; ++l) {
    // The trunk's layers, then the MTP block (its steps: o.nextn_layer).
    const bool mtp = l == static_cast<int>(w.layers.size());
    const LayerWeights& lw = mtp ? w.nextn[0].block : w.layers[static_cast<size_t>(l)];
    const ExecutorLayer s = mtp ? o.nextn_layer : layer_steps(hp, w, o, l);
    const AttentionStep& a = s.attention;
    const RoutedExpertsStep& e = s.experts;
    const char* gap = nullptr;
    if (s.moe != lw.is_moe()) gap = "an FFN step that does not match its tensors (router or dense FFN)";
    else if (a.qkv_bias && (!lw.bq || !lw.bk || !lw.bv)) gap = "q/k/v biases without their tensors";
    else if (a.out_bias && !lw.bo) gap = "an output bias without its tensor";
    else if (a.sinks && !lw.attn_sinks) gap = "attention sinks without their tensor";
    else if (a.qk_norm && (!lw.q_norm || !lw.k_norm)) gap = "q/k norms without their tensors";
    else if (a.sliding_window < 0) gap = "a negative sliding window";
    else if (s.moe && e.choice_bias && (e.gating != Gating::SigmoidTopk || !lw.exp_probs_b))
      gap = "an expert choice bias without sigmoid gating or its tensor";
    else if (s.moe && e.shared_expert &&
             (!lw.shexp_gate.data || !lw.shexp_up.data || !lw.shexp_down.data || hp.n_ff_shexp < 1))
      gap = "a shared expert without its tensors";
    else if (s.moe && e.router_bias && !lw.router_bias) gap = "a router bias without its tensor";
    else if (s.moe && e.expert_bias && (!lw.gate_exps_bias || !lw.up_exps_bias || !lw.down_exps_bias))
      gap = "expert biases without their tensors";
    else if (s.moe && !o.peers.empty() && (e.expert_bias || e.glu.kind != Glu::Silu))
      gap = "expert biases or swiglu-oai with peer GPUs (the peers run bias-free SwiGLU experts only)";
    if (gap) {
      *error = "CUDA decoder: layer " + std::to_string(l) + ": " + gap;
      return false;
    }
  }
  return true;
}

}  // namespace

DevMatrix CudaDecoder::Impl::dev_matrix(const QMatrix& m, int64_t n_expert) const {
  DevMatrix d;
  if (!m.data) return d;
  const Upload& u = L.uploads[L.index.at(m.data)];
  d.data = weight_mem + u.offset;
  d.type = u.dev_type;  // F16 for a tensor that took the upload fallback
  d.n_in = m.n_in;
  d.n_out = m.n_out;
  d.row_stride = u.stride;
  d.expert_stride = n_expert > 1 ? u.stride * static_cast<size_t>(m.n_out) : 0;
  d.n_expert = static_cast<int>(n_expert);
  return d;
}
const float* CudaDecoder::Impl::dev_vector(const float* v) const {
  if (!v) return nullptr;
  return reinterpret_cast<const float*>(weight_mem + L.uploads[L.index.at(v)].offset);
}

// ---- CudaDecoder ----------------------------------------------------------------------------

int CudaDecoder::resume_point(int n_reuse) const {
  const Impl& I = *impl_;
  // Rows of positions below kv_high - ring were overwritten; the first query
  // at n_reuse attends from n_reuse - window + 1.
  for (const Impl::Layer& ly : I.layers)
    if (ly.kv_ring > 0 && n_reuse > 0 && n_reuse - ly.steps.attention.sliding_window + 1 < I.kv_high - ly.kv_ring)
      return 0;
  return n_reuse;
}

// Layer kv_slot's device form (the trunk's layers, then the MTP block at
// n_layer): weights, step tensors, expert cache or resident stacks, KV.
bool CudaDecoder::Impl::tokens_in_vocab(const int32_t* tokens, int n, std::string* error) const {
  for (int i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= hp.n_vocab) {
      *error = "CUDA decoder: token id " + std::to_string(tokens[i]) + " out of range";
      return false;
    }
  return true;
}

bool CudaDecoder::Impl::stage_inputs(const int32_t* tokens, int n, int pos0, std::string* error) {
  int32_t* h_tokens = h_pinned;
  int32_t* h_pos0 = h_pinned + L.T;
  std::memcpy(h_tokens, tokens, static_cast<size_t>(n) * sizeof(int32_t));
  *h_pos0 = pos0;
  cudaError_t e = cudaMemcpyAsync(d_tokens, h_tokens, static_cast<size_t>(n) * 4, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(d_pos0, h_pos0, 4, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) return true;
  *error = "CUDA decoder: " + cuda_msg("cudaMemcpyAsync (inputs)", e);
  cudaGetLastError();
  return false;
}

bool CudaDecoder::Impl::build_layer(const LayerWeights& lw, int kv_slot, const ExecutorLayer& steps, Layer* out,
                                    std::string* error) {
  Impl& I = *this;
  const ModelHparams& hp = I.hp;
  const CudaDecoderOptions& options = I.opt;
  const Layout& L = I.L;
  Layer& ly = *out;
  ly.attn_norm = I.dev_vector(lw.attn_norm);
  ly.q_norm = I.dev_vector(lw.q_norm);
  ly.k_norm = I.dev_vector(lw.k_norm);
  ly.ffn_norm = I.dev_vector(lw.ffn_norm);
  ly.wq = I.dev_matrix(lw.wq, 1);
  ly.wk = I.dev_matrix(lw.wk, 1);
  ly.wv = I.dev_matrix(lw.wv, 1);
  ly.wo = I.dev_matrix(lw.wo, 1);
  ly.moe = lw.is_moe();
  ly.steps = steps;
  const AttentionStep& as = ly.steps.attention;
  if (as.qkv_bias) {
    ly.bq = I.dev_vector(lw.bq);
    ly.bk = I.dev_vector(lw.bk);
    ly.bv = I.dev_vector(lw.bv);
  }
  if (as.out_bias) ly.bo = I.dev_vector(lw.bo);
  if (as.sinks) ly.sinks = I.dev_vector(lw.attn_sinks);
  const RoutedExpertsStep& es = ly.steps.experts;
  if (ly.moe) {
    if (es.router_bias) ly.router_bias = I.dev_vector(lw.router_bias);
    if (es.choice_bias) ly.choice_bias = I.dev_vector(lw.exp_probs_b);
    if (es.shared_expert) {
      ly.shexp_gate = I.dev_matrix(lw.shexp_gate, 1);
      ly.shexp_up = I.dev_matrix(lw.shexp_up, 1);
      ly.shexp_down = I.dev_matrix(lw.shexp_down, 1);
    }
    ly.math.glu = glu_args(es.glu);
    if (es.expert_bias) {
      ly.math.gate_bias = I.dev_vector(lw.gate_exps_bias);
      ly.math.up_bias = I.dev_vector(lw.up_exps_bias);
      ly.math.down_bias = I.dev_vector(lw.down_exps_bias);
    }
  } else {
    ly.dense_glu = glu_args(ly.steps.dense_glu);
  }
  ly.resident = !ly.moe || !L.hybrid || kv_slot >= hp.n_layer;
  if (ly.moe && !ly.resident) {
    const Layout::Cache& c = L.caches[kv_slot];
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
      *error = "CUDA decoder: layer " + std::to_string(kv_slot) + " has no FFN";
      return false;
    }
  }
  uint16_t* kv = reinterpret_cast<uint16_t*>(I.kv_mem) + L.kv_offset[kv_slot];
  ly.k_cache = kv;
  ly.v_cache = kv + static_cast<size_t>(L.kv_rows[kv_slot]) * L.kv_dim;
  ly.kv_ring = L.kv_rows[kv_slot] < options.n_ctx ? L.kv_rows[kv_slot] : 0;
  return true;
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
  return create_with_f16_upload(hp, w, options, 0, error);
}

std::unique_ptr<CudaDecoder> CudaDecoder::create_with_f16_upload(const ModelHparams& hp, const ModelWeights& w,
                                                                 const CudaDecoderOptions& options,
                                                                 uint64_t force_f16_types, std::string* error) {
  std::string why;
  if (!cuda_available(&why)) {
    *error = "CUDA decoder: " + why;
    return nullptr;
  }
  if (!check_layer_steps(hp, w, options, error)) return nullptr;
  auto im = std::make_unique<Impl>();
  Impl& I = *im;
  I.hp = hp;
  I.opt = options;
  UploadPolicy policy;
  policy.force_f16_types = force_f16_types;
  if (!plan(hp, w, options, &I.L, error, policy)) return nullptr;
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
  if ((e = kernels_init(KernelSwitches{options.pdl, options.gemm_direct})) != cudaSuccess) return bail("kernels_init", e);
  if ((e = cudaStreamCreateWithFlags(&I.stream, cudaStreamNonBlocking)) != cudaSuccess) return bail("cudaStreamCreate", e);

  // Weights: one allocation, each tensor copied as it is (rows padded to 16 bytes).
  if ((e = cudaMalloc(reinterpret_cast<void**>(&I.weight_mem), L.weight_bytes)) != cudaSuccess) return bail("cudaMalloc (weights)", e);
  if ((e = cudaMemset(I.weight_mem, 0, L.weight_bytes)) != cudaSuccess) return bail("cudaMemset", e);
  for (const Upload& u : L.uploads) {
    if (u.to_f16) {
      // No kernel for the type: dequantized on the host, uploaded as F16.
      e = upload_rows_f16(u.src_type, u.src, u.row_bytes, u.n_in, u.rows, I.weight_mem + u.offset, u.stride);
      if (e != cudaSuccess) return bail("F16 upload (weights)", e);
      continue;
    }
    e = cudaMemcpy2D(I.weight_mem + u.offset, u.stride, u.src, u.row_bytes, u.row_bytes, static_cast<size_t>(u.rows),
                     cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return bail("cudaMemcpy2D (weights)", e);
  }
  if ((e = cudaMalloc(reinterpret_cast<void**>(&I.kv_mem), L.kv_bytes)) != cudaSuccess) return bail("cudaMalloc (KV cache)", e);
  if ((e = cudaMemset(I.kv_mem, 0, L.kv_bytes)) != cudaSuccess) return bail("cudaMemset (KV cache)", e);
  if ((e = cudaMalloc(reinterpret_cast<void**>(&I.scratch_mem), L.scratch_bytes)) != cudaSuccess) return bail("cudaMalloc (scratch)", e);
  if ((e = cudaMemset(I.scratch_mem, 0, L.scratch_bytes)) != cudaSuccess) return bail("cudaMemset (scratch)", e);
  const size_t T = L.T;
  if ((e = cudaMallocHost(reinterpret_cast<void**>(&I.h_pinned), (2 * T + 4) * sizeof(int32_t))) != cudaSuccess) return bail("cudaMallocHost", e);
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
  for (int l = 0; l < hp.n_layer; ++l) {
    Impl::Layer ly;
    if (!I.build_layer(w.layers[l], l, layer_steps(hp, w, options, l), &ly, error)) return nullptr;
    I.layers.push_back(ly);
  }
  if (options.nextn) {
    const NextnWeights& m = w.nextn[0];
    if (!I.build_layer(m.block, hp.n_layer, options.nextn_layer, &I.nextn.block, error)) return nullptr;
    I.nextn.eh_proj = I.dev_matrix(m.eh_proj, 1);
    I.nextn.embed = I.dev_matrix(m.embed, 1);
    I.nextn.head = I.dev_matrix(m.head, 1);
    I.nextn.enorm = I.dev_vector(m.enorm);
    I.nextn.hnorm = I.dev_vector(m.hnorm);
    I.nextn.shared_head_norm = I.dev_vector(m.shared_head_norm);
    I.nextn.on = true;
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
  const size_t ffn = L.ffn_floats;
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
  if (options.nextn) {
    I.nextn.h_table = a.take<float>((T + 1) * hp.n_embd);
    I.nextn.h_step = a.take<float>(hp.n_embd);
    I.nextn.cat = a.take<float>(2 * T * hp.n_embd);
    I.nextn.p_top1 = a.take<float>(1);
  }
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
  I.fused = options.fused;
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
  if (!I.tokens_in_vocab(tokens, n, error)) return false;
  cudaError_t e = cudaSetDevice(I.opt.device);
  if (e != cudaSuccess) { *error = cuda_msg("cudaSetDevice", e); return false; }
  int32_t* h_argmax = I.h_pinned + L.T + 1;
  // The sliding-window rings' high-water mark (resume_point): a pass from 0
  // starts over, any other extends it.
  I.kv_high = pos0 == 0 ? pos0 + n : std::max(I.kv_high, pos0 + n);
  auto failed = [&](const std::string& msg) {
    *error = "CUDA decoder: " + msg;
    cudaStreamSynchronize(I.stream);
    cudaGetLastError();
    return false;
  };
  if (!I.stage_inputs(tokens, n, pos0, error)) {
    cudaStreamSynchronize(I.stream);
    return false;
  }

  const int first = all_rows ? 0 : n - 1;
  const int rows = n - first;
  // The CPU expert server answers this forward's mailbox requests.
  Impl::Serving serving(I);
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
int CudaDecoder::f16_upload_tensors() const { return impl_->L.f16_uploads; }
int CudaDecoder::n_ctx() const { return impl_->opt.n_ctx; }
int CudaDecoder::max_tokens() const { return impl_->L.T; }
const CudaDecoderMemory& CudaDecoder::memory() const { return impl_->mem; }
cudaStream_t CudaDecoder::stream() const { return impl_->stream; }

}  // namespace guild::cuda
