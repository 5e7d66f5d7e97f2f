#include "tokenizer_vocabs.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string_view>

#include "artifact/gguf_writer.h"
#include "memory_file.h"

namespace guild::fuzz {
namespace {

using gguf::GgufValue;
using gguf::GgufWriter;
using gguf::ModelFiles;

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "fuzz_tokenizer: %s\n", msg.c_str());
  std::abort();
}

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

// GPT-2's byte-level alphabet, inverted: the code point a byte-level token
// uses for each raw byte is the byte itself for printable Latin-1, else
// 256 + its rank among the others.
int byte_of_code_point(uint32_t cp) {
  static const std::vector<int> table = [] {
    std::vector<int> t(324, -1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[printable ? b : next++] = b;
    }
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

// A byte-level token text back to its raw bytes; false when it is not one.
bool decode_byte_level(std::string_view text, std::string* raw) {
  raw->clear();
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    uint32_t cp;
    size_t n;
    if (c < 0x80) cp = c, n = 1;
    else if ((c >> 5) == 6 && i + 1 < text.size()) cp = ((c & 0x1f) << 6) | (text[i + 1] & 0x3f), n = 2;
    else return false;  // the byte-level alphabet stays below U+0800
    const int b = byte_of_code_point(cp);
    if (b < 0) return false;
    raw->push_back(static_cast<char>(b));
    i += n;
  }
  return true;
}

std::string replace_spaces(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == ' ') out.append(kSpaceMark);
    else out.push_back(c);
  }
  return out;
}

// The demo model's tokenizer arrays, as read from its file.
struct DemoVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
};

DemoVocab read_demo(const ModelFiles& f) {
  DemoVocab d;
  const gguf::MetaArray* tokens = f.get_array("tokenizer.ggml.tokens");
  const gguf::MetaArray* types = f.get_array("tokenizer.ggml.token_type");
  const gguf::MetaArray* merges = f.get_array("tokenizer.ggml.merges");
  if (!tokens || !types || !merges) die("the demo model lacks tokenizer.ggml.tokens / token_type / merges");
  for (std::string_view t : tokens->strings) d.tokens.emplace_back(t);
  for (uint64_t i = 0; i < types->count; ++i) {
    int64_t v = 1;
    types->get_i64(i, &v);
    d.types.push_back(static_cast<int32_t>(v));
  }
  for (std::string_view m : merges->strings) d.merges.emplace_back(m);
  return d;
}

struct Spec {
  std::string model = "gpt2";
  std::string pre;  // "" = no tokenizer.ggml.pre key
  std::string name;  // general.name ("" = none)
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;  // empty = no key
  std::vector<std::string> merges;
  bool with_merges = true;
  int32_t bos = 0, eos = 2;
  int add_bos = -1;  // -1 = no key
};

std::unique_ptr<ModelFiles> open_bytes(const std::vector<uint8_t>& bytes, const std::string& label) {
  MemoryFile file(bytes.data(), bytes.size());
  std::string err;
  auto files = ModelFiles::open(file.path(), &err);
  if (!files) die(label + ": " + err);
  return files;  // the GgufFile holds its own descriptor of the memfd
}

FuzzVocab build(const Spec& s, std::string label, RoundTrip rt, bool utf8_symbols = false) {
  GgufWriter w;
  w.add_string("general.architecture", "qwen3moe");
  if (!s.name.empty()) w.add_string("general.name", s.name);
  w.add_string("tokenizer.ggml.model", s.model);
  if (!s.pre.empty()) w.add_string("tokenizer.ggml.pre", s.pre);
  w.add_string_array("tokenizer.ggml.tokens", s.tokens);
  w.add("tokenizer.ggml.token_type", GgufValue::i32_array(s.types));
  if (!s.scores.empty()) w.add("tokenizer.ggml.scores", GgufValue::f32_array(s.scores));
  if (s.with_merges) w.add_string_array("tokenizer.ggml.merges", s.merges);
  w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(s.bos));
  w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(s.eos));
  if (s.add_bos >= 0) w.add_bool("tokenizer.ggml.add_bos_token", s.add_bos != 0);
  FuzzVocab v;
  v.label = std::move(label);
  v.files = open_bytes(w.to_bytes(), v.label);
  std::string err;
  v.vocab = Vocab::from_gguf(*v.files, &err);
  if (!v.vocab) die(v.label + ": " + err);
  v.round_trip = rt;
  v.utf8_symbols = utf8_symbols;
  return v;
}

FuzzVocab open_path(const std::string& path, std::string label, RoundTrip rt) {
  FuzzVocab v;
  v.label = std::move(label);
  std::string err;
  v.files = ModelFiles::open(path, &err);
  if (!v.files) die(err);
  v.vocab = Vocab::from_gguf(*v.files, &err);
  if (!v.vocab) die(path + ": " + err);
  v.round_trip = rt;
  return v;
}

// The demo vocabulary with raw-byte texts (SentencePiece / gemma4 style):
// the specials, the 256 <0xXX> byte tokens, then every normal token decoded
// from GPT-2 byte-level text with spaces as U+2581 (duplicates dropped).
Spec utf8_spec(const DemoVocab& d, bool with_scores) {
  Spec s;
  std::set<std::string> seen;
  auto add = [&](std::string text, int32_t type) {
    if (text.empty() || !seen.insert(text).second) return;
    s.tokens.push_back(std::move(text));
    s.types.push_back(type);
    if (with_scores) s.scores.push_back(-static_cast<float>(s.tokens.size()));
  };
  for (size_t i = 0; i < d.tokens.size(); ++i)
    if (d.types[i] == 3) add(d.tokens[i], 3);
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    add(hex, 6);
  }
  std::string raw;
  for (size_t i = 0; i < d.tokens.size(); ++i)
    if (d.types[i] == 1 && decode_byte_level(d.tokens[i], &raw)) add(replace_spaces(raw), 1);
  std::string left, right;
  for (const std::string& m : d.merges) {
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) continue;
    if (decode_byte_level(std::string_view(m).substr(0, sp), &left) &&
        decode_byte_level(std::string_view(m).substr(sp + 1), &right))
      s.merges.push_back(replace_spaces(left) + " " + replace_spaces(right));
  }
  return s;
}

std::vector<FuzzVocab> build_all() {
  const char* demo_env = std::getenv("GUILD_FUZZ_DEMO_MODEL");
  const std::string demo_path = demo_env && *demo_env ? demo_env : GUILD_FUZZ_DEMO_MODEL;
  const char* fx_env = std::getenv("GUILD_FIXTURES");
  const std::string fixtures = fx_env && *fx_env ? fx_env : GUILD_FUZZ_FIXTURES_DIR;
  std::error_code ec;
  auto fixture = [&](const char* name) {
    const std::string p = fixtures + "/models/" + name;
    return std::filesystem::is_regular_file(p, ec) ? p : std::string();
  };

  std::vector<FuzzVocab> out;
  out.push_back(open_path(demo_path, "demo", RoundTrip::Always));
  const DemoVocab demo = read_demo(*out.back().files);

  // 1, 2: the real vocabularies, where the fixtures are installed.
  if (std::string p = fixture("qwen3-vocab.gguf"); !p.empty()) out.push_back(open_path(p, "qwen3-vocab", RoundTrip::Always));
  else out.push_back(open_path(demo_path, "demo (no qwen3-vocab fixture)", RoundTrip::Always));
  if (std::string p = fixture("mixtral-a-Q4_K_M.gguf"); !p.empty()) out.push_back(open_path(p, "mixtral spm", RoundTrip::None));
  else out.push_back(open_path(demo_path, "demo (no mixtral fixture)", RoundTrip::Always));

  // Every pre-tokenizer configuration over the demo's byte-level tokens.
  // The round trip holds where the pre-tokenizer cleans no spaces.
  struct Pre { const char* name; RoundTrip rt; };
  const Pre pres[] = {
      {"default", RoundTrip::None},      {"llama3", RoundTrip::None},       {"dbrx", RoundTrip::None},
      {"glm4", RoundTrip::None},         {"minicpm5", RoundTrip::None},     {"qwen2", RoundTrip::Always},
      {"qwen35", RoundTrip::Always},     {"ufakzeka", RoundTrip::Always},   {"laguna", RoundTrip::Always},
      {"gpt-4o", RoundTrip::Always},     {"tekken", RoundTrip::Always},     {"seed-coder", RoundTrip::Always},
      {"deepseek-llm", RoundTrip::Always}, {"deepseek-coder", RoundTrip::Always}, {"deepseek-v3", RoundTrip::Always},
      {"falcon", RoundTrip::None},       {"gpt-2", RoundTrip::None},        {"starcoder", RoundTrip::None},
      {"command-r", RoundTrip::Always},  {"megrez", RoundTrip::None},       {"trillion", RoundTrip::Always},
  };
  for (const Pre& p : pres) {
    Spec s;
    s.pre = p.name;
    s.tokens = demo.tokens;
    s.types = demo.types;
    s.merges = demo.merges;
    out.push_back(build(s, std::string("pre=") + p.name, p.rt));
  }
  // User-defined tokens (always parsed) and the phi-3 rule that rstrips
  // every special token; jina-v2-de lstrips <mask>.
  {
    Spec s;
    s.pre = "qwen2";
    s.name = "Phi-3 fuzz";
    s.tokens = demo.tokens;
    s.types = demo.types;
    s.merges = demo.merges;
    for (size_t i = 3; i < s.types.size(); i += 97) s.types[i] = 4;
    out.push_back(build(s, "user-defined + phi-3 rstrip", RoundTrip::None));
    s.name.clear();
    s.pre = "jina-v2-de";
    s.tokens.back() = "<mask>";
    s.types.back() = 3;
    out.push_back(build(s, "jina-v2-de <mask> lstrip", RoundTrip::None));
  }
  // Raw-byte vocabularies: gemma4 (model), sarvam-moe (gpt2 model, no byte
  // encoding), SentencePiece ("llama"; no merges, scores).
  {
    Spec s = utf8_spec(demo, false);
    s.model = "gemma4";
    out.push_back(build(s, "gemma4", RoundTrip::None));
    s.model = "gpt2";
    s.pre = "sarvam-moe";
    out.push_back(build(s, "pre=sarvam-moe", RoundTrip::Always, /*utf8_symbols=*/true));
    Spec spm = utf8_spec(demo, true);
    spm.model = "llama";
    spm.with_merges = false;
    // <unk> <s> </s> first, as SentencePiece files have them.
    spm.tokens.insert(spm.tokens.begin(), {"<unk>", "<s>", "</s>"});
    spm.types.insert(spm.types.begin(), {2, 3, 3});
    spm.scores.insert(spm.scores.begin(), {0.0f, 0.0f, 0.0f});
    spm.bos = 1;
    spm.eos = 2;
    out.push_back(build(spm, "spm", RoundTrip::PlainText, /*utf8_symbols=*/true));
  }
  return out;
}

}  // namespace

const std::vector<FuzzVocab>& fuzz_vocabularies() {
  static const std::vector<FuzzVocab> table = build_all();
  return table;
}

}  // namespace guild::fuzz
