// guild-gen-model: writes a synthetic qwen3moe GGUF with random weights in the
// chosen tensor types and a synthetic byte-level BPE tokenizer (see
// artifact/synth_model.h). Presets give named shapes; every flag overrides.
//   guild-gen-model --preset bench-1b --out bench-1b.gguf
//   guild-gen-model --preset qwen3-30b-a3b --out q30b.gguf --threads 16
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
    "usage: guild-gen-model --out PATH [--preset qwen3-30b-a3b|bench-1b] [--seed S] [--threads N]\n"
    "       [--layers N] [--embd N] [--heads N] [--kv-heads N] [--head-dim N] [--experts N] [--experts-used N]\n"
    "       [--expert-ffn N] [--vocab N] [--ctx N] [--name NAME]\n"
    "       [--expert-type T] [--expert-down-type T] [--dense-type T] [--output-type T] [--embd-type T]\n"
    "       [--norm-type T] [--router-type T]\n"
    "  types: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q4_K q5_K q6_K iq2_xxs\n"
    "  (--expert-down-type sets ffn_down_exps, default --expert-type: mixes like Unsloth's dynamic quants)\n"
    "  (--dense-type sets the attention matrices and, unless --output-type is given, the output head)\n";

void print_progress(const char* msg) { std::fprintf(stderr, "guild-gen-model: %s\n", msg); }

}  // namespace

int main(int argc, char** argv) {
  register_grid_weight_quantizers();
  tools::Args args;
  if (!args.parse(argc, argv,
                  {"out", "preset", "seed", "threads", "layers", "embd", "heads", "kv-heads", "head-dim", "experts",
                   "experts-used", "expert-ffn", "vocab", "ctx", "name", "expert-type", "expert-down-type", "dense-type", "output-type",
                   "embd-type", "norm-type", "router-type"},
                  {}, kUsage))
    return 2;
  if (!args.has("out")) { std::fprintf(stderr, "%s", kUsage); return 2; }
  synth::MoeModelConfig c;
  if (args.has("preset") && !synth::apply_preset(args.get("preset"), &c))
    tools::die("unknown preset '" + args.get("preset") + "' (qwen3-30b-a3b, bench-1b)");
  auto dim = [&](const char* flag, int* v) { *v = static_cast<int>(args.get_int(flag, *v)); };
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
               "guild-gen-model: qwen3moe %d layers, embd %d, heads %d/%d x %d, experts %d (%d used) x ffn %d, vocab %d\n"
               "guild-gen-model: experts %s (down %s), attention %s, output %s, embedding %s, norms %s, router %s\n"
               "guild-gen-model: %.3f B parameters (%.3f B active per token), %.2f GiB of tensor data\n",
               c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_expert, c.n_expert_used, c.n_ff_exp, c.n_vocab,
               std::string(tensor_type_name(c.expert_type)).c_str(), std::string(tensor_type_name(c.expert_down_type)).c_str(),
               std::string(tensor_type_name(c.dense_type)).c_str(),
               std::string(tensor_type_name(c.output_type)).c_str(), std::string(tensor_type_name(c.embd_type)).c_str(),
               std::string(tensor_type_name(c.norm_type)).c_str(), std::string(tensor_type_name(c.router_type)).c_str(),
               p.total / 1e9, p.active / 1e9, p.file_bytes / 1073741824.0);
  const auto t0 = std::chrono::steady_clock::now();
  std::string err;
  if (!synth::write_moe_model(c, args.get("out"), static_cast<int>(args.get_int("threads", 0)), &err, print_progress))
    tools::die(err);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "guild-gen-model: wrote %s in %.1f s\n", args.get("out").c_str(), s);
  return 0;
}
