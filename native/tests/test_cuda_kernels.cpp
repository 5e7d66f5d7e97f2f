// Every CUDA kernel against the CPU reference (the cpu-generic kernel table's
// dequantizers / quantizers and the ops in native/src/ops), on fresh random
// inputs, every supported weight type, odd shapes (rows not a multiple of the
// tiles, 1 / 3 / 8 / 17 / 512 tokens). Outputs are poisoned (NaN-filled) before
// each run, so an unwritten element fails the check. Skips (exit 77) without
// a CUDA device.
//
// Measure: relative error |out - ref|_2 / |ref|_2 against a double-precision
// reference built from the dequantized weights. Tolerances (docs/CUDA.md):
//  * matrix-vector, quantized weights (Q8_1 activations):    2e-2
//    (int8 activation rounding, ~0.5% rms for Gaussian data; the CPU path's
//    own Q8_0/Q8_K rounding is of the same size and is printed alongside)
//  * matrix-vector, F32/F16/BF16 weights (float activations): 1e-5
//  * tensor-core matrix-matrix (fp16 operands, fp32 accumulate): 3e-3
//  * F32 matrix-matrix (fp32 SIMT): 1e-5
//  * attention decode (fp32 math over the fp16 cache): 1e-4; prefill (fp16 Q, P): 5e-3
//  * RMSNorm, RoPE, SwiGLU, combine: 1e-5; q/k post-processing into fp16: 2e-3
//  * embedding rows: bit-exact; routing ids, grouping, argmax: exact.
#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "check.h"
#include "core/fp16.h"
#include "core/tuning.h"
#include "core/kernel_table.h"
#include "core/quant_blocks.h"
#include "core/tensor_type.h"
#include "core/thread_pool.h"
#include "cuda/cuda_decoder.h"
#include "cuda/cuda_kernels.h"
#include "cuda/f16_fallback.h"
#include "cuda/weight_layout.h"
#include "ops/attention.h"
#include "ops/glu.h"
#include "ops/moe.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "runtime/kv_cache.h"
#include "runtime/model.h"

using namespace guild;
namespace gc = guild::cuda;

namespace {

using Rng = std::mt19937_64;
// One fixed seed by default, so a run's inputs (and any failure) repeat
// exactly; GUILD_TEST_SEED=N draws other inputs (printed at the start).
uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("GUILD_TEST_SEED");
    const uint64_t s = env && *env ? std::strtoull(env, nullptr, 10) : 0x6a09e667f3bcc908ull;
    std::printf("  random inputs: seed %llu (GUILD_TEST_SEED)\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}
Rng& rng() {
  static Rng r(test_seed());
  return r;
}
float normal(float s = 1.0f) { return std::normal_distribution<float>(0.0f, s)(rng()); }
float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng()); }

void need_gpu() {
  static bool ok = [] {
    std::string why;
    if (!gc::cuda_available(&why)) check::skip_all(why);
    cudaSetDevice(0);
    // The knobs as the runtime reads them: test_cuda_kernels_gemm_tile_path
    // runs this file with GUILD_GEMM_DIRECT=0 (the tile path for every type).
    const guild::Tuning& t = guild::tuning();
    return gc::kernels_init(gc::KernelSwitches{t.cuda_pdl, t.gemm_direct}) == cudaSuccess;
  }();
  if (!ok) check::skip_all("kernels_init failed");
}

#define CUDA_OK(expr)                                                                           \
  do {                                                                                          \
    const cudaError_t e_ = (expr);                                                              \
    CHECK_MSG(e_ == cudaSuccess, "%s -> %s", #expr, cudaGetErrorString(e_));                    \
  } while (0)

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    if (cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(1, n) * sizeof(T)) != cudaSuccess) p = nullptr;
    poison();
  }
  Dev(const std::vector<T>& v) : Dev(v.size()) { up(v); }
  ~Dev() { if (p) cudaFree(p); }
  Dev(const Dev&) = delete;
  void up(const std::vector<T>& v) { cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> down() const {
    std::vector<T> v(n);
    cudaDeviceSynchronize();
    cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  void poison() { if (p) cudaMemset(p, 0xFF, std::max<size_t>(1, n) * sizeof(T)); }  // floats: NaN
  void zero() { if (p) cudaMemset(p, 0, std::max<size_t>(1, n) * sizeof(T)); }  // e.g. a workspace's counters
};

double rel_err(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (std::isnan(num)) return NAN;
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// For few outputs a random dot can cancel to near zero; the error is then
// measured against the typical size of the outputs, sqrt(sum |W_r|^2 |x_c|^2 / n_in).
double rel_err_floor(const std::vector<float>& got, const std::vector<double>& ref, double floor) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (std::isnan(num)) return NAN;
  return std::sqrt(num) / std::max({std::sqrt(den), floor, 1e-30});
}

std::vector<float> randn(size_t n, float s = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = normal(s);
  return v;
}

// ---- random weights ------------------------------------------------------------------------

uint16_t rand_h(float lo, float hi, bool sign) {
  float v = uniform(lo, hi);
  if (sign && (rng()() & 1)) v = -v;
  return f32_to_fp16(v);
}

struct TypeCase { TensorType type; const char* name; };
// Every type the CPU runs (docs/QUANT_TYPES.md): each has its own CUDA kernels.
const TypeCase kTypes[] = {
    {TensorType::F32, "f32"},         {TensorType::F16, "f16"},         {TensorType::BF16, "bf16"},
    {TensorType::Q4_0, "q4_0"},       {TensorType::Q4_1, "q4_1"},       {TensorType::Q5_0, "q5_0"},
    {TensorType::Q5_1, "q5_1"},       {TensorType::Q8_0, "q8_0"},       {TensorType::IQ4_NL, "iq4_nl"},
    {TensorType::MXFP4, "mxfp4"},     {TensorType::Q2_K, "q2_K"},       {TensorType::Q3_K, "q3_K"},
    {TensorType::Q4_K, "q4_K"},       {TensorType::Q5_K, "q5_K"},       {TensorType::Q6_K, "q6_K"},
    {TensorType::IQ4_XS, "iq4_xs"},   {TensorType::IQ2_XXS, "iq2_xxs"}, {TensorType::IQ2_XS, "iq2_xs"},
    {TensorType::IQ2_S, "iq2_s"},     {TensorType::IQ3_XXS, "iq3_xxs"}, {TensorType::IQ3_S, "iq3_s"},
    {TensorType::IQ1_S, "iq1_s"},     {TensorType::IQ1_M, "iq1_m"},     {TensorType::TQ1_0, "tq1_0"},
    {TensorType::TQ2_0, "tq2_0"},
};

bool is_float(TensorType t) { return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16; }
// 256-element super-blocks (K-quants, IQ4_XS, the grid and ternary types): rows are multiples of 256.
bool super_block(TensorType t) { return tensor_type_info(t).block_elems == 256; }

// IQ1_M stores its fp16 super-scale in the top nibbles of the four u16 words
// of scales (iq1m_super_scale): nibble k of h into word k.
void set_iq1m_super_scale(BlockIQ1_M* b, uint16_t h) {
  for (int k = 0; k < 4; ++k) {
    uint16_t w;
    std::memcpy(&w, b->scales + 2 * k, 2);
    w = static_cast<uint16_t>((w & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
    std::memcpy(b->scales + 2 * k, &w, 2);
  }
}

// rows x n_in weights of type t: host rows of row_bytes, their float values.
struct HostMatrix {
  TensorType type;
  int64_t n_in = 0, rows = 0;
  size_t row_bytes = 0, stride = 0;
  std::vector<uint8_t> bytes;   // contiguous rows
  std::vector<float> deq;       // rows x n_in
};

HostMatrix random_matrix(TensorType t, int64_t n_in, int64_t rows) {
  HostMatrix m;
  m.type = t;
  m.n_in = n_in;
  m.rows = rows;
  uint64_t rb = 0;
  tensor_row_bytes(static_cast<uint32_t>(t), n_in, &rb);
  m.row_bytes = rb;
  m.stride = (rb + 15) / 16 * 16;
  m.bytes.resize(rb * rows);
  const TensorTypeInfo& ti = tensor_type_info(t);
  uint8_t* p = m.bytes.data();
  const int64_t n_blocks = rows * (n_in / ti.block_elems);
  for (int64_t b = 0; b < n_blocks; ++b, p += ti.block_bytes) {
    for (uint32_t i = 0; i < ti.block_bytes; ++i) p[i] = static_cast<uint8_t>(rng()());
    switch (t) {
      case TensorType::F32: { float v = normal(); std::memcpy(p, &v, 4); break; }
      case TensorType::F16: { uint16_t h = f32_to_fp16(normal()); std::memcpy(p, &h, 2); break; }
      case TensorType::BF16: { uint16_t h = f32_to_bf16(normal()); std::memcpy(p, &h, 2); break; }
      case TensorType::Q4_0: reinterpret_cast<BlockQ4_0*>(p)->d = rand_h(1e-3f, 2e-2f, true); break;
      case TensorType::Q5_0: reinterpret_cast<BlockQ5_0*>(p)->d = rand_h(1e-3f, 2e-2f, true); break;
      case TensorType::Q8_0: reinterpret_cast<BlockQ8_0*>(p)->d = rand_h(1e-4f, 2e-3f, true); break;
      case TensorType::Q4_K:
        reinterpret_cast<BlockQ4_K*>(p)->d = rand_h(1e-4f, 1e-3f, false);
        reinterpret_cast<BlockQ4_K*>(p)->dmin = rand_h(1e-4f, 1e-3f, false);
        break;
      case TensorType::Q5_K:
        reinterpret_cast<BlockQ5_K*>(p)->d = rand_h(1e-4f, 1e-3f, false);
        reinterpret_cast<BlockQ5_K*>(p)->dmin = rand_h(1e-4f, 1e-3f, false);
        break;
      case TensorType::Q6_K: reinterpret_cast<BlockQ6_K*>(p)->d = rand_h(1e-5f, 1e-4f, true); break;
      // The other bytes (quants, grid indices, signs, packed scales) are valid
      // whatever their value: every index field is exactly as wide as its
      // table. Only the scales are drawn so that values stay O(0.01..1).
      case TensorType::Q4_1:
        reinterpret_cast<BlockQ4_1*>(p)->d = rand_h(1e-3f, 2e-2f, false);
        reinterpret_cast<BlockQ4_1*>(p)->m = rand_h(5e-3f, 0.15f, true);
        break;
      case TensorType::Q5_1:
        reinterpret_cast<BlockQ5_1*>(p)->d = rand_h(5e-4f, 1e-2f, false);
        reinterpret_cast<BlockQ5_1*>(p)->m = rand_h(5e-3f, 0.15f, true);
        break;
      case TensorType::IQ4_NL: reinterpret_cast<BlockIQ4_NL*>(p)->d = rand_h(1e-4f, 2e-3f, true); break;
      case TensorType::MXFP4: reinterpret_cast<BlockMXFP4*>(p)->e = static_cast<uint8_t>(118 + rng()() % 8); break;
      case TensorType::Q2_K:
        reinterpret_cast<BlockQ2_K*>(p)->d = rand_h(1e-3f, 1e-2f, false);
        reinterpret_cast<BlockQ2_K*>(p)->dmin = rand_h(1e-3f, 1e-2f, false);
        break;
      case TensorType::Q3_K: reinterpret_cast<BlockQ3_K*>(p)->d = rand_h(1e-4f, 1e-3f, true); break;
      case TensorType::IQ4_XS: reinterpret_cast<BlockIQ4_XS*>(p)->d = rand_h(1e-5f, 1e-4f, true); break;
      case TensorType::IQ2_XXS: reinterpret_cast<BlockIQ2_XXS*>(p)->d = rand_h(1e-3f, 1e-2f, true); break;
      case TensorType::IQ2_XS: reinterpret_cast<BlockIQ2_XS*>(p)->d = rand_h(1e-3f, 1e-2f, true); break;
      case TensorType::IQ2_S: reinterpret_cast<BlockIQ2_S*>(p)->d = rand_h(1e-3f, 1e-2f, true); break;
      case TensorType::IQ3_XXS: reinterpret_cast<BlockIQ3_XXS*>(p)->d = rand_h(1e-3f, 5e-3f, true); break;
      case TensorType::IQ3_S: reinterpret_cast<BlockIQ3_S*>(p)->d = rand_h(1e-4f, 2e-3f, true); break;
      case TensorType::IQ1_S: reinterpret_cast<BlockIQ1_S*>(p)->d = rand_h(1e-3f, 3e-2f, true); break;
      case TensorType::IQ1_M: set_iq1m_super_scale(reinterpret_cast<BlockIQ1_M*>(p), rand_h(1e-3f, 3e-2f, true)); break;
      case TensorType::TQ1_0: reinterpret_cast<BlockTQ1_0*>(p)->d = rand_h(1e-3f, 2e-2f, true); break;
      case TensorType::TQ2_0: reinterpret_cast<BlockTQ2_0*>(p)->d = rand_h(1e-3f, 2e-2f, true); break;
      default: break;
    }
  }
  const CpuKernelTable& g = cpu_kernels_generic();
  m.deq.resize(static_cast<size_t>(rows) * n_in);
  for (int64_t r = 0; r < rows; ++r)
    g.types[static_cast<uint32_t>(t)].dequant_row(m.bytes.data() + r * rb, m.deq.data() + r * n_in, n_in);
  return m;
}

// Device copy with padded rows.
struct DevMatrixBuf {
  Dev<uint8_t> buf;
  gc::DevMatrix m;
  DevMatrixBuf(const HostMatrix& h, int n_expert = 1) : buf(h.stride * h.rows) {
    cudaMemcpy2D(buf.p, h.stride, h.bytes.data(), h.row_bytes, h.row_bytes, h.rows, cudaMemcpyHostToDevice);
    m.data = buf.p;
    m.type = static_cast<uint32_t>(h.type);
    m.n_in = h.n_in;
    m.n_out = h.rows / n_expert;
    m.row_stride = h.stride;
    m.expert_stride = n_expert > 1 ? h.stride * m.n_out : 0;
    m.n_expert = n_expert;
  }
};

// Activations on device in every format.
struct DevAct {
  int rows, n;
  Dev<float> f32;
  Dev<int8_t> qs;
  Dev<uint32_t> ds;
  Dev<uint16_t> f16;
  gc::ActView view;
  DevAct(const std::vector<float>& x, int rows_, int n_)
      : rows(rows_), n(n_), f32(x), qs(static_cast<size_t>(rows_) * ((n_ + 31) / 32 * 32)),
        ds(static_cast<size_t>(rows_) * ((n_ + 31) / 32)), f16(static_cast<size_t>(rows_) * n_) {
    view.f32 = f32.p;
    view.f32_stride = n;
    view.q8.qs = qs.p;
    view.q8.ds = ds.p;
    view.q8.qs_stride = (n + 31) / 32 * 32;
    view.q8.ds_stride = (n + 31) / 32;
    view.f16 = f16.p;
    view.f16_stride = n;
    if (n % 32 == 0) CUDA_OK(gc::quantize_q8_1(f32.p, n, rows, n, view.q8, nullptr));
    CUDA_OK(gc::convert_f16(f32.p, n, rows, n, f16.p, n, nullptr));
  }
};

// y[c][r] = y0[c][r] + sum_k W[r][k] x[act_row(c)][k], in double.
std::vector<double> ref_matmul(const HostMatrix& w, int64_t row0, int64_t n_out, const std::vector<float>& x, int n_in,
                               const std::vector<int>& act_rows, const std::vector<float>* y0) {
  std::vector<double> y(act_rows.size() * n_out);
  for (size_t c = 0; c < act_rows.size(); ++c) {
    const float* a = x.data() + static_cast<int64_t>(act_rows[c]) * n_in;
    for (int64_t r = 0; r < n_out; ++r) {
      const float* wr = w.deq.data() + (row0 + r) * w.n_in;
      double s = 0.0;
      for (int k = 0; k < n_in; ++k) s += static_cast<double>(wr[k]) * a[k];
      y[c * n_out + r] = s + (y0 ? (*y0)[c * n_out + r] : 0.0);
    }
  }
  return y;
}

// The CPU kernel table's own result (activations in the type's vec_dot_type), for comparison.
double cpu_path_err(const HostMatrix& w, const std::vector<float>& x, int cols, const std::vector<double>& ref) {
  const CpuKernelTable& g = cpu_kernels_generic();
  const TypeKernels& k = g.types[static_cast<uint32_t>(w.type)];
  uint64_t ab = 0;
  tensor_row_bytes(static_cast<uint32_t>(k.vec_dot_type), w.n_in, &ab);
  std::vector<uint8_t> act(ab);
  std::vector<float> y(static_cast<size_t>(cols) * w.rows);
  for (int c = 0; c < cols; ++c) {
    if (k.vec_dot_type == TensorType::F32) std::memcpy(act.data(), x.data() + c * w.n_in, w.n_in * 4);
    else g.quantize_act[static_cast<uint32_t>(k.vec_dot_type)](x.data() + c * w.n_in, act.data(), w.n_in);
    for (int64_t r = 0; r < w.rows; ++r) y[c * w.rows + r] = k.vec_dot(w.n_in, w.bytes.data() + r * w.row_bytes, act.data());
  }
  return rel_err(y, ref);
}

// What a quantized-weight kernel multiplies: the activations as the Q8_1
// blocks it reads hold them (the CPU's Q8_1 quantizer, which the GPU's matches
// exactly: quantize_q8_1_matches_cpu). A reference over these values leaves
// only the kernel's own arithmetic in the error, so its tolerance is tight and
// does not depend on how a random input happens to round to int8.
std::vector<float> kernel_input(const std::vector<float>& x, int rows, int64_t n, TensorType weights) {
  if (is_float(weights)) return x;
  const CpuKernelTable& g = cpu_kernels_generic();
  std::vector<float> out(x.size());
  std::vector<BlockQ8_1> q(static_cast<size_t>(n / 32));
  for (int r = 0; r < rows; ++r) {
    g.quantize_act[static_cast<uint32_t>(TensorType::Q8_1)](x.data() + r * n, q.data(), n);
    for (int64_t b = 0; b < n / 32; ++b)
      for (int i = 0; i < 32; ++i) out[r * n + 32 * b + i] = fp16_to_f32(q[b].d) * static_cast<float>(q[b].qs[i]);
  }
  return out;
}
// Kernel arithmetic against its own Q8_1 input (kernel_input): int8 dots are
// exact; what is left is float accumulation and the fp16 block sums that the
// offset and min terms use (a few 1e-4 of those terms; seen on the H200 with
// seeds 1-3: at most 8.3e-5).
constexpr double kQuantKernelTol = 1e-3;

struct Shape { int64_t n_in, n_out; };
std::vector<Shape> shapes_for(TensorType t) {
  if (super_block(t)) return {{256, 1}, {512, 37}, {2304, 300}};
  if (t == TensorType::F32) return {{40, 5}, {100, 37}, {800, 300}};
  if (t == TensorType::F16 || t == TensorType::BF16) return {{36, 5}, {96, 37}, {800, 300}};  // 36: tail path
  return {{32, 1}, {96, 37}, {800, 300}};
}

// A one-layer dense model of host tensors (matrices of `type`), for plan().
struct TinyModel {
  TinyModel(const TinyModel&) = delete;
  ModelHparams hp;
  ModelWeights w;
  std::vector<HostMatrix> mats;
  std::vector<std::vector<float>> vecs;
  explicit TinyModel(TensorType type) {
    hp.arch = "llama";
    hp.n_layer = 1;
    hp.n_embd = 256;
    hp.n_head = 4;
    hp.n_head_kv = 2;
    hp.head_dim_k = hp.head_dim_v = 64;
    hp.n_vocab = 64;
    hp.n_ff = 512;
    hp.rope.n_rot = 64;
    mats.reserve(9);
    vecs.reserve(3);
    auto mat = [&](int64_t n_in, int64_t n_out) {
      mats.push_back(random_matrix(type, n_in, n_out));
      const HostMatrix& h = mats.back();
      QMatrix m;
      m.data = h.bytes.data();
      m.type = static_cast<uint32_t>(type);
      m.n_in = n_in;
      m.n_out = n_out;
      m.row_bytes = h.row_bytes;
      return m;
    };
    auto vec = [&]() {
      vecs.push_back(randn(256));
      return vecs.back().data();
    };
    w.token_embd = mat(256, 64);
    w.output = mat(256, 64);
    w.output_norm = vec();
    LayerWeights l;
    l.attn_norm = vec();
    l.ffn_norm = vec();
    l.wq = mat(256, 256);
    l.wk = mat(256, 128);
    l.wv = mat(256, 128);
    l.wo = mat(256, 256);
    l.ffn_gate = mat(256, 512);
    l.ffn_up = mat(256, 512);
    l.ffn_down = mat(512, 256);
    w.layers.push_back(l);
  }
};

}  // namespace

// ---- the F16 upload fallback (no GPU needed for these two) -----------------------------------

// Every type's F16 upload rows (cuda/f16_fallback.h): each value the CPU's
// dequantizer gives, rounded to fp16, and the row padding zero. A type
// without a CPU dequantizer (Q8_K, an activation type) is refused.
TEST(f16_upload_fallback_matches_cpu_dequant) {
  for (const TypeCase& tc : kTypes) {
    const int64_t n_in = super_block(tc.type) ? 512 : 96, rows = 7;
    const uint32_t type = static_cast<uint32_t>(tc.type);
    HostMatrix w = random_matrix(tc.type, n_in, rows);
    const size_t stride = (static_cast<size_t>(n_in) * 2 + 15) / 16 * 16 + 16;
    std::vector<uint8_t> out(stride * rows, 0xAB);
    std::vector<float> scratch(static_cast<size_t>(n_in));
    CHECK_MSG(gc::f16_fallback_available(type), "%s: no F16 fallback", tc.name);
    CHECK(gc::dequant_rows_f16(type, w.bytes.data(), w.row_bytes, n_in, rows, out.data(), stride, scratch.data()));
    int bad = 0, bad_pad = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = out.data() + r * stride;
      for (int64_t i = 0; i < n_in; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        bad += h != f32_to_fp16(w.deq[r * n_in + i]);
      }
      for (size_t b = static_cast<size_t>(n_in) * 2; b < stride; ++b) bad_pad += row[b] != 0;
    }
    CHECK_MSG(bad == 0 && bad_pad == 0, "F16 upload %s: %d values, %d padding bytes differ", tc.name, bad, bad_pad);
  }
  const uint32_t q8k = static_cast<uint32_t>(TensorType::Q8_K);
  std::vector<uint8_t> blk(292), out(512);
  std::vector<float> scratch(256);
  CHECK(!gc::f16_fallback_available(q8k));
  CHECK(!gc::dequant_rows_f16(q8k, blk.data(), 292, 256, 1, out.data(), 512, scratch.data()));
}

// The memory plan of a tensor that takes the fallback: an F16 copy (n_in
// halves per row, 16-byte padded) in the weight arena, the kernels told F16;
// the vectors and unforced types unchanged. A type neither the kernels nor
// the CPU handle fails the plan with the tensor's name.
TEST(plan_sizes_the_f16_upload) {
  TinyModel tm(TensorType::Q4_K);
  gc::CudaDecoderOptions o;
  o.n_ctx = 64;
  o.max_tokens = 8;
  std::string err;
  gc::Layout native, forced;
  REQUIRE(gc::plan(tm.hp, tm.w, o, &native, &err));
  gc::UploadPolicy policy;
  policy.force_f16_types = uint64_t{1} << static_cast<uint32_t>(TensorType::Q4_K);
  REQUIRE(gc::plan(tm.hp, tm.w, o, &forced, &err, policy));
  CHECK(native.f16_uploads == 0);
  CHECK_MSG(forced.f16_uploads == 9, "%d tensors took the fallback, want the 9 matrices", forced.f16_uploads);
  REQUIRE(native.uploads.size() == forced.uploads.size());
  size_t f16_bytes = 0, native_bytes = 0;
  for (size_t i = 0; i < forced.uploads.size(); ++i) {
    const gc::Upload& n = native.uploads[i];
    const gc::Upload& f = forced.uploads[i];
    CHECK(n.src == f.src && n.rows == f.rows && n.row_bytes == f.row_bytes);
    if (n.n_in == 0) {  // a norm vector: as it is
      CHECK(!f.to_f16 && f.stride == n.stride);
      continue;
    }
    CHECK(!n.to_f16 && n.dev_type == static_cast<uint32_t>(TensorType::Q4_K) && n.stride == (n.row_bytes + 15) / 16 * 16);
    CHECK(f.to_f16 && f.src_type == static_cast<uint32_t>(TensorType::Q4_K) &&
          f.dev_type == static_cast<uint32_t>(TensorType::F16));
    CHECK_MSG(f.stride == (static_cast<size_t>(f.n_in) * 2 + 15) / 16 * 16, "F16 stride %zu for %lld elements", f.stride,
              (long long)f.n_in);
    CHECK(i == 0 || f.offset >= forced.uploads[i - 1].offset + forced.uploads[i - 1].bytes());
    f16_bytes += f.bytes();
    native_bytes += n.bytes();
  }
  CHECK(forced.weight_bytes >= f16_bytes && f16_bytes > native_bytes);
  CHECK_MSG(forced.weight_bytes > native.weight_bytes, "weights %zu with F16 copies, %zu as stored",
            forced.weight_bytes, native.weight_bytes);

  // Q8_K (an activation type: no kernel, no CPU dequantizer) in one tensor.
  TinyModel bad(TensorType::Q4_K);
  std::vector<uint8_t> q8k(292 * 256);
  bad.w.layers[0].wq.data = q8k.data();
  bad.w.layers[0].wq.type = static_cast<uint32_t>(TensorType::Q8_K);
  bad.w.layers[0].wq.row_bytes = 292;
  gc::Layout none;
  CHECK(!gc::plan(bad.hp, bad.w, o, &none, &err));
  CHECK_MSG(err.find("blk.0.attn_q") != std::string::npos && err.find("no CUDA kernel and no CPU dequantizer") != std::string::npos,
            "error: %s", err.c_str());
}

TEST(device_present) {
  need_gpu();
  gc::DeviceInfo info;
  std::string why;
  CHECK_MSG(gc::device_info(0, &info, &why), "%s", why.c_str());
  std::printf("  device 0: %s, cc %d.%d, %d SMs, %.1f GiB\n", info.name.c_str(), info.cc_major, info.cc_minor,
              info.sm_count, info.total_bytes / 1073741824.0);
}

// fp16 conversion: the vector path (4 per thread) and the element path (odd
// strides and tails) give exactly the host's round-to-nearest conversion.
TEST(convert_f16_matches_host) {
  need_gpu();
  struct Case { int rows, n; int64_t x_stride, y_stride; };
  for (const Case c : {Case{3, 37, 41, 40}, Case{5, 2048, 2048, 2056}, Case{2, 1030, 1031, 1030}, Case{2, 1030, 1032, 1036}}) {
    std::vector<float> x = randn(static_cast<size_t>(c.rows) * c.x_stride, 3.0f);
    Dev<float> dx(x);
    Dev<uint16_t> dy(static_cast<size_t>(c.rows) * c.y_stride);
    CUDA_OK(gc::convert_f16(dx.p, c.x_stride, c.rows, c.n, dy.p, c.y_stride, nullptr));
    const std::vector<uint16_t> y = dy.down();
    bool ok = true;
    for (int r = 0; r < c.rows; ++r)
      for (int i = 0; i < c.n; ++i) ok &= y[r * c.y_stride + i] == guild::f32_to_fp16(x[r * c.x_stride + i]);
    CHECK_MSG(ok, "convert_f16 %d x %d (strides %lld, %lld) differs from the host", c.rows, c.n,
              (long long)c.x_stride, (long long)c.y_stride);
  }
}

TEST(quantize_q8_1_matches_cpu) {
  need_gpu();
  const int rows = 3, n = 96;
  std::vector<float> x = randn(rows * n, 2.0f);
  x[5] = 0.0f;
  for (int i = 64; i < 96; ++i) x[i] = 0.0f;  // an all-zero run
  DevAct a(x, rows, n);
  const std::vector<int8_t> qs = a.qs.down();
  const std::vector<uint32_t> ds = a.ds.down();
  const CpuKernelTable& g = cpu_kernels_generic();
  std::vector<BlockQ8_1> ref(rows * n / 32);
  for (int r = 0; r < rows; ++r) g.quantize_act[static_cast<uint32_t>(TensorType::Q8_1)](x.data() + r * n, ref.data() + r * n / 32, n);
  int bad_q = 0, bad_d = 0, bad_s = 0;
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < n / 32; ++b) {
      const BlockQ8_1& rb = ref[r * n / 32 + b];
      const uint32_t dsv = ds[r * a.view.q8.ds_stride + b];
      bad_d += (dsv & 0xFFFF) != rb.d;
      bad_s += std::fabs(fp16_to_f32(static_cast<uint16_t>(dsv >> 16)) - fp16_to_f32(rb.s)) >
               1e-3f * std::fabs(fp16_to_f32(rb.s)) + 1e-7f;
      for (int i = 0; i < 32; ++i) bad_q += qs[r * a.view.q8.qs_stride + 32 * b + i] != rb.qs[i];
    }
  CHECK_MSG(bad_q == 0 && bad_d == 0 && bad_s == 0, "q8_1: %d quants, %d scales, %d sums differ", bad_q, bad_d, bad_s);
}

TEST(gemv_all_types) {
  need_gpu();
  for (const TypeCase& tc : kTypes) {
    for (const Shape& s : shapes_for(tc.type)) {
      HostMatrix w = random_matrix(tc.type, s.n_in, s.n_out);
      DevMatrixBuf dw(w);
      for (int cols : {1, 3, 8}) {
        const bool acc = cols == 3;
        std::vector<float> x = randn(static_cast<size_t>(cols) * s.n_in);
        std::vector<float> y0 = randn(static_cast<size_t>(cols) * s.n_out);
        DevAct a(x, cols, static_cast<int>(s.n_in));
        Dev<float> y(static_cast<size_t>(cols) * s.n_out);
        if (acc) y.up(y0);
        std::vector<int> rows(cols);
        for (int c = 0; c < cols; ++c) rows[c] = c;
        CUDA_OK(gc::gemv(dw.m, a.view, cols, y.p, s.n_out, acc, nullptr));
        const std::vector<double> ref = ref_matmul(w, 0, s.n_out, x, static_cast<int>(s.n_in), rows, acc ? &y0 : nullptr);
        double scale2 = 0.0;
        for (int c = 0; c < cols; ++c) {
          double xx = 0.0;
          for (int64_t k = 0; k < s.n_in; ++k) xx += static_cast<double>(x[c * s.n_in + k]) * x[c * s.n_in + k];
          for (int64_t r = 0; r < s.n_out; ++r) {
            double ww = 0.0;
            for (int64_t k = 0; k < s.n_in; ++k) ww += static_cast<double>(w.deq[r * s.n_in + k]) * w.deq[r * s.n_in + k];
            scale2 += ww * xx / static_cast<double>(s.n_in);
          }
        }
        const std::vector<float> got = y.down();
        const double err = rel_err_floor(got, ref, std::sqrt(scale2));
        const double tol = is_float(tc.type) ? 1e-5 : 2e-2;
        const double cpu = acc ? 0.0 : cpu_path_err(w, x, cols, ref);
        CHECK_MSG(err <= tol, "gemv %s %lldx%lld cols %d: rel err %.3g > %.g (cpu path %.3g)", tc.name,
                  (long long)s.n_out, (long long)s.n_in, cols, err, tol, cpu);
        const std::vector<double> ref_k = ref_matmul(w, 0, s.n_out, kernel_input(x, cols, s.n_in, tc.type),
                                                     static_cast<int>(s.n_in), rows, acc ? &y0 : nullptr);
        const double err_k = rel_err_floor(got, ref_k, std::sqrt(scale2));
        const double tol_k = is_float(tc.type) ? 1e-5 : kQuantKernelTol;
        CHECK_MSG(err_k <= tol_k, "gemv %s %lldx%lld cols %d: rel err %.3g against its own Q8_1 input > %.g", tc.name,
                  (long long)s.n_out, (long long)s.n_in, cols, err_k, tol_k);
        if (cols == 1)
          std::printf("  gemv %-5s %4lldx%-4lld rel err %.2e (cpu table path %.2e; against its Q8_1 input %.2e)\n",
                      tc.name, (long long)s.n_out, (long long)s.n_in, err, cpu, err_k);
      }
    }
  }
}

// q, k and v in one launch: each output as its own gemv gives (bit for bit:
// the same kernel and row order per matrix).
TEST(gemv_multi_matches_gemv) {
  need_gpu();
  for (TensorType t : {TensorType::Q6_K, TensorType::Q4_K, TensorType::Q8_0, TensorType::Q5_0, TensorType::Q2_K,
                       TensorType::IQ3_S, TensorType::MXFP4}) {
    const int64_t n_in = 512;
    const int64_t outs[3] = {300, 64, 72};
    std::vector<HostMatrix> hw;
    std::vector<std::unique_ptr<DevMatrixBuf>> dw;
    for (int64_t o : outs) {
      hw.push_back(random_matrix(t, n_in, o));
      dw.push_back(std::make_unique<DevMatrixBuf>(hw.back()));
    }
    for (int cols : {1, 5}) {
      std::vector<float> x = randn(static_cast<size_t>(cols) * n_in);
      DevAct a(x, cols, static_cast<int>(n_in));
      std::vector<std::unique_ptr<Dev<float>>> ys, singles;
      float* yp[3];
      int64_t strides[3];
      gc::DevMatrix ms[3];
      for (int i = 0; i < 3; ++i) {
        ys.push_back(std::make_unique<Dev<float>>(static_cast<size_t>(cols) * outs[i]));
        singles.push_back(std::make_unique<Dev<float>>(static_cast<size_t>(cols) * outs[i]));
        yp[i] = ys.back()->p;
        strides[i] = outs[i];
        ms[i] = dw[i]->m;
        CUDA_OK(gc::gemv(ms[i], a.view, cols, singles.back()->p, outs[i], false, nullptr));
      }
      CUDA_OK(gc::gemv_multi(ms, 3, a.view, cols, yp, strides, nullptr));
      for (int i = 0; i < 3; ++i) {
        const std::vector<float> got = ys[i]->down(), want = singles[i]->down();
        CHECK_MSG(got == want, "gemv_multi %s matrix %d cols %d differs from gemv",
                  tensor_type_name(static_cast<uint32_t>(t)).data(), i, cols);
      }
    }
  }
  // Mixed types are refused (the caller falls back to three products).
  HostMatrix a6 = random_matrix(TensorType::Q6_K, 256, 32), a4 = random_matrix(TensorType::Q4_K, 256, 32);
  DevMatrixBuf d6(a6), d4(a4);
  std::vector<float> x = randn(256);
  DevAct a(x, 1, 256);
  Dev<float> y0(32), y1(32);
  const gc::DevMatrix ms[2] = {d6.m, d4.m};
  float* yp[2] = {y0.p, y1.p};
  const int64_t st[2] = {32, 32};
  CHECK(gc::gemv_multi(ms, 2, a.view, 1, yp, st, nullptr) == cudaErrorInvalidValue);
}

// Norm, router product and top-k in one launch (decode's MoE routing) against
// the three launches it replaces and ops/moe.cpp's routing of its own logits.
// Launched twice in a row: the finished-block counter must come back to zero.
TEST(moe_norm_route_matches_separate_launches) {
  need_gpu();
  struct Case { TensorType t; int n, n_expert, k; };
  for (const Case& cs : {Case{TensorType::F32, 2048, 128, 8}, Case{TensorType::F32, 512, 60, 4},
                         Case{TensorType::F16, 4096, 8, 2}, Case{TensorType::BF16, 36, 8, 2},
                         Case{TensorType::F32, 256, 3, 3}, Case{TensorType::F32, 2048, 512, 32},
                         Case{TensorType::F32, 11264, 16, 4}}) {
    const char* name = tensor_type_name(static_cast<uint32_t>(cs.t)).data();
    HostMatrix hr = random_matrix(cs.t, cs.n, cs.n_expert);
    DevMatrixBuf dr(hr);
    CHECK_MSG(gc::moe_norm_route_supported(dr.m, cs.k), "moe_norm_route_supported %s n %d", name, cs.n);
    // Router logits of a trained model's size (a few units: the norm weight
    // scales the normed row by 2/sqrt(n)); the logits of N(0,1) weights over a
    // unit row would be ~sqrt(n) and their softmax one-hot.
    std::vector<float> w = randn(cs.n, 0.3f);
    for (float& v : w) v = (v + 1.0f) * 2.0f / std::sqrt(static_cast<float>(cs.n));
    // The fused and separate launches sum the router dots in other orders (a
    // few 1e-7 apart): inputs whose k-th and (k+1)-th logits are closer than
    // 1e-3 would make "the same experts" a coin toss, so they are drawn again.
    std::vector<float> x;
    for (int draw = 0;; ++draw) {
      x = randn(cs.n, 3.0f);
      double ss = 0.0;
      for (float v : x) ss += static_cast<double>(v) * v;
      const double inv = 1.0 / std::sqrt(ss / cs.n + 1e-6);
      std::vector<double> lg(cs.n_expert, 0.0);
      for (int e = 0; e < cs.n_expert; ++e)
        for (int i = 0; i < cs.n; ++i) lg[e] += static_cast<double>(hr.deq[static_cast<size_t>(e) * cs.n + i]) * x[i] * inv * w[i];
      std::sort(lg.begin(), lg.end(), std::greater<double>());
      if (cs.k == cs.n_expert || lg[cs.k - 1] - lg[cs.k] >= 1e-3) break;
      CHECK_MSG(draw < 16, "moe_norm_route %s n %d: no input without a near-tie in 16 draws", name, cs.n);
      if (draw >= 16) break;
    }
    Dev<float> dx(x), dnw(w), xn(cs.n), xn_ref(cs.n), logits(cs.n_expert), logits_ref(cs.n_expert), wts(cs.k),
        wts_ref(cs.k);
    Dev<int32_t> ids(cs.k), ids_ref(cs.k);
    Dev<uint32_t> counter(1);
    counter.up(std::vector<uint32_t>(1, 0));
    const bool q8 = cs.n % 32 == 0;
    Dev<int8_t> qs(cs.n);
    Dev<uint32_t> ds(std::max(1, cs.n / 32));
    gc::Q8Act act_q8{qs.p, ds.p, cs.n, cs.n / 32};
    // Reference launches.
    CUDA_OK(gc::rms_norm(dx.p, nullptr, dnw.p, 1e-6f, 1, cs.n, xn_ref.p, nullptr, nullptr, 0, nullptr));
    gc::ActView av;
    av.f32 = xn_ref.p;
    av.f32_stride = cs.n;
    CUDA_OK(gc::gemv(dr.m, av, 1, logits_ref.p, cs.n_expert, false, nullptr));
    CUDA_OK(gc::moe_route(logits_ref.p, 1, cs.n_expert, cs.k, ids_ref.p, wts_ref.p, nullptr));
    for (int rep = 0; rep < 2; ++rep) {
      xn.up(std::vector<float>(cs.n, NAN));
      logits.up(std::vector<float>(cs.n_expert, NAN));
      CUDA_OK(gc::moe_norm_route(dx.p, dnw.p, 1e-6f, dr.m, cs.k, xn.p, q8 ? &act_q8 : nullptr, logits.p, ids.p, wts.p,
                                 counter.p, nullptr));
      const std::vector<float> gx = xn.down(), rx = xn_ref.down(), gl = logits.down(), rl = logits_ref.down();
      const double ex = rel_err(gx, std::vector<double>(rx.begin(), rx.end()));
      const double el = rel_err(gl, std::vector<double>(rl.begin(), rl.end()));
      CHECK_MSG(ex <= 1e-6, "moe_norm_route %s n %d: normed row %.3g from rms_norm", name, cs.n, ex);
      CHECK_MSG(el <= 1e-5, "moe_norm_route %s n %d: logits %.3g from gemv", name, cs.n, el);
      // The routing of its own logits, exactly as the CPU routes them.
      ExpertRouting r;
      r.reserve(1, cs.k, cs.n_expert);
      route_softmax_topk(gl.data(), 1, cs.n_expert, cs.k, &r);
      const std::vector<int32_t> gi = ids.down();
      const std::vector<float> gw = wts.down();
      bool ids_ok = true, w_ok = true;
      for (int j = 0; j < cs.k; ++j) {
        ids_ok &= gi[j] == r.ids[j];
        w_ok &= std::fabs(gw[j] - r.weights[j]) <= 1e-6f;
      }
      CHECK_MSG(ids_ok && w_ok, "moe_norm_route %s n %d rep %d: routing differs from its logits' (ids %d, weights %d)",
                name, cs.n, rep, ids_ok, w_ok);
      // And the three launches it replaces choose the same experts (random
      // logits: no near-ties at the k-th place), with the same weights.
      const std::vector<int32_t> ri = ids_ref.down();
      const std::vector<float> rw = wts_ref.down();
      bool same = true;
      for (int j = 0; j < cs.k; ++j) same &= ri[j] == gi[j] && std::fabs(rw[j] - gw[j]) <= 1e-5f;
      CHECK_MSG(same, "moe_norm_route %s n %d experts %d: routing differs from rms_norm + gemv + moe_route", name, cs.n,
                cs.n_expert);
      CHECK_MSG(counter.down()[0] == 0, "moe_norm_route left its counter at %u", counter.down()[0]);
      if (q8) {  // Q8_1 of the same values
        const std::vector<int8_t> q = qs.down();
        const std::vector<uint32_t> d = ds.down();
        int bad = 0;
        for (int i = 0; i < cs.n; ++i) {
          const float sc = fp16_to_f32(static_cast<uint16_t>(d[i / 32] & 0xFFFF));
          bad += std::fabs(sc * q[i] - gx[i]) > 0.51f * sc + 1e-3f * std::fabs(gx[i]) + 1e-6f;
        }
        CHECK_MSG(bad == 0, "moe_norm_route %s n %d: %d Q8_1 values off the normed row", name, cs.n, bad);
      }
    }
  }
  // Quantized routers are the unfused path's.
  HostMatrix q = random_matrix(TensorType::Q8_0, 64, 8);
  DevMatrixBuf dq(q);
  CHECK(!gc::moe_norm_route_supported(dq.m, 2));
}

TEST(gemv_glu_all_types) {
  need_gpu();
  for (const TypeCase& tc : kTypes) {
    const Shape s = shapes_for(tc.type)[1];
    HostMatrix g = random_matrix(tc.type, s.n_in, s.n_out), u = random_matrix(tc.type, s.n_in, s.n_out);
    DevMatrixBuf dg(g), du(u);
    for (int cols : {1, 5}) {
      std::vector<float> x = randn(static_cast<size_t>(cols) * s.n_in);
      DevAct a(x, cols, static_cast<int>(s.n_in));
      Dev<float> y(static_cast<size_t>(cols) * s.n_out);
      CUDA_OK(gc::gemv_glu(dg.m, du.m, a.view, cols, y.p, s.n_out, nullptr));
      std::vector<int> rows(cols);
      for (int c = 0; c < cols; ++c) rows[c] = c;
      const std::vector<double> rg = ref_matmul(g, 0, s.n_out, x, static_cast<int>(s.n_in), rows, nullptr);
      const std::vector<double> ru = ref_matmul(u, 0, s.n_out, x, static_cast<int>(s.n_in), rows, nullptr);
      auto glu = [](const std::vector<double>& gate, const std::vector<double>& up) {
        std::vector<double> h(gate.size());
        for (size_t i = 0; i < h.size(); ++i) h[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
        return h;
      };
      const std::vector<float> got = y.down();
      const double err = rel_err(got, glu(rg, ru));
      const double tol = is_float(tc.type) ? 1e-5 : 4e-2;
      CHECK_MSG(err <= tol, "gemv_glu %s cols %d: rel err %.3g > %.g", tc.name, cols, err, tol);
      const std::vector<float> xk = kernel_input(x, cols, s.n_in, tc.type);
      const double err_k = rel_err(got, glu(ref_matmul(g, 0, s.n_out, xk, static_cast<int>(s.n_in), rows, nullptr),
                                            ref_matmul(u, 0, s.n_out, xk, static_cast<int>(s.n_in), rows, nullptr)));
      const double tol_k = is_float(tc.type) ? 1e-5 : 2 * kQuantKernelTol;
      CHECK_MSG(err_k <= tol_k, "gemv_glu %s cols %d: rel err %.3g against its own Q8_1 input > %.g", tc.name, cols,
                err_k, tol_k);
      std::printf("  gemv_glu %-5s %lldx%lld cols %d: rel err %.2e (against its Q8_1 input %.2e)\n", tc.name,
                  (long long)s.n_out, (long long)s.n_in, cols, err, err_k);
    }
  }
}

TEST(gemm_all_types) {
  need_gpu();
  for (const TypeCase& tc : kTypes) {
    for (const Shape& s0 : shapes_for(tc.type)) {
      if (s0.n_out == 1 || (tc.type != TensorType::F32 && s0.n_in % 32 != 0)) continue;
      Shape s = s0;
      HostMatrix w = random_matrix(tc.type, s.n_in, s.n_out);
      DevMatrixBuf dw(w);
      for (int n : {1, 3, 17, 512}) {
        if (n == 512 && s.n_out < 300) continue;
        const bool acc = n == 17;
        std::vector<float> x = randn(static_cast<size_t>(n) * s.n_in);
        std::vector<float> y0 = randn(static_cast<size_t>(n) * s.n_out);
        DevAct a(x, n, static_cast<int>(s.n_in));
        Dev<float> y(static_cast<size_t>(n) * s.n_out);
        if (acc) y.up(y0);
        CUDA_OK(gc::gemm(dw.m, a.view, n, y.p, s.n_out, acc, nullptr));
        std::vector<int> rows(n);
        for (int c = 0; c < n; ++c) rows[c] = c;
        const std::vector<double> ref = ref_matmul(w, 0, s.n_out, x, static_cast<int>(s.n_in), rows, acc ? &y0 : nullptr);
        const double err = rel_err(y.down(), ref);
        const double tol = tc.type == TensorType::F32 ? 1e-5 : 3e-3;
        CHECK_MSG(err <= tol, "gemm %s %lldx%lld n %d: rel err %.3g > %.g", tc.name, (long long)s.n_out,
                  (long long)s.n_in, n, err, tol);
        if (n == 512) std::printf("  gemm %-5s %4lldx%-4lld x 512 rel err %.2e\n", tc.name, (long long)s.n_out,
                                  (long long)s.n_in, err);
      }
    }
  }
}

// Every type through the F16 upload fallback on the device (chunked upload:
// 5 rows per host buffer over 37 rows): gemv and gemm of the F16 copy against
// the double reference of the type's own CPU dequantization (only the fp16
// rounding of the weights apart), and get_rows giving exactly the rounded values.
TEST(f16_upload_fallback_runs_as_f16) {
  need_gpu();
  for (const TypeCase& tc : kTypes) {
    const int64_t n_in = super_block(tc.type) ? 512 : 96, n_out = 37;
    HostMatrix w = random_matrix(tc.type, n_in, n_out);
    const size_t stride = (static_cast<size_t>(n_in) * 2 + 15) / 16 * 16;
    Dev<uint8_t> buf(stride * n_out);
    CUDA_OK(gc::upload_rows_f16(static_cast<uint32_t>(tc.type), w.bytes.data(), w.row_bytes, n_in, n_out, buf.p, stride,
                                5 * stride));
    gc::DevMatrix m;
    m.data = buf.p;
    m.type = static_cast<uint32_t>(TensorType::F16);
    m.n_in = n_in;
    m.n_out = n_out;
    m.row_stride = stride;
    const int cols = 3, n_tok = 17;
    std::vector<float> x = randn(static_cast<size_t>(n_tok) * n_in);
    DevAct a(x, n_tok, static_cast<int>(n_in));
    std::vector<int> rows(n_tok);
    for (int c = 0; c < n_tok; ++c) rows[c] = c;
    const std::vector<double> ref = ref_matmul(w, 0, n_out, x, static_cast<int>(n_in), rows, nullptr);
    Dev<float> y(static_cast<size_t>(n_tok) * n_out);
    CUDA_OK(gc::gemv(m, a.view, cols, y.p, n_out, false, nullptr));
    const std::vector<float> yv = y.down();
    const double e_v = rel_err(std::vector<float>(yv.begin(), yv.begin() + cols * n_out),
                               std::vector<double>(ref.begin(), ref.begin() + cols * n_out));
    CHECK_MSG(e_v <= 2e-3, "F16 fallback gemv %s: rel err %.3g > 2e-3", tc.name, e_v);
    y.poison();
    CUDA_OK(gc::gemm(m, a.view, n_tok, y.p, n_out, false, nullptr));
    const double e_m = rel_err(y.down(), ref);
    CHECK_MSG(e_m <= 3e-3, "F16 fallback gemm %s: rel err %.3g > 3e-3", tc.name, e_m);
    std::vector<int32_t> ids = {0, 36, 5};
    Dev<int32_t> did(ids);
    Dev<float> out(ids.size() * n_in);
    CUDA_OK(gc::get_rows(m, did.p, static_cast<int>(ids.size()), out.p, n_in, nullptr));
    const std::vector<float> o = out.down();
    int bad = 0;
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t c = 0; c < n_in; ++c)
        bad += o[i * n_in + c] != fp16_to_f32(f32_to_fp16(w.deq[ids[i] * n_in + c]));
    CHECK_MSG(bad == 0, "F16 fallback get_rows %s: %d values differ", tc.name, bad);
    std::printf("  F16 fallback %-7s gemv rel err %.2e, gemm %.2e\n", tc.name, e_v, e_m);
  }
}

// q, k and v of a prompt in one launch: each output exactly what gemm gives
// for its matrix alone (the same tiles, the same sums), matrices of different
// heights, partial row and token tiles.
TEST(gemm_multi_matches_separate_gemms) {
  need_gpu();
  for (TensorType t : {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::Q5_0, TensorType::F16,
                       TensorType::F32, TensorType::Q3_K, TensorType::IQ2_XXS, TensorType::Q4_1}) {
    const int64_t n_in = super_block(t) ? 512 : 96;
    const int64_t heights[3] = {300, 37, 130};
    std::vector<HostMatrix> hm;
    for (int64_t h : heights) hm.push_back(random_matrix(t, n_in, h));
    DevMatrixBuf d0(hm[0]), d1(hm[1]), d2(hm[2]);
    const gc::DevMatrix ws[3] = {d0.m, d1.m, d2.m};
    CHECK(gc::gemm_multi_supported(ws, 3));
    for (int n : {45, 512}) {
      std::vector<float> x = randn(static_cast<size_t>(n) * n_in);
      DevAct a(x, n, static_cast<int>(n_in));
      Dev<float> y0(static_cast<size_t>(n) * 300), y1(static_cast<size_t>(n) * 37), y2(static_cast<size_t>(n) * 130);
      float* const ys[3] = {y0.p, y1.p, y2.p};
      const int64_t strides[3] = {300, 37, 130};
      CUDA_OK(gc::gemm_multi(ws, 3, a.view, n, ys, strides, nullptr));
      for (int i = 0; i < 3; ++i) {
        Dev<float> ref(static_cast<size_t>(n) * heights[i]);
        CUDA_OK(gc::gemm(ws[i], a.view, n, ref.p, strides[i], false, nullptr));
        const std::vector<float> got = (i == 0 ? y0 : i == 1 ? y1 : y2).down(), want = ref.down();
        CHECK_MSG(got == want, "gemm_multi %s matrix %d n %d differs from gemm", tensor_type_name(static_cast<uint32_t>(t)).data(), i, n);
      }
    }
  }
  const gc::DevMatrix bad[2] = {DevMatrixBuf(random_matrix(TensorType::Q8_0, 96, 8)).m,
                                DevMatrixBuf(random_matrix(TensorType::Q4_0, 96, 8)).m};
  CHECK(!gc::gemm_multi_supported(bad, 2));  // types differ
}

// Device routing of random logits (moe_route) grouped by expert (moe_group),
// with the buffers the grouped kernels read.
struct RoutedGroups {
  std::vector<float> logits;
  Dev<float> dlog, wts;
  Dev<int32_t> ids, offsets, slots, active, counters, tiles;
  gc::MoeGroups g;
  int max_tiles;
  RoutedGroups(int n, int k, int n_expert)
      : logits(randn(static_cast<size_t>(n) * n_expert, 2.0f)), dlog(logits), wts(static_cast<size_t>(n) * k),
        ids(static_cast<size_t>(n) * k), offsets(n_expert + 1), slots(static_cast<size_t>(n) * k), active(n_expert),
        counters(2), tiles(gc::moe_max_tiles(n, k, n_expert)), max_tiles(gc::moe_max_tiles(n, k, n_expert)) {
    g.ids = ids.p; g.weights = wts.p; g.offsets = offsets.p; g.slots = slots.p; g.active = active.p;
    g.counters = counters.p; g.tiles = tiles.p; g.max_tiles = max_tiles;
    CUDA_OK(gc::moe_route(dlog.p, n, n_expert, k, ids.p, wts.p, nullptr));
    CUDA_OK(gc::moe_group(g, n, k, n_expert, nullptr));
  }
};

// Grouping alone at prompt sizes, on both fill paths (per-warp cursors up to
// 256 experts, one warp above): the CPU's stable grouping of the same ids.
TEST(moe_group_prompt_sizes) {
  need_gpu();
  for (int n_expert : {128, 256, 300, 512}) {
    for (int n : {1, 31, 512}) {
      const int k = 8, n_slots = n * k;
      RoutedGroups rg(n, k, n_expert);
      const int max_tiles = rg.max_tiles;
      ExpertRouting r;
      r.reserve(n, k, n_expert);
      route_softmax_topk(rg.logits.data(), n, n_expert, k, &r);
      const std::vector<int32_t> goff = rg.offsets.down(), gslots = rg.slots.down(), gcnt = rg.counters.down(),
                                 gtiles = rg.tiles.down();
      bool ok = true;
      for (int e = 0; e <= n_expert; ++e) ok &= goff[e] == r.offset[e];
      for (int s = 0; s < n_slots; ++s) ok &= gslots[s] == r.slots_by_expert[s];
      int n_active = 0, n_tiles = 0;
      for (int e = 0; e < n_expert; ++e) {
        const int c = r.offset[e + 1] - r.offset[e];
        n_active += c > 0;
        for (int t = 0; t < (c + gc::kMoeTileTokens - 1) / gc::kMoeTileTokens; ++t) {
          ok &= n_tiles < max_tiles && gtiles[n_tiles] == ((e << 16) | t);
          ++n_tiles;
        }
      }
      ok &= gcnt[0] == n_active && gcnt[1] == n_tiles;
      CHECK_MSG(ok, "moe_group differs from the CPU grouping (%d experts, %d tokens)", n_expert, n);
    }
  }
}

// Gate + up + SwiGLU in one launch where its tiles are partial: 96 expert
// rows (a 64-row block and a half one), legacy/plain stages cut short by the
// row's end (800 = 6.25 Q8_0 stages, 3.125 of the 256-element stages),
// ~35 slots per expert (a full 32-slot tile and a partial one); direct and
// tile-path types, every type but F32. Against moe_gemm twice and swiglu.
TEST(moe_gemm_glu_partial_tiles) {
  need_gpu();
  const int n_expert = 4, k = 2, n = 70, n_ff = 96, n_slots = n * k;
  RoutedGroups rg(n, k, n_expert);
  const gc::MoeGroups& g = rg.g;
  for (const TypeCase& tc : kTypes) {
    const TensorType t = tc.type;
    if (t == TensorType::F32) continue;
    const int n_in = super_block(t) ? 512 : 800;
    HostMatrix wg = random_matrix(t, n_in, static_cast<int64_t>(n_ff) * n_expert);
    HostMatrix wu = random_matrix(t, n_in, static_cast<int64_t>(n_ff) * n_expert);
    DevMatrixBuf dg(wg, n_expert), du(wu, n_expert);
    CHECK(gc::moe_gemm_glu_supported(dg.m, du.m));
    std::vector<float> x = randn(static_cast<size_t>(n) * n_in);
    DevAct a(x, n, n_in);
    const size_t sz = static_cast<size_t>(n_slots) * n_ff;
    Dev<float> yg(sz), yu(sz), ys(sz), yglu(sz);
    CUDA_OK(gc::moe_gemm(dg.m, a.view, g, k, yg.p, n_ff, nullptr));
    CUDA_OK(gc::moe_gemm(du.m, a.view, g, k, yu.p, n_ff, nullptr));
    CUDA_OK(gc::swiglu(yg.p, yu.p, static_cast<int64_t>(sz), ys.p, nullptr));
    yglu.poison();
    CUDA_OK(gc::moe_gemm_glu(dg.m, du.m, a.view, g, k, yglu.p, n_ff, nullptr));
    const std::vector<float> want = ys.down();
    const double err = rel_err(yglu.down(), std::vector<double>(want.begin(), want.end()));
    CHECK_MSG(err <= 1e-6, "moe_gemm_glu %s (partial tiles): %.3g", tensor_type_name(static_cast<uint32_t>(t)).data(), err);
  }
}

// Routing, grouping, grouped expert products and the weighted sum, against
// ops/moe.cpp and a double reference.
TEST(moe_route_group_experts_combine) {
  need_gpu();
  const int n_expert = 8, n_in = 512, n_ff = 256;
  for (int k : {2, 3}) {
    for (int n : {1, 3, 8, 17, 100}) {
      const int n_slots = n * k;
      RoutedGroups rg(n, k, n_expert);
      const gc::MoeGroups& g = rg.g;
      const int max_tiles = rg.max_tiles;
      ExpertRouting r;
      r.reserve(n, k, n_expert);
      route_softmax_topk(rg.logits.data(), n, n_expert, k, &r);
      const std::vector<int32_t> gids = rg.ids.down(), goff = rg.offsets.down(), gslots = rg.slots.down(),
                                 gact = rg.active.down(), gcnt = rg.counters.down(), gtiles = rg.tiles.down();
      const std::vector<float> gw = rg.wts.down();
      bool ids_ok = true, w_ok = true, group_ok = true;
      for (int s = 0; s < n_slots; ++s) {
        ids_ok &= gids[s] == r.ids[s];
        w_ok &= std::fabs(gw[s] - r.weights[s]) <= 1e-6f;
      }
      for (int e = 0; e <= n_expert; ++e) group_ok &= goff[e] == r.offset[e];
      for (int s = 0; s < n_slots; ++s) group_ok &= gslots[s] == r.slots_by_expert[s];
      int n_active = 0, n_tiles = 0;
      for (int e = 0; e < n_expert; ++e) {
        const int c = r.offset[e + 1] - r.offset[e];
        if (c > 0) group_ok &= gact[n_active++] == e;
        n_tiles += (c + gc::kMoeTileTokens - 1) / gc::kMoeTileTokens;
      }
      group_ok &= gcnt[0] == n_active && gcnt[1] == n_tiles;
      for (int t = 0; t < n_tiles && t < max_tiles; ++t) group_ok &= (gtiles[t] >> 16) < n_expert;
      CHECK_MSG(ids_ok, "moe_route ids differ (k %d, n %d)", k, n);
      CHECK_MSG(w_ok, "moe_route weights differ (k %d, n %d)", k, n);
      CHECK_MSG(group_ok, "moe_group differs (k %d, n %d)", k, n);

      // Expert products: gate/up (input row = token), down (input row = slot), every type.
      for (const TypeCase& tc : kTypes) {
        const TensorType t = tc.type;
        HostMatrix wg = random_matrix(t, n_in, static_cast<int64_t>(n_ff) * n_expert);
        HostMatrix wu = random_matrix(t, n_in, static_cast<int64_t>(n_ff) * n_expert);
        DevMatrixBuf dg(wg, n_expert), du(wu, n_expert);
        std::vector<float> x = randn(static_cast<size_t>(n) * n_in);
        DevAct a(x, n, n_in);
        std::vector<double> ref_g(static_cast<size_t>(n_slots) * n_ff), ref_u(ref_g.size());
        for (int s = 0; s < n_slots; ++s) {
          const int e = r.ids[s];
          const std::vector<double> yg = ref_matmul(wg, static_cast<int64_t>(e) * n_ff, n_ff, x, n_in, {s / k}, nullptr);
          const std::vector<double> yu = ref_matmul(wu, static_cast<int64_t>(e) * n_ff, n_ff, x, n_in, {s / k}, nullptr);
          std::copy(yg.begin(), yg.end(), ref_g.begin() + static_cast<int64_t>(s) * n_ff);
          std::copy(yu.begin(), yu.end(), ref_u.begin() + static_cast<int64_t>(s) * n_ff);
        }
        const double tol_v = is_float(t) ? 1e-5 : 2e-2;
        const double tol_m = t == TensorType::F32 ? 1e-5 : 3e-3;
        Dev<float> y(static_cast<size_t>(n_slots) * n_ff);
        const int max_active = std::min(n_expert, n_slots);
        gc::DevMatrix odd_stack = dg.m;  // an expert stack off the 16-byte grid is refused, not read
        odd_stack.expert_stride += 8;
        CHECK(gc::moe_gemv(odd_stack, a.view, g, k, max_active, n, y.p, n_ff, nullptr) == cudaErrorInvalidValue);
        CUDA_OK(gc::moe_gemv(dg.m, a.view, g, k, max_active, n, y.p, n_ff, nullptr));
        double err = rel_err(y.down(), ref_g);
        CHECK_MSG(err <= tol_v, "moe_gemv %s k %d n %d: %.3g", tensor_type_name(static_cast<uint32_t>(t)).data(), k, n, err);
        y.poison();
        CUDA_OK(gc::moe_gemm(dg.m, a.view, g, k, y.p, n_ff, nullptr));
        err = rel_err(y.down(), ref_g);
        CHECK_MSG(err <= tol_m, "moe_gemm %s k %d n %d: %.3g", tensor_type_name(static_cast<uint32_t>(t)).data(), k, n, err);
        // Gate, up and SwiGLU of a prompt in one launch, against the same from moe_gemm twice + swiglu.
        if (gc::moe_gemm_glu_supported(dg.m, du.m)) {
          Dev<float> yu(y.n), ys(y.n), yglu(y.n);
          CUDA_OK(gc::moe_gemm(du.m, a.view, g, k, yu.p, n_ff, nullptr));
          CUDA_OK(gc::swiglu(y.p, yu.p, static_cast<int64_t>(y.n), ys.p, nullptr));
          yglu.poison();
          CUDA_OK(gc::moe_gemm_glu(dg.m, du.m, a.view, g, k, yglu.p, n_ff, nullptr));
          const std::vector<float> want = ys.down();
          const double e_glu = rel_err(yglu.down(), std::vector<double>(want.begin(), want.end()));
          CHECK_MSG(e_glu <= 1e-6, "moe_gemm_glu %s k %d n %d: %.3g", tensor_type_name(static_cast<uint32_t>(t)).data(), k, n, e_glu);
        } else {
          CHECK(t == TensorType::F32);
        }
        y.poison();
        CUDA_OK(gc::moe_gemv_glu(dg.m, du.m, a.view, g, k, max_active, n, y.p, n_ff, nullptr));
        std::vector<double> ref_h(ref_g.size());
        for (size_t i = 0; i < ref_h.size(); ++i) ref_h[i] = ref_g[i] / (1.0 + std::exp(-ref_g[i])) * ref_u[i];
        err = rel_err(y.down(), ref_h);
        CHECK_MSG(err <= 2 * tol_v, "moe_gemv_glu %s k %d n %d: %.3g", tensor_type_name(static_cast<uint32_t>(t)).data(), k, n, err);

        // Down projection: per-slot inputs of n_ff (a multiple of 32).
        HostMatrix wd = random_matrix(t, n_ff, static_cast<int64_t>(n_in) * n_expert);
        DevMatrixBuf dd(wd, n_expert);
        std::vector<float> h = randn(static_cast<size_t>(n_slots) * n_ff);
        DevAct ah(h, n_slots, n_ff);
        std::vector<double> ref_d(static_cast<size_t>(n_slots) * n_in);
        for (int s = 0; s < n_slots; ++s) {
          const std::vector<double> yd = ref_matmul(wd, static_cast<int64_t>(r.ids[s]) * n_in, n_in, h, n_ff, {s}, nullptr);
          std::copy(yd.begin(), yd.end(), ref_d.begin() + static_cast<int64_t>(s) * n_in);
        }
        Dev<float> yd(static_cast<size_t>(n_slots) * n_in);
        CUDA_OK(gc::moe_gemv(dd.m, ah.view, g, 1, max_active, n, yd.p, n_in, nullptr));
        err = rel_err(yd.down(), ref_d);
        CHECK_MSG(err <= tol_v, "moe_gemv down %s: %.3g", tensor_type_name(static_cast<uint32_t>(t)).data(), err);
        yd.poison();
        CUDA_OK(gc::moe_gemm(dd.m, ah.view, g, 1, yd.p, n_in, nullptr));
        const std::vector<float> ydv = yd.down();
        err = rel_err(ydv, ref_d);
        CHECK_MSG(err <= tol_m, "moe_gemm down %s: %.3g", tensor_type_name(static_cast<uint32_t>(t)).data(), err);

        // Weighted sum into the residual (CPU order: choice 0 first).
        std::vector<float> x0 = randn(static_cast<size_t>(n) * n_in);
        Dev<float> dx(x0);
        CUDA_OK(gc::moe_combine(yd.p, rg.wts.p, n, k, n_in, dx.p, nullptr));
        std::vector<double> ref_x(x0.size());
        for (int tt = 0; tt < n; ++tt)
          for (int d = 0; d < n_in; ++d) {
            float o = 0.0f;
            for (int j = 0; j < k; ++j) {
              const float v = ydv[(static_cast<int64_t>(tt) * k + j) * n_in + d] * gw[tt * k + j];
              o = j == 0 ? v : o + v;
            }
            ref_x[static_cast<size_t>(tt) * n_in + d] = static_cast<double>(x0[static_cast<size_t>(tt) * n_in + d] + o);
          }
        err = rel_err(dx.down(), ref_x);
        CHECK_MSG(err <= 1e-6, "moe_combine: %.3g", err);

        // One token without grouping (decode): token 0's choices straight from
        // the routing, one of them computed elsewhere (-1) when k > 2.
        std::vector<int32_t> tok_ids(gids.begin(), gids.begin() + k);
        if (k > 2) tok_ids[1] = -1;
        Dev<int32_t> dtok(tok_ids);
        Dev<float> yh(static_cast<size_t>(k) * n_ff);
        CUDA_OK(gc::moe_gemv_glu_direct(dg.m, du.m, a.view, dtok.p, k, k, yh.p, n_ff, nullptr));
        {
          const std::vector<float> got = yh.down();
          std::vector<float> got_live;
          std::vector<double> want_live;
          for (int j = 0; j < k; ++j) {
            if (tok_ids[j] < 0) continue;
            got_live.insert(got_live.end(), got.begin() + static_cast<int64_t>(j) * n_ff, got.begin() + static_cast<int64_t>(j + 1) * n_ff);
            want_live.insert(want_live.end(), ref_h.begin() + static_cast<int64_t>(j) * n_ff, ref_h.begin() + static_cast<int64_t>(j + 1) * n_ff);
          }
          err = rel_err(got_live, want_live);
          CHECK_MSG(err <= 2 * tol_v, "moe_gemv_glu_direct %s k %d: %.3g", tensor_type_name(static_cast<uint32_t>(t)).data(), k, err);
        }
        Dev<float> dx1(std::vector<float>(x0.begin(), x0.begin() + n_in));
        CUDA_OK(gc::moe_gemv_combine(dd.m, ah.view, dtok.p, rg.wts.p, k, dx1.p, nullptr));
        std::vector<double> ref_x1(n_in);
        for (int d = 0; d < n_in; ++d) {
          double o = x0[d];
          for (int j = 0; j < k; ++j)
            if (tok_ids[j] >= 0) o += ref_d[static_cast<int64_t>(j) * n_in + d] * gw[j];
          ref_x1[d] = o;
        }
        err = rel_err(dx1.down(), ref_x1);
        CHECK_MSG(err <= tol_v, "moe_gemv_combine %s k %d: %.3g", tensor_type_name(static_cast<uint32_t>(t)).data(), k, err);
      }
    }
  }
}

// Hybrid hand-off of one token: the first host_max choices the CPU would
// compute go to the GPU (host_ids), the CPU sees them as -1 and does not
// count them; without host_ids every choice is exported as it is.
TEST(hybrid_export_splits_the_cpu_choices) {
  need_gpu();
  const int k = 8, d = 64, n_expert = 16;
  std::vector<int32_t> slot_of(n_expert);
  for (int e = 0; e < n_expert; ++e) slot_of[e] = e % 2 == 0 ? e / 2 : -1;  // odd experts: the CPU's
  const std::vector<int32_t> ids = {3, 4, 5, 6, 7, 9, 10, 11};             // CPU choices at 0, 2, 4, 5, 7
  const std::vector<float> w(k, 0.125f), xn = randn(d);
  Dev<int32_t> dids(ids), dslot(slot_of), pending(1), host_ids(k), h_ids(k);
  Dev<float> dw(w), dxn(xn), h_xn(d), h_w(k);
  for (int host_max : {0, 2, 8}) {
    CUDA_OK(gc::hybrid_export(dxn.p, 1, d, dids.p, dw.p, k, dslot.p, h_xn.p, h_ids.p, h_w.p, pending.p, host_ids.p,
                              host_max, nullptr));
    const std::vector<int32_t> got_host = host_ids.down(), got_ids = h_ids.down();
    int cpu_seen = 0, taken = 0;
    for (int j = 0; j < k; ++j) {
      const bool cpu = slot_of[ids[j]] < 0;
      const bool to_gpu = cpu && cpu_seen++ < host_max;
      taken += to_gpu;
      CHECK_MSG(got_host[j] == (to_gpu ? ids[j] : -1), "host_max %d choice %d: host id %d", host_max, j, got_host[j]);
      CHECK_MSG(got_ids[j] == (to_gpu ? -1 : ids[j]), "host_max %d choice %d: exported id %d", host_max, j, got_ids[j]);
    }
    CHECK(pending.down()[0] == 5 - taken);
    CHECK(h_xn.down() == xn);
  }
  CUDA_OK(gc::hybrid_export(dxn.p, 1, d, dids.p, dw.p, k, dslot.p, h_xn.p, h_ids.p, h_w.p, pending.p, nullptr, 0, nullptr));
  CHECK(h_ids.down() == ids);
  CHECK(pending.down()[0] == 5);
}

TEST(rms_norm_matches_cpu) {
  need_gpu();
  // One row without an add (decode) is spread over several blocks.
  for (int n : {256, 2048, 4096 + 32}) {
    for (bool with_add : {false, true})
    for (int rows : {5, 1}) {
      std::vector<float> x = randn(static_cast<size_t>(rows) * n, 3.0f), add = randn(x.size()), w = randn(n, 0.3f);
      for (float& v : w) v += 1.0f;
      Dev<float> dx(x), dadd(add), dw(w), dy(x.size());
      Dev<int8_t> qs(x.size());
      Dev<uint32_t> ds(x.size() / 32);
      const int64_t hs = n + 64;  // fp16 rows with a stride of their own
      Dev<uint16_t> yh(rows * hs);
      gc::Q8Act q8{qs.p, ds.p, n, n / 32};
      CUDA_OK(gc::rms_norm(dx.p, with_add ? dadd.p : nullptr, dw.p, 1e-6f, rows, n, dy.p, &q8, yh.p, hs, nullptr));
      std::vector<float> xin = x;
      if (with_add) for (size_t i = 0; i < x.size(); ++i) xin[i] += add[i];
      std::vector<float> ref(x.size());
      rms_norm_rows(xin.data(), w.data(), 1e-6f, n, rows, ref.data());
      std::vector<double> refd(ref.begin(), ref.end()), xind(xin.begin(), xin.end());
      const std::vector<float> y = dy.down();
      CHECK_MSG(rel_err(y, refd) <= 1e-6, "rms_norm n %d: %.3g", n, rel_err(y, refd));
      CHECK_MSG(rel_err(dx.down(), xind) == 0.0, "rms_norm residual add n %d", n);
      // Q8_1 and fp16 outputs describe the same values.
      const std::vector<int8_t> q = qs.down();
      const std::vector<uint32_t> d = ds.down();
      const std::vector<uint16_t> h = yh.down();
      int bad = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        const float sc = fp16_to_f32(static_cast<uint16_t>(d[i / 32] & 0xFFFF));
        bad += std::fabs(sc * q[i] - y[i]) > 0.51f * sc + 1e-3f * std::fabs(y[i]) + 1e-6f;
        bad += !(std::fabs(fp16_to_f32(h[(i / n) * hs + i % n]) - y[i]) <= 1e-3f * std::fabs(y[i]) + 1e-6f);
      }
      CHECK_MSG(bad == 0, "rms_norm q8/f16 outputs: %d bad", bad);
      if (rows == 1 && !with_add) {  // the split path with f32 output only
        Dev<float> y1(static_cast<size_t>(n));
        CUDA_OK(gc::rms_norm(dx.p, nullptr, dw.p, 1e-6f, 1, n, y1.p, nullptr, nullptr, 0, nullptr));
        CHECK_MSG(rel_err(y1.down(), refd) <= 1e-6, "rms_norm f32 only n %d: %.3g", n, rel_err(y1.down(), refd));
      }
    }
  }
}

TEST(rope_matches_cpu) {
  need_gpu();
  struct Cfg { RopeStyle style; int n_rot, head_dim; float base, scale, ext; };
  for (const Cfg& cf : {Cfg{RopeStyle::Neox, 128, 128, 1e6f, 1.0f, 0.0f}, Cfg{RopeStyle::Norm, 32, 64, 10000.0f, 0.5f, 0.0f},
                        Cfg{RopeStyle::Neox, 32, 64, 1e6f, 1.0f, 0.0f}, Cfg{RopeStyle::Norm, 16, 80, 10000.0f, 1.0f / 40, 1.0f}}) {
    RopeParams rp;
    rp.style = cf.style;
    rp.n_rot = cf.n_rot;
    rp.freq_base = cf.base;
    rp.freq_scale = cf.scale;
    rp.ext_factor = cf.ext;
    rp.n_ctx_orig = 4096;
    gc::RopeConfig rc;
    rc.n_rot = rp.n_rot; rc.neox = rp.style == RopeStyle::Neox; rc.freq_base = rp.freq_base; rc.freq_scale = rp.freq_scale;
    rc.ext_factor = rp.ext_factor; rc.attn_factor = rp.attn_factor; rc.beta_fast = rp.beta_fast; rc.beta_slow = rp.beta_slow;
    rc.n_ctx_orig = rp.n_ctx_orig;
    const int n = 17, pos0 = 3000, heads = 3;
    Dev<int32_t> dpos(std::vector<int32_t>{pos0});
    Dev<float> cs(static_cast<size_t>(n) * cf.n_rot);
    CUDA_OK(gc::rope_table(rc, dpos.p, n, cs.p, nullptr));
    std::vector<float> ref(static_cast<size_t>(n) * cf.n_rot);
    for (int i = 0; i < n; ++i) rope_cache(rp, pos0 + i, ref.data() + static_cast<size_t>(i) * cf.n_rot);
    const std::vector<float> got = cs.down();
    double max_d = 0;
    for (size_t i = 0; i < ref.size(); ++i) max_d = std::max(max_d, std::fabs(static_cast<double>(got[i]) - ref[i]));
    CHECK_MSG(max_d <= 2e-5, "rope_table n_rot %d: max |d| %.3g", cf.n_rot, max_d);
    std::vector<float> x = randn(static_cast<size_t>(n) * heads * cf.head_dim);
    Dev<float> dx(x);
    CUDA_OK(gc::rope_apply(rc, cs.p, dx.p, n, heads, cf.head_dim, heads * cf.head_dim, nullptr));
    std::vector<float> xr = x;
    for (int i = 0; i < n; ++i) rope_apply(rp, ref.data() + static_cast<size_t>(i) * cf.n_rot, xr.data() + static_cast<size_t>(i) * heads * cf.head_dim, heads, cf.head_dim);
    std::vector<double> xrd(xr.begin(), xr.end());
    const double err = rel_err(dx.down(), xrd);
    CHECK_MSG(err <= 1e-5, "rope_apply n_rot %d: %.3g", cf.n_rot, err);
  }
}

TEST(qkv_post_matches_cpu) {
  need_gpu();
  const int n_head = 4, n_kv = 2, D = 128, n = 5, n_ctx = 64, pos0 = 7;
  RopeParams rp;
  rp.n_rot = D;
  rp.freq_base = 1e6f;
  gc::RopeConfig rc;
  rc.n_rot = D; rc.neox = true; rc.freq_base = 1e6f;
  std::vector<float> q = randn(static_cast<size_t>(n) * n_head * D), k = randn(static_cast<size_t>(n) * n_kv * D),
                     v = randn(static_cast<size_t>(n) * n_kv * D), qn = randn(D, 0.2f), kn = randn(D, 0.2f);
  for (float& a : qn) a += 1.0f;
  for (float& a : kn) a += 1.0f;
  Dev<float> dq(q), dk(k), dv(v), dqn(qn), dkn(kn), cs(static_cast<size_t>(n) * D);
  Dev<uint16_t> kc(static_cast<size_t>(n_ctx) * n_kv * D), vc(kc.n);
  Dev<int32_t> dpos(std::vector<int32_t>{pos0});
  CUDA_OK(gc::rope_table(rc, dpos.p, n, cs.p, nullptr));
  gc::QkvPost p;
  p.q = dq.p; p.q_stride = n_head * D; p.k = dk.p; p.k_stride = n_kv * D; p.v = dv.p; p.v_stride = n_kv * D;
  p.q_norm = dqn.p; p.k_norm = dkn.p; p.eps = 1e-6f; p.n_head = n_head; p.n_head_kv = n_kv; p.head_dim = D;
  p.k_cache = kc.p; p.v_cache = vc.p;
  CUDA_OK(gc::qkv_post(p, rc, cs.p, dpos.p, n, nullptr));
  std::vector<float> qr = q, kr = k;
  for (int i = 0; i < n; ++i) {
    std::vector<float> c(D);
    rope_cache(rp, pos0 + i, c.data());
    for (int h = 0; h < n_head; ++h) rms_norm(&qr[(i * n_head + h) * D], qn.data(), 1e-6f, D, &qr[(i * n_head + h) * D]);
    for (int h = 0; h < n_kv; ++h) rms_norm(&kr[(i * n_kv + h) * D], kn.data(), 1e-6f, D, &kr[(i * n_kv + h) * D]);
    rope_apply(rp, c.data(), &qr[i * n_head * D], n_head, D);
    rope_apply(rp, c.data(), &kr[i * n_kv * D], n_kv, D);
  }
  std::vector<double> qrd(qr.begin(), qr.end());
  CHECK_MSG(rel_err(dq.down(), qrd) <= 1e-5, "qkv_post q: %.3g", rel_err(dq.down(), qrd));
  const std::vector<uint16_t> kg = kc.down(), vg = vc.down();
  std::vector<float> kf(static_cast<size_t>(n) * n_kv * D), vf(kf.size());
  for (size_t i = 0; i < kf.size(); ++i) {
    kf[i] = fp16_to_f32(kg[static_cast<size_t>(pos0) * n_kv * D + i]);
    vf[i] = fp16_to_f32(vg[static_cast<size_t>(pos0) * n_kv * D + i]);
  }
  std::vector<double> krd(kr.begin(), kr.end()), vd(v.begin(), v.end());
  CHECK_MSG(rel_err(kf, krd) <= 2e-3, "qkv_post k cache: %.3g", rel_err(kf, krd));
  CHECK_MSG(rel_err(vf, vd) <= 2e-3, "qkv_post v cache: %.3g", rel_err(vf, vd));
}

// One layer's fp16 KV cache of random rows on the host (the CPU reference
// reads it) and its copy on the device, with the attention shape of n_head
// query heads over n_kv KV heads of D.
struct RandomKv {
  KvCache kv;
  AttentionShape shape;
  Dev<uint16_t> k, v;
  bool ok = false;
  RandomKv(int n_ctx, int n_head, int n_kv, int D) : k(static_cast<size_t>(n_ctx) * n_kv * D), v(k.n) {
    if (!kv.init(1, n_ctx, n_kv * D, n_kv * D, KvType::F16)) return;
    for (int p = 0; p < n_ctx; ++p) {
      std::vector<float> kr = randn(n_kv * D), vr = randn(n_kv * D);
      kv.store(0, p, kr.data(), vr.data());
    }
    cudaMemcpy(k.p, kv.k_row(0, 0), k.n * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(v.p, kv.v_row(0, 0), v.n * 2, cudaMemcpyHostToDevice);
    shape.n_head = n_head; shape.n_head_kv = n_kv; shape.head_dim_k = D; shape.head_dim_v = D;
    shape.scale = 1.0f / std::sqrt(static_cast<float>(D));
    ok = k.p && v.p;
  }
};

// Decode attention's chunk merge runs in the last block of each head set
// (counters at the end of the workspace, left zero by every launch): one
// workspace reused across positions gives the same bits as a fresh one each
// time, the counters are zero after every call, and the output matches the
// CPU. Head sizes 80 (no Q8_1 output) and 256 (the merge takes two passes of
// the block's threads); one, three (of a block's four), four, six and eight
// heads per block; 157 chunks (the merge's factors in two tiles).
TEST(attention_decode_reuses_workspace) {
  need_gpu();
  ThreadPool pool(2);
  struct Case { int n_ctx, n_head, n_kv, D; };
  for (const Case& c : {Case{300, 8, 2, 80}, Case{300, 8, 2, 128}, Case{300, 8, 2, 256}, Case{8192, 8, 2, 80},
                        Case{8192, 8, 2, 128}, Case{8192, 8, 2, 256}, Case{6000, 12, 2, 128}, Case{8192, 12, 2, 64},
                        Case{20000, 8, 2, 128}, Case{8192, 16, 2, 128}}) {
    const int n_ctx = c.n_ctx, n_head = c.n_head, n_kv = c.n_kv, D = c.D;
    RandomKv rk(n_ctx, n_head, n_kv, D);
    REQUIRE(rk.ok);
    std::vector<float> scores(static_cast<size_t>(pool.size()) * n_ctx);
    const size_t wf = gc::attention_decode_workspace_floats(n_head, D, n_ctx);
    Dev<float> shared_work(wf);
    shared_work.zero();
    const bool q8 = D % 32 == 0;
    for (int pos : {n_ctx - 1, 5, 130, 127, n_ctx / 2}) {
      std::vector<float> q = randn(static_cast<size_t>(n_head) * D), ref(q.size());
      attention(pool, rk.shape, rk.kv, 0, q.data(), 1, pos, ref.data(), scores.data());
      Dev<float> dq(q), out_a(q.size()), out_b(q.size());
      Dev<int32_t> dpos(std::vector<int32_t>{pos});
      Dev<int8_t> qs_a(n_head * D), qs_b(n_head * D);
      Dev<uint32_t> ds_a(std::max(1, n_head * D / 32)), ds_b(ds_a.n);
      gc::Q8Act q8a{qs_a.p, ds_a.p, n_head * D, n_head * D / 32}, q8b{qs_b.p, ds_b.p, n_head * D, n_head * D / 32};
      Dev<float> fresh(wf);
      fresh.zero();
      gc::AttnArgs a;
      a.q = dq.p; a.q_stride = n_head * D; a.k_cache = rk.k.p; a.v_cache = rk.v.p; a.n_head = n_head; a.n_head_kv = n_kv;
      a.head_dim = D; a.n_ctx = n_ctx; a.scale = rk.shape.scale; a.out_stride = n_head * D;
      a.out = out_a.p;
      CUDA_OK(gc::attention_decode(a, dpos.p, shared_work.p, q8 ? &q8a : nullptr, nullptr));
      a.out = out_b.p;
      CUDA_OK(gc::attention_decode(a, dpos.p, fresh.p, q8 ? &q8b : nullptr, nullptr));
      const std::vector<float> got = out_a.down();
      CHECK_MSG(got == out_b.down(), "attention_decode D %d n_ctx %d pos %d: reused workspace differs", D, n_ctx, pos);
      if (q8)
        CHECK_MSG(qs_a.down() == qs_b.down() && ds_a.down() == ds_b.down(), "D %d pos %d: Q8_1 differs", D, pos);
      auto nonzero_counters = [&] {
        const std::vector<float> w = shared_work.down();
        int nonzero = 0;
        for (int i = 0; i < n_head; ++i) {
          uint32_t counter = 0;
          std::memcpy(&counter, &w[wf - n_head + i], sizeof counter);
          nonzero += counter != 0;
        }
        return nonzero;
      };
      int nonzero = nonzero_counters();
      CHECK_MSG(nonzero == 0, "attention_decode D %d pos %d: %d head-set counters left non-zero", D, pos, nonzero);
      std::vector<double> refd(ref.begin(), ref.end());
      const double err = rel_err(got, refd);
      CHECK_MSG(err <= 1e-4, "attention_decode D %d n_ctx %d pos %d: rel err %.3g", D, n_ctx, pos, err);
      // Launches sized for fewer positions on the same workspace (the
      // decoder's ranges; here the exact length, and from half to about twice
      // it): smaller grids, other head splits, the same answer, the counters
      // still zero.
      struct Range { int min, max; };
      for (const Range rg : {Range{pos + 1, pos + 1}, Range{pos / 2 + 1, std::min(n_ctx, 2 * pos + 2)}}) {
        const int kv_max = rg.max;
        a.n_kv_min = rg.min;
        a.n_kv_max = rg.max;
        // Outputs filled first: NaN floats, and -128 codes (Q8_1 makes none).
        out_b.poison();
        cudaMemset(qs_b.p, 0x80, qs_b.n);
        CUDA_OK(gc::attention_decode(a, dpos.p, shared_work.p, q8 ? &q8b : nullptr, nullptr));
        const double e2 = rel_err(out_b.down(), refd);
        CHECK_MSG(e2 <= 1e-4, "attention_decode D %d n_ctx %d pos %d n_kv_max %d: rel err %.3g", D, n_ctx, pos,
                  kv_max, e2);
        if (q8) {
          const std::vector<int8_t> qa = qs_a.down(), qb = qs_b.down();
          int bad = 0;
          for (size_t i = 0; i < qa.size(); ++i) bad += qb[i] == -128 || std::abs(qb[i] - qa[i]) > 1;
          CHECK_MSG(bad == 0, "D %d pos %d n_kv_max %d: %d Q8_1 codes unwritten or off", D, pos, kv_max, bad);
        }
        nonzero = nonzero_counters();
        CHECK_MSG(nonzero == 0, "D %d pos %d n_kv_max %d: %d counters left non-zero", D, pos, kv_max, nonzero);
      }
      a.n_kv_min = 0;
      a.n_kv_max = n_ctx + 1;  // past the cache: refused
      CHECK(gc::attention_decode(a, dpos.p, shared_work.p, nullptr, nullptr) == cudaErrorInvalidValue);
      a.n_kv_max = -1;
      CHECK(gc::attention_decode(a, dpos.p, shared_work.p, nullptr, nullptr) == cudaErrorInvalidValue);
      a.n_kv_min = pos + 2;  // above n_kv_max: refused
      a.n_kv_max = pos + 1;
      CHECK(gc::attention_decode(a, dpos.p, shared_work.p, nullptr, nullptr) == cudaErrorInvalidValue);
      a.n_kv_min = a.n_kv_max = 0;
    }
  }
}

// Decode attention with qkv_post folded in, against qkv_post + attention_decode:
// the same output bits and the same K/V cache rows; the raw q is left as it is.
// Chunk edges (position 127, 128), short and long contexts (one head or a
// group's heads per block), norms on and off, neox and adjacent rope pairs.
TEST(attention_decode_post_matches_qkv_post_then_attention) {
  need_gpu();
  // Groups of 4 (8 heads over 2 KV heads), 3 and 6 (a block's head capacity
  // above the heads it takes), partial rotation (n_rot < D).
  struct Case { int D, n_ctx, pos; bool norms, neox; int n_head, n_kv, n_rot; };
  for (const Case& c : {Case{128, 300, 0, true, true, 8, 2, 128}, Case{128, 300, 127, true, true, 8, 2, 128},
                        Case{128, 300, 128, false, true, 8, 2, 128}, Case{64, 300, 299, true, false, 8, 2, 64},
                        Case{128, 8192, 8000, true, true, 8, 2, 128}, Case{64, 8192, 130, false, false, 8, 2, 64},
                        Case{128, 8192, 4000, true, true, 12, 2, 64}, Case{64, 8192, 777, true, false, 6, 2, 32},
                        Case{96, 300, 200, true, true, 6, 2, 96}, Case{128, 300, 5, true, true, 4, 4, 128}}) {
    const int n_head = c.n_head, n_kv = c.n_kv, D = c.D;
    gc::RopeConfig rc;
    rc.n_rot = c.n_rot;
    rc.neox = c.neox;
    rc.freq_base = 1e6f;
    std::vector<float> q = randn(static_cast<size_t>(n_head) * D), k = randn(static_cast<size_t>(n_kv) * D),
                       v = randn(static_cast<size_t>(n_kv) * D), qn = randn(D, 0.2f), kn = randn(D, 0.2f);
    for (float& a : qn) a += 1.0f;
    for (float& a : kn) a += 1.0f;
    std::vector<uint16_t> cache(static_cast<size_t>(c.n_ctx) * n_kv * D);
    for (uint16_t& h : cache) h = f32_to_fp16(normal());
    Dev<float> qa(q), qb(q), dk(k), dv(v), dqn(qn), dkn(kn), cs(c.n_rot), out_a(q.size()), out_b(q.size());
    Dev<uint16_t> kca(cache), vca(cache), kcb(cache), vcb(cache);
    Dev<int32_t> dpos(std::vector<int32_t>{c.pos});
    Dev<float> work_a(gc::attention_decode_workspace_floats(n_head, D, c.n_ctx)), work_b(work_a.n);
    work_a.zero();  // the head sets' counters start at zero
    work_b.zero();
    Dev<int8_t> qs_a(n_head * D), qs_b(n_head * D);
    Dev<uint32_t> ds_a(n_head * D / 32), ds_b(n_head * D / 32);
    gc::Q8Act q8a{qs_a.p, ds_a.p, n_head * D, n_head * D / 32}, q8b{qs_b.p, ds_b.p, n_head * D, n_head * D / 32};
    CUDA_OK(gc::rope_table(rc, dpos.p, 1, cs.p, nullptr));
    auto post_for = [&](float* qp, uint16_t* kc, uint16_t* vc) {
      gc::QkvPost p;
      p.q = qp; p.q_stride = n_head * D; p.k = dk.p; p.k_stride = n_kv * D; p.v = dv.p; p.v_stride = n_kv * D;
      p.q_norm = c.norms ? dqn.p : nullptr; p.k_norm = c.norms ? dkn.p : nullptr; p.eps = 1e-6f;
      p.n_head = n_head; p.n_head_kv = n_kv; p.head_dim = D; p.k_cache = kc; p.v_cache = vc;
      return p;
    };
    auto args_for = [&](float* qp, uint16_t* kc, uint16_t* vc, float* o) {
      gc::AttnArgs a;
      a.q = qp; a.q_stride = n_head * D; a.k_cache = kc; a.v_cache = vc; a.n_head = n_head; a.n_head_kv = n_kv;
      a.head_dim = D; a.n_ctx = c.n_ctx; a.scale = 1.0f / std::sqrt(static_cast<float>(D)); a.out = o;
      a.out_stride = n_head * D;
      return a;
    };
    CUDA_OK(gc::qkv_post(post_for(qa.p, kca.p, vca.p), rc, cs.p, dpos.p, 1, nullptr));
    CUDA_OK(gc::attention_decode(args_for(qa.p, kca.p, vca.p, out_a.p), dpos.p, work_a.p, &q8a, nullptr));
    CUDA_OK(gc::attention_decode_post(args_for(qb.p, kcb.p, vcb.p, out_b.p), post_for(qb.p, kcb.p, vcb.p), rc, cs.p,
                                      dpos.p, work_b.p, &q8b, nullptr));
    CHECK_MSG(out_a.down() == out_b.down(), "attention_decode_post D %d n_ctx %d pos %d: output differs", D, c.n_ctx,
              c.pos);
    CHECK_MSG(qs_a.down() == qs_b.down() && ds_a.down() == ds_b.down(), "attention_decode_post D %d pos %d: Q8_1 differs",
              D, c.pos);
    CHECK_MSG(kca.down() == kcb.down() && vca.down() == vcb.down(), "attention_decode_post D %d pos %d: cache differs", D,
              c.pos);
    CHECK_MSG(qb.down() == q, "attention_decode_post changed the raw q");
  }
}

// Attention against ops/attention.cpp over the same fp16 cache.
TEST(attention_matches_cpu) {
  need_gpu();
  ThreadPool pool(2);
  // 300 positions: one head per decode block (few chunks); 8192: a KV
  // group's heads share each block (enough chunks), decode only.
  for (int n_ctx : {300, 8192})
  for (int D : {32, 64, 128}) {
    const int n_head = 8, n_kv = 2;
    RandomKv rk(n_ctx, n_head, n_kv, D);
    REQUIRE(rk.ok);
    std::vector<float> scores(static_cast<size_t>(pool.size()) * n_ctx);
    struct Case { int n, pos0; };
    const std::vector<Case> cases =
        n_ctx == 300 ? std::vector<Case>{Case{1, 0}, Case{1, 127}, Case{1, 130}, Case{1, 299}, Case{3, 0}, Case{17, 40},
                                         Case{100, 150}, Case{64, 236}}
                     : std::vector<Case>{Case{1, 5}, Case{1, 8000}};
    // gpt-oss's parameters: a sliding window (40 keys: chunks and key tiles
    // wholly below it skipped at the later positions) and a sink logit per head.
    std::vector<float> sinks = randn(n_head);
    for (float& x : sinks) x *= 2.0f;
    Dev<float> dsinks(sinks);
    for (const bool windowed : {false, true})
    for (const Case& c : cases) {
      rk.shape.sliding_window = windowed ? 40 : 0;
      rk.shape.sinks = windowed ? sinks.data() : nullptr;
      std::vector<float> q = randn(static_cast<size_t>(c.n) * n_head * D);
      std::vector<float> ref(q.size());
      attention(pool, rk.shape, rk.kv, 0, q.data(), c.n, c.pos0, ref.data(), scores.data());
      Dev<float> dq(q), out(q.size());
      Dev<int32_t> dpos(std::vector<int32_t>{c.pos0});
      gc::AttnArgs a;
      a.q = dq.p; a.q_stride = n_head * D; a.k_cache = rk.k.p; a.v_cache = rk.v.p; a.n_head = n_head; a.n_head_kv = n_kv;
      a.head_dim = D; a.n_ctx = n_ctx; a.scale = rk.shape.scale; a.out = out.p; a.out_stride = n_head * D;
      a.window = rk.shape.sliding_window;
      a.sinks = windowed ? dsinks.p : nullptr;
      double tol;
      if (c.n == 1) {
        Dev<float> work(gc::attention_decode_workspace_floats(n_head, D, n_ctx));
        work.zero();
        Dev<int8_t> qs(n_head * D);
        Dev<uint32_t> ds(n_head * D / 32);
        gc::Q8Act q8{qs.p, ds.p, n_head * D, n_head * D / 32};
        CUDA_OK(gc::attention_decode(a, dpos.p, work.p, &q8, nullptr));
        tol = 1e-4;
        // The Q8_1 copy of the output is written too.
        const std::vector<int8_t> qv = qs.down();
        const std::vector<float> o = out.down();
        const std::vector<uint32_t> dv = ds.down();
        int bad = 0;
        for (int i = 0; i < n_head * D; ++i) {
          const float sc = fp16_to_f32(static_cast<uint16_t>(dv[i / 32] & 0xFFFF));
          bad += !(std::fabs(sc * qv[i] - o[i]) <= 0.51f * sc + 1e-3f * std::fabs(o[i]) + 1e-6f);
        }
        CHECK_MSG(bad == 0, "attention_decode q8 output: %d bad", bad);
      } else {
        CUDA_OK(gc::attention_prefill(a, dpos.p, c.n, nullptr));
        tol = 5e-3;
      }
      std::vector<double> refd(ref.begin(), ref.end());
      const double err = rel_err(out.down(), refd);
      CHECK_MSG(err <= tol, "attention D %d n_ctx %d n %d pos0 %d%s: rel err %.3g > %.g", D, n_ctx, c.n, c.pos0,
                windowed ? " (window 40, sinks)" : "", err, tol);
    }
  }
}

// The kernels behind gpt-oss's step parameters against the CPU executor's
// arithmetic: bias rows on three targets in one launch, the gated unit with
// per-expert gate/up biases (swiglu-oai, and SwiGLU), the biased combine
// with a mask.
TEST(step_parameter_kernels_match_cpu) {
  need_gpu();
  const CpuKernelTable& kt = cpu_kernels_generic();
  const int n_tok = 5, qd = 96, kd = 32, n_exp = 6, k = 3, n_ff = 200, d = 64;
  // add_bias_rows: q and v (k left out), rows of stride qd + 8.
  {
    std::vector<float> q = randn(static_cast<size_t>(n_tok) * (qd + 8)), v = randn(static_cast<size_t>(n_tok) * kd);
    const std::vector<float> bq = randn(qd), bv = randn(kd);
    Dev<float> dq(q), dv(v), dbq(bq), dbv(bv);
    CUDA_OK(gc::add_bias_rows(gc::BiasRows{dq.p, qd + 8, dbq.p, qd}, gc::BiasRows{}, gc::BiasRows{dv.p, kd, dbv.p, kd},
                              n_tok, nullptr));
    const std::vector<float> gq = dq.down(), gv = dv.down();
    int bad = 0;
    for (int t = 0; t < n_tok; ++t) {
      for (int i = 0; i < qd + 8; ++i) {
        const size_t at = static_cast<size_t>(t) * (qd + 8) + i;
        bad += gq[at] != (i < qd ? q[at] + bq[i] : q[at]);  // the row's padding untouched
      }
      for (int i = 0; i < kd; ++i) bad += gv[t * kd + i] != v[t * kd + i] + bv[i];
    }
    CHECK_MSG(bad == 0, "add_bias_rows: %d elements differ", bad);
    CHECK(gc::add_bias_rows(gc::BiasRows{dq.p, 4, dbq.p, qd}, gc::BiasRows{}, gc::BiasRows{}, n_tok, nullptr) ==
          cudaErrorInvalidValue);  // stride below the row
  }
  // glu_rows: slot r biased by expert ids[r].
  const int n_slots = n_tok * k;
  std::vector<int32_t> ids(n_slots);
  for (int i = 0; i < n_slots; ++i) ids[i] = (i * 5 + 1) % n_exp;
  for (const GluParams gp : {GluParams{Glu::SwigluOai, 1.702f, 7.0f}, GluParams{}}) {
    const std::vector<float> gate = randn(static_cast<size_t>(n_slots) * n_ff, 6.0f),
                             up = randn(gate.size(), 6.0f), gb = randn(static_cast<size_t>(n_exp) * n_ff),
                             ub = randn(gb.size());
    Dev<float> dg(gate), du(up), dgb(gb), dub(ub), dout(gate.size());
    Dev<int32_t> dids(ids);
    const gc::GluArgs ga{gp.kind == Glu::SwigluOai ? gc::GluKind::SwigluOai : gc::GluKind::Silu, gp.alpha, gp.limit};
    CUDA_OK(gc::glu_rows(dg.p, du.p, n_slots, n_ff, ga, dgb.p, dub.p, dids.p, dout.p, nullptr));
    std::vector<float> a(gate.size()), b(gate.size()), ref(gate.size());
    for (int r = 0; r < n_slots; ++r)
      for (int i = 0; i < n_ff; ++i) {
        const size_t at = static_cast<size_t>(r) * n_ff + i, e = static_cast<size_t>(ids[r]) * n_ff + i;
        a[at] = gate[at] + gb[e];
        b[at] = up[at] + ub[e];
      }
    glu(kt, gp, static_cast<int64_t>(a.size()), a.data(), b.data(), ref.data());
    const std::vector<double> refd(ref.begin(), ref.end());
    const double err = rel_err(dout.down(), refd);
    CHECK_MSG(err <= 1e-6, "glu_rows (%s): rel err %.3g", gp.kind == Glu::SwigluOai ? "swiglu-oai" : "silu", err);
  }
  // moe_combine_biased: x += sum_j w (y + b[id]) over unmasked choices.
  {
    const std::vector<float> y = randn(static_cast<size_t>(n_slots) * d), w = randn(n_slots),
                             bias = randn(static_cast<size_t>(n_exp) * d), x0 = randn(static_cast<size_t>(n_tok) * d);
    std::vector<int32_t> mask(n_slots);
    for (int i = 0; i < n_slots; ++i) mask[i] = i % 4 == 1 ? -1 : i;  // some choices computed elsewhere
    for (int j = 0; j < k; ++j) mask[2 * k + j] = -1;                // token 2: none here
    Dev<float> dy(y), dw(w), db(bias), dx(x0);
    Dev<int32_t> dids(ids), dmask(mask);
    CUDA_OK(gc::moe_combine_biased(dy.p, dw.p, db.p, dids.p, dmask.p, n_tok, k, d, dx.p, nullptr));
    std::vector<double> ref(x0.begin(), x0.end());
    for (int t = 0; t < n_tok; ++t)
      for (int i = 0; i < d; ++i) {
        double acc = 0;
        for (int j = 0; j < k; ++j) {
          const int sl = t * k + j;
          if (mask[sl] >= 0) acc += w[sl] * (static_cast<double>(y[sl * d + i]) + bias[ids[sl] * d + i]);
        }
        ref[t * d + i] += acc;
      }
    const std::vector<float> got = dx.down();
    CHECK_MSG(rel_err(got, ref) <= 1e-6, "moe_combine_biased: rel err %.3g", rel_err(got, ref));
    int moved = 0;
    for (int i = 0; i < d; ++i) moved += got[2 * d + i] != x0[2 * d + i];
    CHECK_MSG(moved == 0, "moe_combine_biased changed a token with no unmasked choice");
  }
  // moe_route_sigmoid: the CPU's route_sigmoid_topk_rows on the same logits,
  // with and without the choice bias and the renormalisation; 160 experts
  // (5 per lane), k 8, a tie in the biased choice value (lower id first).
  for (const bool with_bias : {true, false})
    for (const bool renorm : {true, false}) {
      const int T = 37, E = 160, K = 8;
      std::vector<float> logits = randn(static_cast<size_t>(T) * E, 2.0f), bias = randn(E, 0.3f);
      logits[5] = logits[9];  // token 0: experts 5 and 9 tie
      bias[5] = bias[9];
      Dev<float> dl(logits), db(bias), dw(static_cast<size_t>(T) * K);
      Dev<int32_t> di(static_cast<size_t>(T) * K);
      CUDA_OK(gc::moe_route_sigmoid(dl.p, T, E, K, with_bias ? db.p : nullptr, renorm, 2.5f, di.p, dw.p, nullptr));
      ExpertRouting r;
      r.reserve(T, K, E);
      r.n_tokens = T;
      r.k = K;
      r.n_expert = E;
      route_sigmoid_topk_rows(logits.data(), with_bias ? bias.data() : nullptr, renorm, 2.5f, 0, T, &r);
      const std::vector<int32_t> gi = di.down();
      const std::vector<float> gw = dw.down();
      int ids_bad = 0;
      float w_err = 0.0f;
      for (int i = 0; i < T * K; ++i) {
        ids_bad += gi[i] != r.ids[i];
        w_err = std::max(w_err, std::fabs(gw[i] - r.weights[i]));
      }
      CHECK_MSG(ids_bad == 0 && w_err <= 2e-6f, "moe_route_sigmoid (bias %d, renorm %d): %d ids differ, weights max err %.3g",
                with_bias, renorm, ids_bad, w_err);
    }
  CHECK(gc::moe_route_sigmoid(nullptr, 1, 8, 2, nullptr, true, 1.0f, nullptr, nullptr, nullptr) == cudaErrorInvalidValue);
}

TEST(swiglu_add_argmax_get_rows) {
  need_gpu();
  const int64_t n = 1000;
  std::vector<float> g = randn(n, 3.0f), u = randn(n);
  Dev<float> dg(g), du(u), dout(n);
  CUDA_OK(gc::swiglu(dg.p, du.p, n, dout.p, nullptr));
  std::vector<float> ref(n);
  swiglu(g.data(), u.data(), n, ref.data());
  std::vector<double> refd(ref.begin(), ref.end());
  CHECK_MSG(rel_err(dout.down(), refd) <= 1e-6, "swiglu %.3g", rel_err(dout.down(), refd));
  CUDA_OK(gc::add_inplace(dg.p, du.p, n, nullptr));
  std::vector<double> sum(n);
  for (int64_t i = 0; i < n; ++i) sum[i] = static_cast<double>(g[i] + u[i]);
  CHECK(rel_err(dg.down(), sum) == 0.0);

  // argmax over many blocks per row: ties go to the first index (also across
  // blocks), NaN is skipped, -0 ties with +0, a row of NaN gives 0; the
  // workspace is left zero, so a second launch needs no reset.
  {
    const int rows = 6, cols = 151936;
    std::vector<float> x = randn(static_cast<size_t>(rows) * cols);
    x[static_cast<size_t>(1) * cols + 17] = 100.0f;
    x[static_cast<size_t>(1) * cols + 9000] = 100.0f;
    x[static_cast<size_t>(2) * cols + cols - 1] = 50.0f;
    x[static_cast<size_t>(3) * cols + 5] = std::nanf("");
    x[static_cast<size_t>(3) * cols + 70000] = 60.0f;
    for (int c = 0; c < cols; ++c) x[static_cast<size_t>(4) * cols + c] = std::nanf("");
    for (int c = 0; c < cols; ++c) x[static_cast<size_t>(5) * cols + c] = -1.0f;
    x[static_cast<size_t>(5) * cols + 300] = -0.0f;
    x[static_cast<size_t>(5) * cols + 40000] = 0.0f;
    const std::vector<int32_t> want = {
        static_cast<int32_t>(std::max_element(x.begin(), x.begin() + cols) - x.begin()), 17, cols - 1, 70000, 0, 300};
    Dev<float> dx(x);
    Dev<int32_t> am(rows);
    Dev<uint64_t> work(gc::argmax_workspace_bytes(rows) / sizeof(uint64_t));
    CUDA_OK(cudaMemset(work.p, 0, gc::argmax_workspace_bytes(rows)));
    for (int launch = 0; launch < 2; ++launch) {
      am.poison();
      CUDA_OK(gc::argmax_rows(dx.p, rows, cols, am.p, work.p, nullptr));
      const std::vector<int32_t> got = am.down();
      for (int r = 0; r < rows; ++r)
        CHECK_MSG(got[r] == want[r], "argmax launch %d row %d: %d, want %d", launch, r, got[r], want[r]);
      for (uint64_t wv : work.down()) CHECK(wv == 0);
    }
  }

  // Embedding rows: bit-exact with the CPU dequantizers.
  for (const TypeCase& tc : kTypes) {
    const int64_t n_in = tc.type == TensorType::F32 ? 37 : 512;
    HostMatrix w = random_matrix(tc.type, n_in, 50);
    DevMatrixBuf dw(w);
    std::vector<int32_t> ids = {0, 49, 7, 7, 23};
    Dev<int32_t> did(ids);
    Dev<float> out(ids.size() * n_in);
    CUDA_OK(gc::get_rows(dw.m, did.p, static_cast<int>(ids.size()), out.p, n_in, nullptr));
    const std::vector<float> o = out.down();
    int bad = 0;
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t c = 0; c < n_in; ++c) bad += std::memcmp(&o[i * n_in + c], &w.deq[ids[i] * n_in + c], 4) != 0;
    CHECK_MSG(bad == 0, "get_rows %s: %d values differ", tc.name, bad);
  }
}

// The kernels that merge blocks' partial results in "the last block to
// finish" (the fused router, argmax), and the staged gemv paths, give the
// same bits on every launch of the same inputs, however the blocks happen to
// be scheduled (ctest -j runs the other GPU tests beside this one, so the
// device is shared and block order varies). A memory-ordering race shows here
// as a changed bit long before it moves a tolerance.
TEST(kernels_repeat_bit_for_bit) {
  need_gpu();
  constexpr int kRepeats = 48;
  auto same_every_time = [&](const char* what, auto&& launch, auto&& read) {
    launch();
    const auto first = read();
    int differing = 0;
    for (int r = 1; r < kRepeats; ++r) {
      launch();
      differing += read() != first;
    }
    CHECK_MSG(differing == 0, "%s: %d of %d repeats differ from the first launch", what, differing, kRepeats - 1);
  };
  for (const TypeCase& tc : kTypes) {
    const TensorType t = tc.type;
    const char* name = tc.name;
    const int64_t n_in = 2048, n_out = 512;
    HostMatrix g = random_matrix(t, n_in, n_out), u = random_matrix(t, n_in, n_out);
    DevMatrixBuf dg(g), du(u);
    for (int cols : {1, 3, 8}) {
      std::vector<float> x = randn(static_cast<size_t>(cols) * n_in);
      DevAct a(x, cols, static_cast<int>(n_in));
      Dev<float> y(static_cast<size_t>(cols) * n_out);
      const std::string what = std::string("gemv ") + name + " cols " + std::to_string(cols);
      same_every_time(what.c_str(), [&] { CUDA_OK(gc::gemv(dg.m, a.view, cols, y.p, n_out, false, nullptr)); },
                      [&] { return y.down(); });
      const std::string what_glu = std::string("gemv_glu ") + name + " cols " + std::to_string(cols);
      same_every_time(what_glu.c_str(), [&] { CUDA_OK(gc::gemv_glu(dg.m, du.m, a.view, cols, y.p, n_out, nullptr)); },
                      [&] { return y.down(); });
    }
  }
  // Fused norm + router + top-k: logits, ids and weights.
  {
    const int n = 2048, n_expert = 128, k = 8;
    HostMatrix hr = random_matrix(TensorType::F32, n, n_expert);
    DevMatrixBuf dr(hr);
    std::vector<float> nw = randn(n, 0.3f);
    for (float& v : nw) v = (v + 1.0f) * 2.0f / std::sqrt(static_cast<float>(n));
    Dev<float> dx(randn(n, 3.0f)), dnw(nw), xn(n), logits(n_expert), wts(k);
    Dev<int32_t> ids(k);
    Dev<uint32_t> counter(1);
    counter.zero();
    Dev<int8_t> qs(n);
    Dev<uint32_t> ds(n / 32);
    gc::Q8Act q8{qs.p, ds.p, n, n / 32};
    same_every_time("moe_norm_route",
                    [&] {
                      CUDA_OK(gc::moe_norm_route(dx.p, dnw.p, 1e-6f, dr.m, k, xn.p, &q8, logits.p, ids.p, wts.p,
                                                 counter.p, nullptr));
                    },
                    [&] {
                      std::vector<float> v = logits.down();
                      const std::vector<float> w = wts.down();
                      const std::vector<int32_t> i = ids.down();
                      v.insert(v.end(), w.begin(), w.end());
                      for (int32_t id : i) v.push_back(static_cast<float>(id));
                      return v;
                    });
  }
  // argmax over the lm_head's width, many blocks per row.
  {
    const int rows = 4, cols = 151936;
    Dev<float> dx(randn(static_cast<size_t>(rows) * cols));
    Dev<int32_t> am(rows);
    Dev<uint64_t> work(gc::argmax_workspace_bytes(rows) / sizeof(uint64_t));
    work.zero();
    same_every_time("argmax_rows", [&] { CUDA_OK(gc::argmax_rows(dx.p, rows, cols, am.p, work.p, nullptr)); },
                    [&] { return am.down(); });
  }
}

// The decoder with every weight type but F32 forced through the F16 upload
// fallback (the path of a type without kernels) on a fixture model: the F16
// copies are planned and uploaded (more weight memory, the tensors counted),
// and prompt and single-token logits stay within the quantized-model rule
// (rms 0.5) of the decoder running the stored types' own kernels.
TEST(decoder_f16_upload_fallback_matches_kernels) {
  need_gpu();
  const char* fx = std::getenv("GUILD_FIXTURES");
  const std::string path = std::string(fx ? fx : "") + "/models/qwen3moe-a-Q4_K_M.gguf";
  FILE* f = fx ? std::fopen(path.c_str(), "rb") : nullptr;
  if (!f) {
    std::printf("  not run: %s not found (GUILD_FIXTURES)\n", path.c_str());
    return;
  }
  std::fclose(f);
  LoadOptions lo;
  lo.n_threads = 2;
  lo.kv_type = KvType::F16;
  std::string err;
  auto model = GuildModel::load(path, lo, &err);
  REQUIRE(model);
  gc::CudaDecoderOptions go;
  go.n_ctx = 64;
  go.max_tokens = 32;
  auto kernels = gc::CudaDecoder::create(model->hparams(), model->weights(), go, &err);
  CHECK_MSG(kernels, "create: %s", err.c_str());
  auto fallback = gc::CudaDecoder::create_with_f16_upload(model->hparams(), model->weights(), go, ~uint64_t{1}, &err);
  CHECK_MSG(fallback, "create_with_f16_upload: %s", err.c_str());
  if (!kernels || !fallback) return;
  CHECK(kernels->f16_upload_tensors() == 0);
  CHECK(fallback->f16_upload_tensors() > 0);
  CHECK_MSG(fallback->memory().weights > kernels->memory().weights, "weights %zu with F16 copies, %zu as stored",
            fallback->memory().weights, kernels->memory().weights);
  const int n_vocab = model->hparams().n_vocab, n = 20;
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((7919 * i + 13) % n_vocab);
  std::vector<float> a(static_cast<size_t>(n) * n_vocab), b(a.size(), NAN);
  CHECK_MSG(kernels->forward(ids.data(), n, 0, a.data(), true, &err), "%s", err.c_str());
  CHECK_MSG(fallback->forward(ids.data(), n, 0, b.data(), true, &err), "%s", err.c_str());
  auto rms = [&](const float* x, const float* y) {
    double sq = 0.0;
    for (int j = 0; j < n_vocab; ++j) sq += (static_cast<double>(x[j]) - y[j]) * (static_cast<double>(x[j]) - y[j]);
    return std::sqrt(sq / n_vocab);
  };
  double worst = 0.0;
  for (int i = 0; i < n; ++i) {
    const double r = rms(a.data() + static_cast<size_t>(i) * n_vocab, b.data() + static_cast<size_t>(i) * n_vocab);
    worst = std::max(worst, std::isnan(r) ? 1e30 : r);
  }
  CHECK_MSG(worst <= 0.5, "prompt logits: rms %.3g > 0.5 between the F16 upload and the kernels", worst);
  // Single-token steps (graph replays), fed the same tokens.
  int32_t tok = static_cast<int32_t>(std::max_element(a.end() - n_vocab, a.end()) - (a.end() - n_vocab));
  std::vector<float> sa(n_vocab), sb(n_vocab, NAN);
  double worst_step = 0.0;
  for (int step = 0; step < 4; ++step) {
    CHECK_MSG(kernels->forward(&tok, 1, n + step, sa.data(), false, &err), "%s", err.c_str());
    CHECK_MSG(fallback->forward(&tok, 1, n + step, sb.data(), false, &err), "%s", err.c_str());
    const double r = rms(sa.data(), sb.data());
    worst_step = std::max(worst_step, std::isnan(r) ? 1e30 : r);
    tok = static_cast<int32_t>(std::max_element(sa.begin(), sa.end()) - sa.begin());
  }
  CHECK_MSG(worst_step <= 0.5, "decode logits: rms %.3g > 0.5 between the F16 upload and the kernels", worst_step);
  std::printf("  F16 upload of %d tensors (%.1f MiB against %.1f): logits rms prompt %.4f, decode %.4f\n",
              fallback->f16_upload_tensors(), fallback->memory().weights / 1048576.0,
              kernels->memory().weights / 1048576.0, worst, worst_step);
}
