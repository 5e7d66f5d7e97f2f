// cuda_kernel_bench: times Guild's CUDA kernels on random data (docs/CUDA.md).
//  * device-to-device copy (the HBM ceiling, bytes read + written)
//  * decode matrix-vector products: weight GB/s for Q4_K / Q6_K / Q8_0 / F16 at
//    2048 x 768 (an expert matrix; many copies rotated so L2 does not serve them,
//    launches captured in a graph) and 2048 x 151936 (an lm_head)
//  * the grouped expert GLU of one decode step (8 of 128 experts, 2048 -> 768)
//  * prefill: tensor-core GEMM TFLOP/s at 512 tokens (2048 -> 4096), the grouped
//    expert GEMM (512 tokens x 8 of 128 experts), flash attention (512 tokens,
//    32 heads of 128) and split-K decode attention at 4096 positions.
// Prints one line per measurement and a summary table last. Usage:
//   cuda_kernel_bench [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/tuning.h"
#include "core/fp16.h"
#include "core/tensor_type.h"
#include "cuda/cuda_kernels.h"

namespace gc = guild::cuda;

namespace {

#define CK(expr)                                                                                        \
  do {                                                                                                  \
    const cudaError_t e_ = (expr);                                                                      \
    if (e_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                     \
    }                                                                                                   \
  } while (0)

uint64_t g_state = 0x9E3779B97F4A7C15ull;
uint64_t next_u64() {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}
float next_normal() {
  static std::mt19937 r(42);
  return std::normal_distribution<float>(0.0f, 1.0f)(r);
}

// Random blocks of `type` with sane fp16 scales, rows padded to 16 bytes.
struct Weights {
  void* d = nullptr;
  gc::DevMatrix m;
  size_t bytes = 0;       // weight bytes (unpadded) per matrix
};

Weights make_weights(uint32_t type, int64_t n_in, int64_t n_out, int n_copies = 1, int n_expert = 1) {
  uint64_t rb = 0;
  guild::tensor_row_bytes(type, n_in, &rb);
  const size_t stride = (rb + 15) / 16 * 16;
  const int64_t rows = n_out * n_expert;
  std::vector<uint8_t> h(stride * rows);
  for (size_t i = 0; i + 8 <= h.size(); i += 8) {
    const uint64_t v = next_u64();
    std::memcpy(&h[i], &v, 8);
  }
  const guild::TensorTypeInfo& ti = guild::tensor_type_info(type);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = h.data() + r * stride;
    for (int64_t b = 0; b < n_in / ti.block_elems; ++b) {
      uint8_t* blk = row + b * ti.block_bytes;
      auto put = [&](int off, float v) { const uint16_t x = guild::f32_to_fp16(v); std::memcpy(blk + off, &x, 2); };
      switch (type) {
        case 12: case 13: put(0, 5e-4f); put(2, 3e-4f); break;  // Q4_K, Q5_K
        case 14: put(208, 5e-5f); break;                           // Q6_K
        case 8: case 2: case 6: put(0, 1e-3f); break;              // Q8_0, Q4_0, Q5_0
        case 1: put(0, next_normal() * 0.02f); break;              // F16
        case 30: { const uint16_t x = guild::f32_to_bf16(0.01f); std::memcpy(blk, &x, 2); break; }
        case 0: { const float x = 0.01f; std::memcpy(blk, &x, 4); break; }
      }
    }
  }
  Weights w;
  w.bytes = rb * n_out * n_expert;
  CK(cudaMalloc(&w.d, h.size() * n_copies));
  for (int c = 0; c < n_copies; ++c)
    CK(cudaMemcpy(static_cast<uint8_t*>(w.d) + c * h.size(), h.data(), h.size(), cudaMemcpyHostToDevice));
  w.m.data = w.d;
  w.m.type = type;
  w.m.n_in = n_in;
  w.m.n_out = n_out;
  w.m.row_stride = stride;
  w.m.expert_stride = n_expert > 1 ? stride * n_out : 0;
  w.m.n_expert = n_expert;
  return w;
}

struct Act {
  float* f32 = nullptr;
  int8_t* qs = nullptr;
  uint32_t* ds = nullptr;
  uint16_t* f16 = nullptr;
  gc::ActView v;
  Act(int rows, int n) {
    std::vector<float> h(static_cast<size_t>(rows) * n);
    for (float& x : h) x = next_normal();
    CK(cudaMalloc(&f32, h.size() * 4));
    CK(cudaMemcpy(f32, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&qs, h.size()));
    CK(cudaMalloc(&ds, h.size() / 32 * 4 + 4));
    CK(cudaMalloc(&f16, h.size() * 2));
    v.f32 = f32; v.f32_stride = n;
    v.q8.qs = qs; v.q8.ds = ds; v.q8.qs_stride = n; v.q8.ds_stride = n / 32;
    v.f16 = f16; v.f16_stride = n;
    CK(gc::quantize_q8_1(f32, n, rows, n, v.q8, nullptr));
    CK(gc::convert_f16(f32, n, rows, n, f16, n, nullptr));
  }
  ~Act() { cudaFree(f32); cudaFree(qs); cudaFree(ds); cudaFree(f16); }
};

// Median time (ms) of `reps` runs of fn, each timed with events; fn enqueues on s.
template <typename F>
double time_ms(cudaStream_t s, int reps, F&& fn) {
  for (int i = 0; i < 3; ++i) fn();
  CK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a, s));
    fn();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Captures `count` calls of fn(i) into one graph and returns the median time per call (ms).
template <typename F>
double graph_time_per_call(cudaStream_t s, int count, int reps, F&& fn) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < count; ++i) fn(i);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  const double ms = time_ms(s, reps, [&] { CK(cudaGraphLaunch(ge, s)); });
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return ms / count;
}

struct Row { std::string what; double value; const char* unit; double ceiling_pct; };
std::vector<Row> g_rows;

void report(const std::string& what, double value, const char* unit, double ceiling) {
  const double pct = ceiling > 0 ? 100.0 * value / ceiling : -1.0;
  g_rows.push_back({what, value, unit, pct});
  if (pct >= 0) std::printf("%-58s %10.1f %-8s (%5.1f %% of %.0f)\n", what.c_str(), value, unit, pct, ceiling);
  else std::printf("%-58s %10.1f %s\n", what.c_str(), value, unit);
  std::fflush(stdout);
}

const char* tname(uint32_t t) { return guild::tensor_type_name(t).data(); }

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 5 : 20;
  int n_dev = 0;
  if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, cc %d.%d, %d SMs, L2 %.0f MiB, %.1f GiB\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, prop.l2CacheSize / 1048576.0, prop.totalGlobalMem / 1073741824.0);
  CK(gc::kernels_init(gc::KernelSwitches{guild::tuning().cuda_pdl, guild::tuning().gemm_direct}));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // HBM ceiling: a 2 GiB device-to-device copy, bytes read + written.
  double hbm = 0;
  {
    const size_t bytes = size_t(1) << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    const double ms = time_ms(s, reps, [&] { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); });
    hbm = 2.0 * bytes / (ms * 1e-3) / 1e9;
    report("HBM copy (read + write)", hbm, "GB/s", 0);
    cudaFree(a);
    cudaFree(b);
  }
  const double ceiling = hbm > 0 ? hbm : 4200.0;

  // Decode GEMV.
  Act x1(8, 4096);
  float* y;
  CK(cudaMalloc(&y, sizeof(float) * 8 * 151936));
  for (uint32_t type : {12u, 14u, 8u, 1u}) {
    // 2048 x 768, rotated over copies totalling > 256 MiB.
    {
      const int64_t n_in = 2048, n_out = 768;
      uint64_t rb = 0;
      guild::tensor_row_bytes(type, n_in, &rb);
      const size_t one = ((rb + 15) / 16 * 16) * n_out;
      const int copies = static_cast<int>(std::max<size_t>(8, (size_t(256) << 20) / one));
      Weights w = make_weights(type, n_in, n_out, copies);
      const double per = graph_time_per_call(s, copies, reps, [&](int i) {
        gc::DevMatrix m = w.m;
        m.data = static_cast<const uint8_t*>(w.d) + static_cast<size_t>(i) * one;
        CK(gc::gemv(m, x1.v, 1, y, n_out, false, s));
      });
      report(std::string("gemv ") + tname(type) + " 2048x768 (graph, L2-cold)", w.bytes / (per * 1e-3) / 1e9, "GB/s",
             ceiling);
      report(std::string("gemv ") + tname(type) + " 2048x768 time per call", per * 1e3, "us", 0);
      cudaFree(w.d);
    }
    // 2048 x 151936 (an lm_head), 1 and 4 columns.
    {
      Weights w = make_weights(type, 2048, 151936);
      for (int cols : {1, 4}) {
        const double ms = time_ms(s, reps, [&] { CK(gc::gemv(w.m, x1.v, cols, y, 151936, false, s)); });
        report(std::string("gemv ") + tname(type) + " 2048x151936 x" + std::to_string(cols), w.bytes / (ms * 1e-3) / 1e9,
               "GB/s", ceiling);
      }
      cudaFree(w.d);
    }
  }

  // One decode step of grouped experts: 8 of 128, gate+up GLU 2048 -> 768, then down 768 -> 2048 (Q4_K).
  {
    const int n_expert = 128, k = 8;
    Weights wg = make_weights(12, 2048, 768, 1, n_expert), wu = make_weights(12, 2048, 768, 1, n_expert);
    Weights wd = make_weights(12, 768, 2048, 1, n_expert);
    int32_t *ids, *offsets, *slots, *active, *counters, *tiles;
    float *wts, *h, *yd;
    const int max_tiles = gc::moe_max_tiles(512, k, n_expert);
    CK(cudaMalloc(&ids, 512 * k * 4)); CK(cudaMalloc(&offsets, (n_expert + 1) * 4)); CK(cudaMalloc(&slots, 512 * k * 4));
    CK(cudaMalloc(&active, n_expert * 4)); CK(cudaMalloc(&counters, 8)); CK(cudaMalloc(&tiles, max_tiles * 4));
    CK(cudaMalloc(&wts, 512 * k * 4)); CK(cudaMalloc(&h, sizeof(float) * 512 * k * 768)); CK(cudaMalloc(&yd, sizeof(float) * 512 * k * 2048));
    gc::MoeGroups g;
    g.ids = ids; g.weights = wts; g.offsets = offsets; g.slots = slots; g.active = active; g.counters = counters;
    g.tiles = tiles; g.max_tiles = max_tiles;
    std::vector<int32_t> hid(1 * k);
    for (int j = 0; j < k; ++j) hid[j] = (j * 37 + 5) % n_expert;
    CK(cudaMemcpy(ids, hid.data(), hid.size() * 4, cudaMemcpyHostToDevice));
    CK(gc::moe_group(g, 1, k, n_expert, s));
    Act hx(512 * k, 768);
    const double ms_glu = time_ms(s, reps, [&] { CK(gc::moe_gemv_glu(wg.m, wu.m, x1.v, g, k, k, 1, h, 768, s)); });
    const double bytes_glu = 2.0 * k * (wg.bytes / n_expert);
    report("moe_gemv_glu q4_K 8 of 128 experts 2048->768 x2", bytes_glu / (ms_glu * 1e-3) / 1e9, "GB/s", ceiling);
    const double ms_down = time_ms(s, reps, [&] { CK(gc::moe_gemv(wd.m, hx.v, g, 1, k, 1, yd, 2048, s)); });
    report("moe_gemv q4_K 8 of 128 experts 768->2048", k * (wd.bytes / n_expert) / (ms_down * 1e-3) / 1e9, "GB/s", ceiling);
    // The decode path: choices straight from the routing, down + weighted sum in one pass.
    const double ms_glu_d = time_ms(s, reps, [&] { CK(gc::moe_gemv_glu_direct(wg.m, wu.m, x1.v, ids, k, k, h, 768, s)); });
    report("moe_gemv_glu_direct q4_K 8 of 128 2048->768 x2", bytes_glu / (ms_glu_d * 1e-3) / 1e9, "GB/s", ceiling);
    const double ms_comb = time_ms(s, reps, [&] { CK(gc::moe_gemv_combine(wd.m, hx.v, ids, wts, k, yd, s)); });
    report("moe_gemv_combine q4_K 8 of 128 768->2048", k * (wd.bytes / n_expert) / (ms_comb * 1e-3) / 1e9, "GB/s", ceiling);

    // Prefill: 512 tokens, 8 of 128 experts each (uniform random routing).
    std::vector<int32_t> pid(512 * k);
    for (int t = 0; t < 512; ++t) {
      std::vector<int> perm(n_expert);
      for (int e = 0; e < n_expert; ++e) perm[e] = e;
      for (int j = 0; j < k; ++j) std::swap(perm[j], perm[j + next_u64() % (n_expert - j)]);
      for (int j = 0; j < k; ++j) pid[t * k + j] = perm[j];
    }
    CK(cudaMemcpy(ids, pid.data(), pid.size() * 4, cudaMemcpyHostToDevice));
    CK(gc::moe_group(g, 512, k, n_expert, s));
    Act px(512, 2048);
    const double ms_mg = time_ms(s, reps, [&] { CK(gc::moe_gemm(wg.m, px.v, g, k, h, 768, s)); });
    report("moe_gemm q4_K 512 tok x 8 of 128 experts 2048->768", 2.0 * 512 * k * 768 * 2048 / (ms_mg * 1e-3) / 1e12,
           "TFLOP/s", 0);
    const double ms_pglu = time_ms(s, reps, [&] { CK(gc::moe_gemm_glu(wg.m, wu.m, px.v, g, k, h, 768, s)); });
    report("moe_gemm_glu q4_K 512 tok x 8 of 128 (gate+up+SwiGLU)", 2.0 * 2.0 * 512 * k * 768 * 2048 / (ms_pglu * 1e-3) / 1e12,
           "TFLOP/s", 0);
    const double ms_grp = time_ms(s, reps, [&] { CK(gc::moe_group(g, 512, k, n_expert, s)); });
    report("moe_group 512 tok x 8 of 128", ms_grp * 1e3, "us", 0);
    for (void* p : {(void*)ids, (void*)offsets, (void*)slots, (void*)active, (void*)counters, (void*)tiles, (void*)wts,
                    (void*)h, (void*)yd, wg.d, wu.d, wd.d})
      cudaFree(p);
  }

  // Prefill GEMM: 512 tokens, 2048 -> 4096.
  {
    Act px(512, 2048);
    float* yy;
    CK(cudaMalloc(&yy, sizeof(float) * 512 * 4096));
    for (uint32_t type : {12u, 14u, 8u, 1u}) {
      Weights w = make_weights(type, 2048, 4096);
      const double ms = time_ms(s, reps, [&] { CK(gc::gemm(w.m, px.v, 512, yy, 4096, false, s)); });
      report(std::string("gemm ") + tname(type) + " 512 tok 2048->4096", 2.0 * 512 * 2048 * 4096 / (ms * 1e-3) / 1e12,
             "TFLOP/s", 0);
      cudaFree(w.d);
    }
    // The shapes beside them in a prefill layer: k/v projections (few rows) and the F32 router.
    {
      Weights w = make_weights(14u, 2048, 512);
      const double ms = time_ms(s, reps, [&] { CK(gc::gemm(w.m, px.v, 512, yy, 512, false, s)); });
      report("gemm q6_K 512 tok 2048->512", 2.0 * 512 * 2048 * 512 / (ms * 1e-3) / 1e12, "TFLOP/s", 0);
      cudaFree(w.d);
    }
    {
      Weights w = make_weights(0u, 2048, 128);
      const double ms = time_ms(s, reps, [&] { CK(gc::gemm(w.m, px.v, 512, yy, 128, false, s)); });
      report("gemm f32 512 tok 2048->128 (router)", ms * 1e3, "us", 0);
      cudaFree(w.d);
    }
    cudaFree(yy);
  }

  // Attention: prefill 512 tokens x 32 heads (4 KV heads) x 128, and decode at 4096 positions.
  {
    const int n_head = 32, n_kv = 4, D = 128, n_ctx = 4096;
    uint16_t *kc, *vc;
    const size_t kv_elems = static_cast<size_t>(n_ctx) * n_kv * D;
    CK(cudaMalloc(&kc, kv_elems * 2));
    CK(cudaMalloc(&vc, kv_elems * 2));
    std::vector<uint16_t> hk(kv_elems);
    for (auto& v : hk) v = guild::f32_to_fp16(next_normal());
    CK(cudaMemcpy(kc, hk.data(), kv_elems * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(vc, hk.data(), kv_elems * 2, cudaMemcpyHostToDevice));
    Act q(512, n_head * D);
    float* out;
    CK(cudaMalloc(&out, sizeof(float) * 512 * n_head * D));
    int32_t* pos0;
    CK(cudaMalloc(&pos0, 4));
    CK(cudaMemset(pos0, 0, 4));
    gc::AttnArgs a;
    a.q = q.f32; a.q_stride = n_head * D; a.k_cache = kc; a.v_cache = vc; a.n_head = n_head; a.n_head_kv = n_kv;
    a.head_dim = D; a.n_ctx = n_ctx; a.scale = 0.088f; a.out = out; a.out_stride = n_head * D;
    const double ms = time_ms(s, reps, [&] { CK(gc::attention_prefill(a, pos0, 512, s)); });
    const double flops = 4.0 * n_head * D * (512.0 * 513.0 / 2.0);
    report("attention_prefill 512 tok, 32x128 heads, causal", flops / (ms * 1e-3) / 1e12, "TFLOP/s", 0);
    float* work;
    CK(cudaMalloc(&work, gc::attention_decode_workspace_floats(n_head, D, n_ctx) * 4));
    CK(cudaMemset(work, 0, gc::attention_decode_workspace_floats(n_head, D, n_ctx) * 4));
    const int32_t last = n_ctx - 1;
    CK(cudaMemcpy(pos0, &last, 4, cudaMemcpyHostToDevice));
    const double md = time_ms(s, reps, [&] { CK(gc::attention_decode(a, pos0, work, nullptr, s)); });
    report("attention_decode 4096 positions, 32x128 heads (us)", md * 1e3, "us", 0);
    report("attention_decode 4096 positions KV read", 2.0 * kv_elems * 2 / (md * 1e-3) / 1e9, "GB/s", ceiling);
    for (void* p : {(void*)kc, (void*)vc, (void*)out, (void*)pos0, (void*)work}) cudaFree(p);
  }
  cudaFree(y);

  std::printf("\n== summary (%s) ==\n", prop.name);
  std::printf("%-58s %10s %-8s %s\n", "measurement", "value", "unit", "of HBM");
  for (const Row& r : g_rows) {
    if (r.ceiling_pct >= 0) std::printf("%-58s %10.1f %-8s %5.1f %%\n", r.what.c_str(), r.value, r.unit, r.ceiling_pct);
    else std::printf("%-58s %10.1f %-8s\n", r.what.c_str(), r.value, r.unit);
  }
  return 0;
}
