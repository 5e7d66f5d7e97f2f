// The CPU half of hybrid MoE (runtime/cpu_experts.h), without a GPU: on a
// fixture model's MoE layers, CpuExpertRunner::run must equal a float
// reference — dequantized weights, silu(gate·x)·(up·x), down, weighted sum —
// over exactly the choices whose expert is not cached (slot_of < 0), within
// the activation quantization's error, write zeros for tokens with none, and
// give identical results however the CPU choices are split between calls.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "check.h"
#include "runtime/cpu_experts.h"
#include "runtime/model.h"

using namespace guild;

namespace {

std::vector<float> dequant_row(const QMatrix& m, int64_t r) {
  std::vector<float> out(m.n_in);
  m.kernels->dequant_row(m.row(r), out.data(), m.n_in);
  return out;
}

// y = W x with W's rows dequantized, in double.
std::vector<double> matvec(const QMatrix& m, const std::vector<double>& x) {
  std::vector<double> y(m.n_out);
  for (int64_t r = 0; r < m.n_out; ++r) {
    const std::vector<float> w = dequant_row(m, r);
    double acc = 0;
    for (int64_t i = 0; i < m.n_in; ++i) acc += static_cast<double>(w[i]) * x[i];
    y[r] = acc;
  }
  return y;
}

std::vector<double> expert_ffn(const LayerWeights& L, int e, const float* x, int64_t n) {
  std::vector<double> xd(x, x + n);
  const std::vector<double> g = matvec(L.gate_exps.expert(e), xd), u = matvec(L.up_exps.expert(e), xd);
  std::vector<double> h(g.size());
  for (size_t i = 0; i < g.size(); ++i) h[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return matvec(L.down_exps.expert(e), h);
}

// Relative error of out ([n][d]) against the weighted sum of each token's
// choices the CPU computes: a negative id or a cached expert (slot_of >= 0)
// is someone else's.
double rel_error_vs_reference(const LayerWeights& L, int n, int k, int d, const float* xn, const int32_t* ids,
                              const float* w, const int32_t* slot_of, const float* out) {
  double err2 = 0, ref2 = 0;
  for (int t = 0; t < n; ++t) {
    std::vector<double> ref(d, 0.0);
    for (int j = 0; j < k; ++j) {
      const int e = ids[t * k + j];
      if (e < 0 || slot_of[e] >= 0) continue;
      const std::vector<double> y = expert_ffn(L, e, xn + static_cast<size_t>(t) * d, d);
      for (int i = 0; i < d; ++i) ref[i] += w[t * k + j] * y[i];
    }
    for (int i = 0; i < d; ++i) {
      const double diff = out[static_cast<size_t>(t) * d + i] - ref[i];
      err2 += diff * diff;
      ref2 += ref[i] * ref[i];
    }
  }
  return std::sqrt(err2 / std::max(ref2, 1e-30));
}

// One step's inputs: n tokens of random rows, choice j of token t routed to
// expert (t * t_mul + j * j_mul) % n_expert with weight 1 / (j + w_base).
struct Step {
  int n = 0;
  std::vector<float> x, w;
  std::vector<int32_t> ids;
};
Step make_step(std::mt19937& rng, int n, int d, int k, int n_expert, int t_mul, int j_mul, int w_base) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Step st;
  st.n = n;
  st.x.resize(static_cast<size_t>(n) * d);
  for (float& v : st.x) v = normal(rng);
  st.ids.resize(static_cast<size_t>(n) * k);
  st.w.resize(st.ids.size());
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      st.ids[t * k + j] = (t * t_mul + j * j_mul) % n_expert;
      st.w[t * k + j] = 1.0f / static_cast<float>(j + w_base);
    }
  return st;
}

// Largest |difference| between one call for the whole step and one call per
// token (per-token results must not depend on the batch); the batch's output in *batch.
double batch_vs_single(CpuExpertRunner& runner, int layer, const Step& st, int d, int k, const int32_t* slot_of,
                       std::vector<float>* batch) {
  batch->assign(static_cast<size_t>(st.n) * d, NAN);
  std::vector<float> single(batch->size(), NAN);
  runner.run(layer, st.n, st.x.data(), st.ids.data(), st.w.data(), slot_of, batch->data());
  for (int t = 0; t < st.n; ++t)
    runner.run(layer, 1, st.x.data() + static_cast<size_t>(t) * d, st.ids.data() + t * k, st.w.data() + t * k, slot_of,
               single.data() + static_cast<size_t>(t) * d);
  double worst = 0;
  for (size_t i = 0; i < batch->size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs((*batch)[i] - single[i])));
  return worst;
}

}  // namespace

TEST(cpu_expert_runner_matches_a_float_reference_on_uncached_choices) {
  const std::string fx = check::fixtures_dir();
  LoadOptions opt;
  opt.n_threads = 2;
  opt.gpu = "cpu";
  std::string err;
  auto m = GuildModel::load(fx + "/models/qwen3moe-a-Q8_0.gguf", opt, &err);
  if (!m) SKIP_TEST("qwen3moe-a-Q8_0 not loadable: " + err);
  const ModelHparams& hp = m->hparams();
  const int k = hp.n_expert_used, n = 3, d = hp.n_embd;
  CpuExpertRunner runner;
  REQUIRE(runner.init(hp, m->weights(), m->kernels(), m->pool(), 64, -1));

  std::mt19937 rng(7);
  const Step step = make_step(rng, n, d, k, hp.n_expert, 3, 5, 1);
  const std::vector<float>& xn = step.x;
  const std::vector<int32_t>& ids = step.ids;
  const std::vector<float>& w = step.w;
  // Even experts "cached" on the GPU; the runner computes the odd ones.
  std::vector<int32_t> slot_of(hp.n_expert);
  for (int e = 0; e < hp.n_expert; ++e) slot_of[e] = e % 2 == 0 ? e / 2 : -1;

  int layers = 0;
  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& L = m->weights().layers[l];
    if (!L.is_moe()) continue;
    std::vector<float> out(static_cast<size_t>(n) * d, NAN);
    runner.run(l, n, xn.data(), ids.data(), w.data(), slot_of.data(), out.data());
    const double rel = rel_error_vs_reference(L, n, k, d, xn.data(), ids.data(), w.data(), slot_of.data(), out.data());
    std::printf("  layer %d: relative error %.2e against the float reference\n", l, rel);
    CHECK_MSG(rel < 2e-2, "layer %d: relative error %.3g", l, rel);
    ++layers;
  }
  CHECK(layers > 0);

  // Every choice cached: zeros, not stale rows.
  std::vector<int32_t> all_cached(hp.n_expert, 0);
  std::vector<float> out(static_cast<size_t>(n) * d, NAN);
  runner.run(0, n, xn.data(), ids.data(), w.data(), all_cached.data(), out.data());
  bool zeros = true;
  for (float v : out) zeros = zeros && v == 0.0f;
  CHECK(zeros);

  // Choices exported as -1 (taken by the GPU, which reads those experts from
  // host memory) are skipped: the same as leaving them out of the sum.
  {
    const int l0 = [&] {
      for (int l = 0; l < hp.n_layer; ++l)
        if (m->weights().layers[l].is_moe()) return l;
      return -1;
    }();
    REQUIRE(l0 >= 0);
    std::vector<int32_t> taken = ids;
    int n_taken = 0;
    for (size_t s = 0; s < taken.size(); ++s)
      if (slot_of[taken[s]] < 0 && s % 2 == 0) { taken[s] = -1; ++n_taken; }
    CHECK(n_taken > 0);
    std::vector<float> got(static_cast<size_t>(n) * d, NAN);
    runner.run(l0, n, xn.data(), taken.data(), w.data(), slot_of.data(), got.data());
    const double rel = rel_error_vs_reference(m->weights().layers[l0], n, k, d, xn.data(), taken.data(), w.data(),
                                              slot_of.data(), got.data());
    std::printf("  %d choices taken by the GPU: relative error %.2e\n", n_taken, rel);
    CHECK_MSG(rel < 2e-2, "choices taken by the GPU: relative error %.3g", rel);
  }

  // One call for three tokens == three calls of one token (per-token results do not depend on the batch).
  std::vector<float> batch;
  const double worst = batch_vs_single(runner, 0, step, d, k, slot_of.data(), &batch);
  std::printf("  batch vs single-token calls: max |d| %.3g\n", worst);
  CHECK(worst < 1e-4);

  // A prompt-sized step (its weighted sums spread over the pool): against the
  // reference, and each token as its own call gives the same bits.
  {
    const int nb = 64;
    const Step big_step = make_step(rng, nb, d, k, hp.n_expert, 7, 3, 2);
    std::vector<float> big;
    const double w64 = batch_vs_single(runner, 0, big_step, d, k, slot_of.data(), &big);
    const double rel = rel_error_vs_reference(m->weights().layers[0], nb, k, d, big_step.x.data(),
                                              big_step.ids.data(), big_step.w.data(), slot_of.data(), big.data());
    CHECK_MSG(rel < 2e-2, "%d tokens: relative error %.3g", nb, rel);
    std::printf("  %d tokens in one call vs one by one: max |d| %.3g\n", nb, w64);
    CHECK(w64 < 1e-4);
  }
}
