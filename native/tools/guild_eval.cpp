// guild-eval: logits and greedy tokens from the native runtime, without Node
// (used on the GPU machine to compare against other implementations).
//   guild-eval --model PATH --prompt-tokens 1,2,3 [--logits-out FILE] [--n-predict N]
// Prints JSON: {"prompt_tokens":[…],"tokens":[…greedy…]} and, with
// --logits-out, writes float32 logits for every prompt position.
#include <cstdio>
#include <string>
#include <vector>

#include "core/json.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "tool_args.h"

using namespace guild;

int main(int argc, char** argv) {
  const char* usage = "usage: guild-eval --model PATH (--prompt-tokens IDS | --text TEXT) [--logits-out FILE] "
                      "[--n-predict N] [--threads N] [--kv f16|f32] [--profile-out FILE]\n";
  tools::Args args;
  if (!args.parse(argc, argv, {"model", "prompt-tokens", "text", "logits-out", "n-predict", "threads", "kv", "profile-out"}, {}, usage))
    return 2;
  if (!args.has("model") || (!args.has("prompt-tokens") && !args.has("text"))) { std::fprintf(stderr, "%s", usage); return 2; }
  LoadOptions opt;
  opt.n_threads = static_cast<int>(args.get_int("threads", 0));
  opt.kv_type = args.get("kv", "f16") == "f32" ? KvType::F32 : KvType::F16;
  std::string err;
  auto model = GuildModel::load(args.get("model"), opt, &err);
  if (!model) tools::die(err);
  if (args.has("profile-out")) {
    FILE* pf = std::fopen(args.get("profile-out").c_str(), "wb");
    const std::string text = json::serialize(model->profile().to_json(), true);
    if (!pf || std::fwrite(text.data(), 1, text.size(), pf) != text.size()) tools::die("cannot write " + args.get("profile-out"));
    std::fclose(pf);
  }
  std::vector<int32_t> prompt;
  if (args.has("prompt-tokens")) for (int t : args.get_int_list("prompt-tokens")) prompt.push_back(t);
  else prompt = model->vocab().tokenize(args.get("text"), true, true);
  const int n_predict = static_cast<int>(args.get_int("n-predict", 32));
  json::Value out = json::Value::object();
  json::Value p = json::Value::array();
  for (int32_t t : prompt) p.push_back(t);
  out.set("prompt_tokens", std::move(p));
  if (args.has("logits-out")) {
    auto s = GuildSession::create(*model, static_cast<int>(prompt.size()) + 8, &err);
    if (!s) tools::die(err);
    std::vector<float> logits(prompt.size() * static_cast<size_t>(model->hparams().n_vocab));
    if (!s->eval(prompt, true, logits.data(), &err)) tools::die(err);
    FILE* f = std::fopen(args.get("logits-out").c_str(), "wb");
    if (!f || std::fwrite(logits.data(), sizeof(float), logits.size(), f) != logits.size()) tools::die("cannot write " + args.get("logits-out"));
    std::fclose(f);
  }
  auto s = GuildSession::create(*model, static_cast<int>(prompt.size()) + n_predict + 8, &err);
  if (!s) tools::die(err);
  GenerateRequest req;
  req.prompt = prompt;
  req.max_new_tokens = n_predict;
  GenerateResult r = s->generate(req);
  if (r.stop == StopReason::Error) tools::die(r.error);
  json::Value toks = json::Value::array();
  for (int32_t t : r.tokens) toks.push_back(t);
  out.set("tokens", std::move(toks));
  out.set("text", model->vocab().detokenize(r.tokens, false, false));
  out.set("stop_reason", stop_reason_name(r.stop));
  std::printf("%s\n", json::serialize(out).c_str());
  return 0;
}
