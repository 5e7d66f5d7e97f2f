// Tile kernels (TypeKernels::gemm) and attention kernels of every kernel
// table, on random data:
//  * gemm tiles: every entry of every tile shape (rows 1..9 and 37, tokens
//    1..9 and 13) equals the same table's vec_dot of that row and token bit
//    for bit (the tiling never changes a result), and is within 1e-5 *
//    sum |w_i a_i| of the cpu-generic vec_dot (the reference dot); the
//    quantized types and F16 / BF16 (with F16 / BF16 activations, rows of
//    any length: partial SIMD chunks included);
//  * batches of >= 32 tokens (where cpu-avx512 uses the AMX tile unit for
//    Q8_0 and Q4_K when it can): within 1e-5 * sum |w_i a_i| of cpu-generic
//    for every table (bit-identical to vec_dot except on the AMX path);
//  * attention scores / PV / softmax / SwiGLU of each SIMD table against
//    cpu-generic (scores and PV: 1e-5 of the sum of |terms|; exp: 4e-7
//    relative), and each query row's result independent of how many rows are
//    computed together and of how many keys follow it (bit for bit).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "artifact/weight_quant.h"
#include "check.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "core/kernel_table.h"
#include "core/quant_blocks.h"
#include "core/tensor_type.h"

using namespace guild;

namespace {

using Rng = std::mt19937_64;

uint32_t tid(TensorType t) { return static_cast<uint32_t>(t); }
const CpuKernelTable& gen() { return cpu_kernels_generic(); }

// Every table this binary has and this CPU runs (generic first).
std::vector<const CpuKernelTable*> tables() {
  std::vector<const CpuKernelTable*> out{&gen()};
  if (cpu_kernels_avx2() && cpu_features().has_avx2_table_isa()) out.push_back(cpu_kernels_avx2());
  else std::printf("  (cpu-avx2 not available here)\n");
  if (cpu_kernels_avx512() && cpu_features().has_avx512_table_isa()) out.push_back(cpu_kernels_avx512());
  else std::printf("  (cpu-avx512 not available here)\n");
  std::printf("  (AMX tile unit %s)\n", cpu_amx_usable() ? "in use for cpu-avx512's Q8_0/Q4_K batches" : "not available");
  const char* no_bf16 = std::getenv("GUILD_DISABLE_AVX512BF16");
  std::printf("  (AVX512-BF16 %s)\n", !cpu_features().avx512bf16         ? "not available"
                                      : no_bf16 && *no_bf16 && std::string(no_bf16) != "0" ? "turned off by GUILD_DISABLE_AVX512BF16"
                                                                                           : "in use for cpu-avx512's BF16 tiles");
  return out;
}

std::vector<float> normals(Rng& rng, int64_t n, float sigma) {
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  for (int k = 0; k < 3 && n > 0; ++k) v[rng() % n] *= 6.0f;  // a few outliers
  return v;
}

size_t row_bytes(TensorType t, int64_t n) {
  uint64_t b = 0;
  tensor_row_bytes(tid(t), static_cast<uint64_t>(n), &b);
  return static_cast<size_t>(b);
}

// sum_i |w_i a_i| over the dequantized values (the tolerance base).
double abs_terms(TensorType wt, const uint8_t* w, TensorType at, const uint8_t* a, int64_t n) {
  std::vector<float> wf(n), af(n);
  gen().types[tid(wt)].dequant_row(w, wf.data(), n);
  if (at == TensorType::Q8_K) {
    const auto* b = reinterpret_cast<const BlockQ8_K*>(a);
    for (int64_t i = 0; i < n; ++i) af[i] = b[i / 256].d * b[i / 256].qs[i % 256];
  } else if (at == TensorType::F16 || at == TensorType::BF16) {
    gen().types[tid(at)].dequant_row(a, af.data(), n);
  } else {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(a);
    for (int64_t i = 0; i < n; ++i) af[i] = fp16_to_f32(b[i / 32].d) * b[i / 32].qs[i % 32];
  }
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(wf[i]) * af[i]);
  return s;
}

}  // namespace

TEST(gemm_tiles_equal_vec_dot) {
  Rng rng(99);
  const TensorType types[] = {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::F16,
                              TensorType::BF16};
  int tiles = 0, entries = 0;
  for (const CpuKernelTable* t : tables()) {
    for (TensorType wt : types) {
      const TypeKernels& k = t->types[tid(wt)];
      if (!k.gemm) continue;
      const TensorType at = k.vec_dot_type;
      const bool half = wt == TensorType::F16 || wt == TensorType::BF16;
      const std::vector<int64_t> sizes = half                     ? std::vector<int64_t>{1, 7, 16, 31, 33, 100, 1031}
                                         : wt == TensorType::Q8_0 ? std::vector<int64_t>{32, 96, 352, 1024}
                                                                  : std::vector<int64_t>{256, 768, 2048};
      for (int64_t n : sizes) {
        const size_t wb = row_bytes(wt, n), ab = row_bytes(at, n);
        const int max_rows = 37, max_act = 13;
        std::vector<uint8_t> w(wb * max_rows), a(ab * max_act);
        for (int r = 0; r < max_rows; ++r) {
          const std::vector<float> f = normals(rng, n, 0.05f);
          REQUIRE(quantize_weight_row(tid(wt), f.data(), n, w.data() + r * wb));
        }
        for (int i = 0; i < max_act; ++i) {
          const std::vector<float> f = normals(rng, n, 1.0f);
          gen().quantize_act[tid(at)](f.data(), a.data() + i * ab, n);
        }
        for (int n_rows : {1, 2, 3, 4, 5, 7, 9, 37}) {
          for (int n_act : {1, 2, 3, 4, 5, 6, 8, 9, 13}) {
            std::vector<const void*> act(n_act);
            std::vector<float> y(static_cast<size_t>(n_act) * n_rows, -1.0f);
            std::vector<float*> out(n_act);
            for (int i = 0; i < n_act; ++i) {
              act[i] = a.data() + i * ab;
              out[i] = y.data() + static_cast<size_t>(i) * n_rows;
            }
            k.gemm(n, w.data(), wb, n_rows, act.data(), out.data(), n_act);
            for (int i = 0; i < n_act; ++i)
              for (int r = 0; r < n_rows; ++r) {
                const float want = k.vec_dot(n, w.data() + r * wb, act[i]);
                const float got = out[i][r];
                CHECK_MSG(std::memcmp(&want, &got, 4) == 0, "%s %s n=%lld tile %dx%d entry (%d,%d): %.9g vs vec_dot %.9g",
                          t->name, std::string(tensor_type_name(tid(wt))).c_str(), (long long)n, n_rows, n_act, r, i, got,
                          want);
                const float ref = gen().types[tid(wt)].vec_dot(n, w.data() + r * wb, act[i]);
                const double base = abs_terms(wt, w.data() + r * wb, at, a.data() + i * ab, n);
                CHECK_MSG(std::fabs(static_cast<double>(got) - ref) <= 1e-5 * base + 1e-30,
                          "%s %s n=%lld: %.9g vs generic %.9g (base %.3g)", t->name,
                          std::string(tensor_type_name(tid(wt))).c_str(), (long long)n, got, ref, base);
                ++entries;
              }
            ++tiles;
          }
        }
      }
    }
  }
  std::printf("  %d tiles, %d entries checked\n", tiles, entries);
}

// Large batches: the AMX path (>= 32 activation rows, cpu-avx512 Q8_0/Q4_K
// where usable) and the other tiles, against cpu-generic; partial row and
// token tiles and scattered activation rows included.
TEST(gemm_batches_match_generic) {
  Rng rng(1234);
  int entries = 0;
  for (const CpuKernelTable* t : tables()) {
    if (t == &gen()) continue;
    for (TensorType wt : {TensorType::Q4_K, TensorType::Q8_0, TensorType::Q6_K, TensorType::Q5_K, TensorType::F16,
                          TensorType::BF16}) {
      const TypeKernels& k = t->types[tid(wt)];
      if (!k.gemm) continue;
      const TensorType at = k.vec_dot_type;
      for (int64_t n : {256, 1024}) {
        const size_t wb = row_bytes(wt, n), ab = row_bytes(at, n);
        for (auto [n_rows, n_act] : {std::pair{16, 32}, std::pair{37, 45}, std::pair{64, 64}, std::pair{5, 33}}) {
          std::vector<uint8_t> w(wb * n_rows), a(ab * n_act);
          for (int r = 0; r < n_rows; ++r) {
            const std::vector<float> f = normals(rng, n, 0.05f);
            REQUIRE(quantize_weight_row(tid(wt), f.data(), n, w.data() + r * wb));
          }
          // Activation rows scattered (every other row of a buffer), as expert slots are.
          std::vector<uint8_t> abuf(ab * 2 * n_act);
          std::vector<const void*> act(n_act);
          for (int i = 0; i < n_act; ++i) {
            const std::vector<float> f = normals(rng, n, 1.0f);
            gen().quantize_act[tid(at)](f.data(), abuf.data() + (2 * i + (i % 3 == 0)) * ab, n);
            act[i] = abuf.data() + (2 * i + (i % 3 == 0)) * ab;
          }
          std::vector<float> y(static_cast<size_t>(n_act) * n_rows, -7.0f);
          std::vector<float*> out(n_act);
          for (int i = 0; i < n_act; ++i) out[i] = y.data() + static_cast<size_t>(i) * n_rows;
          k.gemm(n, w.data(), wb, n_rows, act.data(), out.data(), n_act);
          for (int i = 0; i < n_act; ++i)
            for (int r = 0; r < n_rows; ++r) {
              const float got = out[i][r];
              const float ref = gen().types[tid(wt)].vec_dot(n, w.data() + r * wb, act[i]);
              const double base = abs_terms(wt, w.data() + r * wb, at, static_cast<const uint8_t*>(act[i]), n);
              CHECK_MSG(std::fabs(static_cast<double>(got) - ref) <= 1e-5 * base + 1e-30,
                        "%s %s n=%lld %dx%d (%d,%d): %.9g vs generic %.9g (base %.3g)", t->name,
                        std::string(tensor_type_name(tid(wt))).c_str(), (long long)n, n_rows, n_act, r, i, got, ref, base);
              const bool amx_path = cpu_amx_usable() && std::string(t->name) == "cpu-avx512" &&
                                    (wt == TensorType::Q8_0 || wt == TensorType::Q4_K);
              if (!amx_path) {
                const float vd = k.vec_dot(n, w.data() + r * wb, act[i]);
                CHECK(std::memcmp(&vd, &got, 4) == 0);
              }
              ++entries;
            }
        }
      }
    }
  }
  std::printf("  %d entries checked\n", entries);
}

namespace {

struct KvRows {
  std::vector<uint16_t> h;
  std::vector<float> f;
};

KvRows random_kv(Rng& rng, int n_rows, int64_t stride) {
  KvRows kv;
  const std::vector<float> v = normals(rng, n_rows * stride, 1.0f);
  kv.f = v;
  kv.h.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    kv.h[i] = f32_to_fp16(v[i]);
    kv.f[i] = fp16_to_f32(kv.h[i]);  // same values in both encodings
  }
  return kv;
}

}  // namespace

TEST(attention_kernels_match_generic) {
  Rng rng(7);
  int cases = 0;
  for (const CpuKernelTable* t : tables()) {
    if (t == &gen()) continue;
    for (int hd : {64, 80, 128}) {
      for (int n_keys : {1, 5, 16, 33, 200}) {
        const int n_q = 7;
        const int64_t stride = 2 * hd + 16;  // rows of several heads, as in the KV cache
        const KvRows k = random_kv(rng, n_keys, stride), v = random_kv(rng, n_keys, stride);
        std::vector<std::vector<float>> q(n_q);
        for (auto& row : q) row = normals(rng, hd, 1.0f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        for (int f16 = 0; f16 < 2; ++f16) {
          // scores: all rows at once, each row alone, and the generic reference.
          std::vector<std::vector<float>> s_all(n_q, std::vector<float>(n_keys)), s_one = s_all, s_ref = s_all;
          std::vector<const float*> qp(n_q);
          std::vector<float*> sa(n_q), so(n_q), sr(n_q);
          for (int i = 0; i < n_q; ++i) {
            qp[i] = q[i].data();
            sa[i] = s_all[i].data();
            so[i] = s_one[i].data();
            sr[i] = s_ref[i].data();
          }
          const int64_t off = hd;  // the second head of each row
          auto scores = [&](const CpuKernelTable& tb, const float* const* qq, int nq, float* const* ss) {
            if (f16) tb.attn_scores_f16(n_keys, hd, k.h.data() + off, stride, qq, nq, scale, ss);
            else tb.attn_scores_f32(n_keys, hd, k.f.data() + off, stride, qq, nq, scale, ss);
          };
          scores(*t, qp.data(), n_q, sa.data());
          for (int i = 0; i < n_q; ++i) scores(*t, qp.data() + i, 1, so.data() + i);
          scores(gen(), qp.data(), n_q, sr.data());
          // Fewer keys (a shorter history, as in decode) give the same leading scores.
          if (n_keys > 3) {
            std::vector<std::vector<float>> s_short(n_q, std::vector<float>(n_keys));
            std::vector<float*> ss(n_q);
            for (int i = 0; i < n_q; ++i) ss[i] = s_short[i].data();
            const int n_short = n_keys - 3;
            if (f16) t->attn_scores_f16(n_short, hd, k.h.data() + off, stride, qp.data(), n_q, scale, ss.data());
            else t->attn_scores_f32(n_short, hd, k.f.data() + off, stride, qp.data(), n_q, scale, ss.data());
            for (int i = 0; i < n_q; ++i)
              CHECK_MSG(std::memcmp(s_short[i].data(), s_all[i].data(), 4 * n_short) == 0, "%s scores depend on n_keys",
                        t->name);
          }
          for (int i = 0; i < n_q; ++i)
            for (int j = 0; j < n_keys; ++j) {
              CHECK_MSG(std::memcmp(&s_all[i][j], &s_one[i][j], 4) == 0, "%s scores hd=%d row %d key %d: batch %.9g alone %.9g",
                        t->name, hd, i, j, s_all[i][j], s_one[i][j]);
              double base = 0;
              for (int d = 0; d < hd; ++d) base += std::fabs(static_cast<double>(q[i][d]) * k.f[j * stride + off + d]);
              CHECK_MSG(std::fabs(s_all[i][j] - s_ref[i][j]) <= 1e-5 * base * scale + 1e-30, "%s scores %.9g vs %.9g",
                        t->name, s_all[i][j], s_ref[i][j]);
            }
          // softmax_exp on each row (vs generic), then PV.
          for (int i = 0; i < n_q; ++i) {
            std::vector<float> g = s_all[i];
            const float sum = t->softmax_exp(n_keys, s_all[i].data());
            const float gsum = gen().softmax_exp(n_keys, g.data());
            CHECK_MSG(std::fabs(sum - gsum) <= 1e-6f * gsum, "%s softmax sum %.9g vs %.9g", t->name, sum, gsum);
            for (int j = 0; j < n_keys; ++j)
              CHECK_MSG(std::fabs(s_all[i][j] - g[j]) <= 4e-7f * g[j] + 1e-37f, "%s exp %.9g vs %.9g", t->name, s_all[i][j], g[j]);
          }
          std::vector<std::vector<float>> o_all(n_q, std::vector<float>(hd)), o_one = o_all, o_ref = o_all;
          std::vector<const float*> pp(n_q);
          std::vector<float*> oa(n_q), oo(n_q), orf(n_q);
          for (int i = 0; i < n_q; ++i) {
            pp[i] = s_all[i].data();
            oa[i] = o_all[i].data();
            oo[i] = o_one[i].data();
            orf[i] = o_ref[i].data();
          }
          auto pv = [&](const CpuKernelTable& tb, const float* const* p, int nq, float* const* o) {
            if (f16) tb.attn_pv_f16(n_keys, hd, v.h.data() + off, stride, p, nq, o);
            else tb.attn_pv_f32(n_keys, hd, v.f.data() + off, stride, p, nq, o);
          };
          pv(*t, pp.data(), n_q, oa.data());
          for (int i = 0; i < n_q; ++i) pv(*t, pp.data() + i, 1, oo.data() + i);
          pv(gen(), pp.data(), n_q, orf.data());
          for (int i = 0; i < n_q; ++i)
            for (int d = 0; d < hd; ++d) {
              CHECK_MSG(std::memcmp(&o_all[i][d], &o_one[i][d], 4) == 0, "%s pv hd=%d row %d dim %d: batch %.9g alone %.9g",
                        t->name, hd, i, d, o_all[i][d], o_one[i][d]);
              double base = 0;
              for (int j = 0; j < n_keys; ++j) base += std::fabs(static_cast<double>(pp[i][j]) * v.f[j * stride + off + d]);
              CHECK_MSG(std::fabs(o_all[i][d] - o_ref[i][d]) <= 1e-5 * base + 1e-30, "%s pv %.9g vs %.9g", t->name,
                        o_all[i][d], o_ref[i][d]);
            }
          ++cases;
        }
      }
    }
  }
  std::printf("  %d attention cases\n", cases);
}

TEST(exp_and_swiglu_match_generic) {
  Rng rng(11);
  for (const CpuKernelTable* t : tables()) {
    if (t == &gen()) continue;
    // softmax_exp over a wide range, including values that underflow to 0.
    for (int n : {1, 7, 16, 17, 100, 1000}) {
      std::vector<float> x(n);
      std::uniform_real_distribution<float> u(-120.0f, 5.0f);
      for (auto& v : x) v = u(rng);
      std::vector<float> a = x, b = x;
      const float sa = t->softmax_exp(n, a.data()), sb = gen().softmax_exp(n, b.data());
      CHECK_MSG(std::fabs(sa - sb) <= 1e-6f * sb, "%s n=%d sum %.9g vs %.9g", t->name, n, sa, sb);
      for (int i = 0; i < n; ++i)
        CHECK_MSG(std::fabs(a[i] - b[i]) <= 4e-7f * b[i] + 1e-37f, "%s n=%d exp(%.9g): %.9g vs %.9g", t->name, n,
                  x[i] - *std::max_element(x.begin(), x.end()), a[i], b[i]);
    }
    for (int n : {1, 15, 16, 33, 1000}) {
      std::vector<float> g = normals(rng, n, 4.0f), u = normals(rng, n, 1.0f), ya(n), yb(n);
      g[0] = -100.0f;  // exp(100) is large but finite in float
      t->swiglu_f32(n, g.data(), u.data(), ya.data());
      gen().swiglu_f32(n, g.data(), u.data(), yb.data());
      for (int i = 0; i < n; ++i)
        CHECK_MSG(std::fabs(ya[i] - yb[i]) <= 1e-6f * std::fabs(yb[i]) + 1e-30f, "%s swiglu(%.9g, %.9g): %.9g vs %.9g",
                  t->name, g[i], u[i], ya[i], yb[i]);
    }
  }
}
