// guild-gen-model: writes a synthetic MoE GGUF (qwen3moe, gpt-oss or glm4moe)
// with random weights in the chosen tensor types and a synthetic byte-level
// BPE tokenizer (see artifact/synth_model.h). Presets give named shapes; every
// flag overrides (--layers cuts a preset to fit the RAM or disk at hand).
//   guild-gen-model --preset bench-1b --out bench-1b.gguf
//   guild-gen-model --preset qwen3-30b-a3b --out q30b.gguf --threads 16
//   guild-gen-model --preset gpt-oss-20b --out gpt-oss-20b.gguf
//   guild-gen-model --preset glm4.5-air --layers 12 --out glm-air-12.gguf
//   guild-gen-model --layers 4 --embd 512 --experts 16 --experts-used 4 --expert-ffn 256
//                   --expert-type q8_0 --dense-type q8_0 --out small.gguf
#include <chrono>
#include <cstdio>
#include <string>

#include "artifact/synth_model.h"
#include "cpu/weights/quantize_weight_iq.h"
#include "core/tensor_type.h"
#include "tool_args.h"

using namespace guild;

namespace {

const char* kUsage =
    "usage: guild-gen-model --out PATH [--preset NAME] [--arch qwen3moe|gpt-oss|glm4moe] [--seed S] [--threads N]\n"
    "       [--layers N] [--embd N] [--heads N] [--kv-heads N] [--head-dim N] [--experts N] [--experts-used N]\n"
    "       [--expert-ffn N] [--vocab N] [--ctx N] [--name NAME]\n"
    "       [--expert-type T] [--expert-down-type T] [--dense-type T] [--output-type T] [--embd-type T]\n"
    "       [--norm-type T] [--router-type T]\n"
    "       gpt-oss: [--window N] [--yarn-factor F (0 = no YaRN)]\n"
    "       glm4moe: [--ffn N] [--dense-lead N] [--shared-experts N] [--shared-ffn N] [--nextn N] [--rope-dims N]\n"
    "                [--qk-norm 0|1] [--expert-weights-scale F]\n"
    "  presets (parameters in all / active per token, tensor data; each layer --layers drops saves the last column):\n"
    "    qwen3-30b-a3b  qwen3moe 48 layers, 128 experts (8 used), Q4_K/Q6_K      30.5 B / 3.0 B,   16.3 GiB, 0.33 GiB\n"
    "    bench-1b       qwen3moe 18 layers, 64 experts (8 used) of 256          1.02 B / 0.19 B,  0.57 GiB\n"
    "    gpt-oss-120b   gpt-oss 36 layers, 128 experts (4 used), MXFP4 + Q8_0   116.8 B / 5.13 B, 59.0 GiB, 1.61 GiB\n"
    "    gpt-oss-20b    gpt-oss 24 layers, 32 experts (4 used), MXFP4 + Q8_0    20.9 B / 3.61 B,  11.3 GiB, 0.42 GiB\n"
    "    glm4.5-air     glm4moe 46 layers (1 dense) + 1 nextn, 128 experts (8)  109.2 B / 12.8 B, 62.9 GiB, 1.35 GiB\n"
    "                   (106.9 B without the nextn block, as GLM counts)\n"
    "  types: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 mxfp4 q2_K q4_K q5_K q6_K iq2_xxs\n"
    "  (a 256-block type on rows it does not divide falls back as in llama-quantize: q4_K -> q5_0, q6_K -> q8_0, ...)\n"
    "  (--expert-down-type sets ffn_down_exps, default --expert-type: mixes like Unsloth's dynamic quants)\n"
    "  (--dense-type sets the attention matrices and, unless --output-type is given, the output head)\n";

void print_progress(const char* msg) { std::fprintf(stderr, "guild-gen-model: %s\n", msg); }

}  // namespace

int main(int argc, char** argv) {
  register_grid_weight_quantizers();
  tools::Args args;
  if (!args.parse(argc, argv,
                  {"out", "preset", "arch", "seed", "threads", "layers", "embd", "heads", "kv-heads", "head-dim", "experts",
                   "experts-used", "expert-ffn", "vocab", "ctx", "name", "expert-type", "expert-down-type", "dense-type", "output-type",
                   "embd-type", "norm-type", "router-type", "window", "yarn-factor", "ffn", "dense-lead", "shared-experts",
                   "shared-ffn", "nextn", "rope-dims", "qk-norm", "expert-weights-scale"},
                  {}, kUsage))
    return 2;
  if (!args.has("out")) { std::fprintf(stderr, "%s", kUsage); return 2; }
  synth::MoeModelConfig c;
  if (args.has("preset") && !synth::apply_preset(args.get("preset"), &c)) {
    std::string names;
    for (const std::string& n : synth::preset_names()) names += (names.empty() ? "" : ", ") + n;
    tools::die("unknown preset '" + args.get("preset") + "' (" + names + ")");
  }
  if (args.has("arch")) {
    if (args.has("preset") && args.get("arch") != c.arch)
      tools::die("--arch " + args.get("arch") + " contradicts preset " + args.get("preset") + " (" + c.arch + ")");
    c.arch = args.get("arch");
    if (!args.has("preset")) c.name = "guild-synthetic-" + c.arch;
  }
  auto dim = [&](const char* flag, int* v) { *v = static_cast<int>(args.get_int(flag, *v)); };
  auto real = [&](const char* flag, float* v) { *v = static_cast<float>(args.get_float(flag, *v)); };
  dim("layers", &c.n_layer);
  dim("embd", &c.n_embd);
  dim("heads", &c.n_head);
  dim("kv-heads", &c.n_head_kv);
  dim("head-dim", &c.head_dim);
  dim("experts", &c.n_expert);
  dim("experts-used", &c.n_expert_used);
  dim("expert-ffn", &c.n_ff_exp);
  dim("vocab", &c.n_vocab);
  dim("ctx", &c.n_ctx_train);
  dim("window", &c.sliding_window);
  real("yarn-factor", &c.yarn_factor);
  dim("ffn", &c.n_ff);
  dim("dense-lead", &c.n_dense_lead);
  dim("shared-experts", &c.n_expert_shared);
  dim("shared-ffn", &c.n_ff_shexp);
  dim("nextn", &c.n_nextn);
  dim("rope-dims", &c.rope_dims);
  real("expert-weights-scale", &c.expert_weights_scale);
  if (args.has("qk-norm")) c.qk_norm = args.get_int("qk-norm", 1) != 0;
  c.seed = static_cast<uint64_t>(args.get_int("seed", static_cast<long long>(c.seed)));
  if (args.has("name")) c.name = args.get("name");
  auto type = [&](const char* flag, uint32_t* v) {
    if (!args.has(flag)) return;
    if (!synth::parse_type(args.get(flag), v)) tools::die("--" + std::string(flag) + ": unknown or unsupported type '" + args.get(flag) + "'");
  };
  type("expert-type", &c.expert_type);
  c.expert_down_type = c.expert_type;
  type("expert-down-type", &c.expert_down_type);
  type("dense-type", &c.dense_type);
  if (args.has("dense-type") && !args.has("output-type")) c.output_type = c.dense_type;
  type("output-type", &c.output_type);
  type("embd-type", &c.embd_type);
  type("norm-type", &c.norm_type);
  type("router-type", &c.router_type);
  const std::string problem = synth::validate(c);
  if (!problem.empty()) tools::die(problem);

  const synth::ParamCounts p = synth::count_params(c);
  std::fprintf(stderr,
               "guild-gen-model: %s %d layers, embd %d, heads %d/%d x %d, experts %d (%d used) x ffn %d, vocab %d\n"
               "guild-gen-model: experts %s (down %s), attention %s, output %s, embedding %s, norms %s, router %s\n"
               "guild-gen-model: %.3f B parameters (%.3f B active per token), %.2f GiB of tensor data\n",
               c.arch.c_str(), c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_expert, c.n_expert_used, c.n_ff_exp, c.n_vocab,
               std::string(tensor_type_name(c.expert_type)).c_str(), std::string(tensor_type_name(c.expert_down_type)).c_str(),
               std::string(tensor_type_name(c.dense_type)).c_str(),
               std::string(tensor_type_name(c.output_type)).c_str(), std::string(tensor_type_name(c.embd_type)).c_str(),
               std::string(tensor_type_name(c.norm_type)).c_str(), std::string(tensor_type_name(c.router_type)).c_str(),
               p.total / 1e9, p.active / 1e9, p.file_bytes / 1073741824.0);
  if (c.arch == "glm4moe")
    std::fprintf(stderr,
                 "guild-gen-model: glm4moe %d dense + %d MoE layers (dense ffn %d, %d shared expert(s)), %d nextn block(s) "
                 "(%.3f B of the parameters)\n",
                 c.n_dense_lead, c.n_layer - c.n_dense_lead, c.n_ff, c.n_expert_shared, c.n_nextn, p.nextn / 1e9);
  if (c.arch == "gpt-oss")
    std::fprintf(stderr, "guild-gen-model: gpt-oss sliding window %d on even layers, YaRN factor %g\n", c.sliding_window,
                 c.yarn_factor);
  for (const std::string& f : synth::type_fallbacks(c)) std::fprintf(stderr, "guild-gen-model: fallback type %s\n", f.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  std::string err;
  if (!synth::write_moe_model(c, args.get("out"), static_cast<int>(args.get_int("threads", 0)), &err, print_progress))
    tools::die(err);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "guild-gen-model: wrote %s in %.1f s\n", args.get("out").c_str(), s);
  return 0;
}
