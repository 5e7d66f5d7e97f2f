// Tokenizer unit tests: pre-tokenizer splits, tiny hand-made BPE and SPM
// vocabularies (written with the GGUF writer, so no fixtures are needed), and,
// when the fixtures are present, edge cases on the real Qwen3 / Llama vocabs:
// empty and whitespace-only text, invalid UTF-8, UTF-8 split across byte
// tokens, special tokens, long inputs, several threads.
#include <chrono>
#include <thread>

#include "artifact/gguf.h"
#include "artifact/gguf_writer.h"
#include "check.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

using guild::Vocab;
using Ids = std::vector<int32_t>;

namespace {

// Pieces of `text` under one pre-tokenizer.
std::vector<std::string> pieces(std::vector<guild::tok::Stage> stages, std::string_view text) {
  std::vector<uint32_t> cps, offsets, ends;
  guild::unicode::decode(text, &cps, &offsets);
  guild::tok::pretokenize(stages, cps, &ends);
  std::vector<std::string> out;
  uint32_t b = 0;
  for (uint32_t e : ends) {
    out.emplace_back(text.substr(offsets[b], offsets[e] - offsets[b]));
    b = e;
  }
  return out;
}

using VS = std::vector<std::string>;

struct Loaded {
  std::unique_ptr<guild::gguf::ModelFiles> files;
  std::unique_ptr<Vocab> vocab;
  std::string error;
};

Loaded open_vocab(const std::string& path) {
  Loaded l;
  l.files = guild::gguf::ModelFiles::open(path, &l.error);
  if (l.files) l.vocab = Vocab::from_gguf(*l.files, &l.error);
  return l;
}

Loaded write_and_open(guild::gguf::GgufWriter& w, const std::string& name) {
  const std::string path = check::tmp_dir() + "/" + name;
  std::string err;
  if (!w.write(path, &err)) {
    std::printf("  cannot write %s: %s\n", path.c_str(), err.c_str());
    return {};
  }
  return open_vocab(path);
}

// A byte-level BPE vocabulary: ids 0..255 are the 256 byte symbols (id = byte).
guild::gguf::GgufWriter tiny_bpe(std::string_view pre) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(guild::tok::BpeModel::byte_to_utf8(static_cast<uint8_t>(b)));
  const std::vector<std::string> extra = {"aa", "\xC4\xA0" "a", "\xC4\xA0" "aa", "<|ctl|>", "<u>", "[unused]", "abc"};
  tokens.insert(tokens.end(), extra.begin(), extra.end());  // ids 256..262
  std::vector<int32_t> types(tokens.size(), 1);
  types[259] = 3;  // control
  types[260] = 4;  // user-defined
  types[261] = 5;  // unused
  const std::vector<std::string> merges = {"a a", "\xC4\xA0 a", "\xC4\xA0" "a a", "b c"};  // "bc" is no token
  guild::gguf::GgufWriter w;
  w.add_string("general.architecture", "test");
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add("tokenizer.ggml.token_type", guild::gguf::GgufValue::i32_array(types));
  w.add_string_array("tokenizer.ggml.merges", merges);
  w.add_u32("tokenizer.ggml.eos_token_id", 259);
  w.add_u32("tokenizer.ggml.bos_token_id", 259);
  return w;
}

// A SentencePiece vocabulary: <unk> <s> </s>, <0x00>..<0xFF> (ids 3..258), then pieces.
guild::gguf::GgufWriter tiny_spm() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    tokens.push_back(hex);
    types.push_back(6);
    scores.push_back(0);
  }
  const struct {
    const char* text;
    float score;
  } pieces[] = {{"\xE2\x96\x81", -1}, {"a", -2}, {"b", -2}, {"\xE2\x96\x81" "a", -3}, {"ab", -1.5f},
                {"\xE2\x96\x81" "ab", -4}};  // ids 259..264
  for (const auto& p : pieces) {
    tokens.push_back(p.text);
    types.push_back(1);
    scores.push_back(p.score);
  }
  guild::gguf::GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add("tokenizer.ggml.token_type", guild::gguf::GgufValue::i32_array(types));
  w.add("tokenizer.ggml.scores", guild::gguf::GgufValue::f32_array(scores));
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  return w;
}

}  // namespace

TEST(pretokenizer_splits) {
  using S = guild::tok::Stage;
  CHECK((pieces({S::Qwen2}, "Hello world123 don't") == VS{"Hello", " world", "1", "2", "3", " don", "'t"}));
  CHECK((pieces({S::Llama3}, "12345 x") == VS{"123", "45", " x"}));
  CHECK((pieces({S::Llama3}, "it'S  ok\n\n  end ") == VS{"it", "'S", " ", " ok", "\n\n", " ", " end", " "}));
  CHECK((pieces({S::Gpt2}, "it'S it's") == VS{"it", "'", "S", " it", "'s"}));  // case-sensitive
  CHECK((pieces({S::Gpt2}, "a   b") == VS{"a", "  ", " b"}));
  CHECK((pieces({S::Qwen2}, "x!!\n\ny") == VS{"x", "!!\n\n", "y"}));
  CHECK((pieces({S::Qwen2}, "\xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\xA6\x99") ==
         VS{"\xE4\xB8\xAD\xE6\x96\x87", " \xF0\x9F\xA6\x99"}));
  CHECK((pieces({S::Qwen35}, "e\xCC\x81t\xC3\xA9") == VS{"e\xCC\x81t\xC3\xA9"}));   // marks stay in words
  CHECK((pieces({S::Qwen2}, "e\xCC\x81t\xC3\xA9") == VS{"e", "\xCC\x81t\xC3\xA9"}));
  CHECK((pieces({S::Gpt4o}, "HelloWorld ABCdef") == VS{"Hello", "World", " ABCdef"}));
  CHECK((pieces({S::Number3, S::CjkKana, S::DsV3Main}, "~abc 1234\xE6\x97\xA5\xE6\x9C\xAC") ==
         VS{"~abc", " ", "123", "4", "\xE6\x97\xA5\xE6\x9C\xAC"}));
  CHECK((pieces({S::NewlineEach, S::SpaceLetters, S::SpacePunct, S::CjkHangul, S::NumberEach}, "a\n\n b12") ==
         VS{"a", "\n", "\n", " b", "1", "2"}));
  CHECK(pieces({S::Qwen2}, "").empty());
  // invalid UTF-8 decodes to U+FFFD (a symbol) but keeps its bytes
  CHECK((pieces({S::Qwen2}, "a\xFF\xFE b") == VS{"a", "\xFF\xFE", " b"}));
}

TEST(unicode_classes) {
  using namespace guild::unicode;
  CHECK(flags('a') == kLetter && flags('7') == kNumber && flags(' ') == kSeparator && flags('\n') == kControl);
  CHECK(flags(0x4E2D) == kLetter && flags(0x0301) == kMark && flags(0x20AC) == kSymbol && flags(0x3002) == kPunct);
  CHECK(flags(0x0378) == kUndefined && flags(0x110000) == kUndefined && flags(0xE000) == kControl);
  CHECK(flags(0x2EBF0) == kLetter);  // Unicode 15.1 (CJK Extension I), as in llama.cpp
  CHECK(is_whitespace(0x3000) && is_whitespace(0x85) && is_whitespace(0x0B) && !is_whitespace(0x200B) &&
        !is_whitespace(0x1C));
}

TEST(tiny_bpe_vocab) {
  auto w = tiny_bpe("qwen2");
  Loaded l = write_and_open(w, "tiny-bpe-qwen2.gguf");
  REQUIRE(l.vocab);
  const Vocab& v = *l.vocab;
  CHECK(v.n_tokens() == 263 && v.model_name() == "gpt2" && v.pre_name() == "qwen2");
  CHECK((v.tokenize("aaa", false, false) == Ids{256, 97}));     // equal ranks: leftmost pair first
  CHECK((v.tokenize(" aaa", false, false) == Ids{32, 256, 97})); // lower rank first, "\xC4\xA0 a" is stale then
  CHECK((v.tokenize(" a", false, false) == Ids{257}));
  CHECK((v.tokenize("bc", false, false) == Ids{98, 99}));       // merged to a non-token: bytes again
  CHECK((v.tokenize("abc", false, false) == Ids{97, 98, 99}));
  CHECK((v.tokenize("x<|ctl|>y", false, true) == Ids{120, 259, 121}));
  CHECK(v.tokenize("x<|ctl|>y", false, false).size() == 9);     // control text stays text
  CHECK((v.tokenize("x<u>y", false, false) == Ids{120, 260, 121}));  // user-defined: always
  CHECK(v.tokenize("", true, true).empty());
  CHECK(v.token_to_piece(259, false).empty() && v.token_to_piece(259, true) == "<|ctl|>");
  CHECK(v.token_to_piece(260, false) == "<u>");
  CHECK(v.token_to_piece(261, true).empty());  // unused
  CHECK(v.token_to_piece(32, false) == " " && v.token_to_piece(255, false) == "\xFF");
  CHECK(v.token_to_piece(-1, true).empty() && v.token_to_piece(263, true).empty());
  CHECK(v.detokenize(Ids{32, 256, 259, 260}, false, false) == " aa<u>");
  CHECK(v.detokenize(Ids{32, 256, 259, 260}, false, true) == " aa<|ctl|><u>");
  CHECK(v.detokenize(Ids{-3, 99999, 97}, false, false) == "a");
  CHECK(v.detokenize(Ids{32, 44}, false, false) == " ,");  // qwen2: no space clean-up
  CHECK(v.is_eog(259) && !v.is_eog(97) && v.eos() == 259);
  CHECK(v.token_kind(259) == guild::TokenKind::Control && v.token_kind(261) == guild::TokenKind::Unused);
  CHECK(v.token_id("aa") == 256 && v.token_id("zz") == -1);
  // invalid UTF-8 keeps its bytes
  const std::string bad = "\xFF\xFE a\xC3";
  CHECK((v.tokenize(bad, false, false) == Ids{255, 254, 257, 195}));
  CHECK(v.detokenize(v.tokenize(bad, false, false), false, false) == bad);
}

TEST(tiny_bpe_pre_variants) {
  auto w = tiny_bpe("llama-bpe");  // ignore_merges: a word that is a token is taken whole
  Loaded l = write_and_open(w, "tiny-bpe-llama3.gguf");
  REQUIRE(l.vocab);
  CHECK((l.vocab->tokenize("abc", false, false) == Ids{262}));
  CHECK(l.vocab->add_bos());  // llama3 default
  CHECK((l.vocab->tokenize("abc", true, false) == Ids{259, 262}));

  auto w2 = tiny_bpe("gpt-2");  // clean_up_tokenization_spaces
  Loaded l2 = write_and_open(w2, "tiny-bpe-gpt2.gguf");
  REQUIRE(l2.vocab);
  CHECK(l2.vocab->detokenize(Ids{97, 32, 44, 32, 39, 115}, false, false) == "a,'s");
  CHECK(l2.vocab->detokenize(Ids{97, 32, 39, 32, 98}, false, false) == "a'b");

  auto w3 = tiny_bpe("no-such-pre");
  Loaded l3 = write_and_open(w3, "tiny-bpe-bad.gguf");
  CHECK(!l3.vocab && l3.error.find("pre-tokenizer") != std::string::npos);
  auto w4 = tiny_bpe("qwen2");
  w4.add_string("tokenizer.ggml.model", "bert");
  Loaded l4 = write_and_open(w4, "tiny-bpe-bert.gguf");
  CHECK(!l4.vocab && l4.error.find("unsupported tokenizer model") != std::string::npos);
}

TEST(tiny_spm_vocab) {
  auto w = tiny_spm();
  Loaded l = write_and_open(w, "tiny-spm.gguf");
  REQUIRE(l.vocab);
  const Vocab& v = *l.vocab;
  CHECK(v.model_name() == "llama" && v.add_bos() && !v.add_eos() && v.bos() == 1 && v.unk() == 0);
  CHECK((v.tokenize("ab", false, false) == Ids{264}));  // "ab" (-1.5) before "\xE2\x96\x81" "a" (-3)
  CHECK((v.tokenize("ab", true, false) == Ids{1, 264}));
  CHECK((v.tokenize("ba", false, false) == Ids{259, 261, 260}));
  CHECK((v.tokenize("a  b", false, false) == Ids{262, 259, 259, 261}));
  CHECK((v.tokenize("\xC3\xA9", false, false) == Ids{259, 3 + 0xC3, 3 + 0xA9}));  // byte fallback
  CHECK((v.tokenize("<s>ab", false, true) == Ids{1, 264}));   // a space is prefixed after a special token
  CHECK((v.tokenize("<s>ab", false, false) == Ids{259, 3 + '<', 3 + 's', 3 + '>', 263}));
  CHECK(v.token_to_piece(3 + 0xC3, false) == "\xC3" && v.token_to_piece(264, false) == " ab");
  CHECK(v.token_to_piece(0, false).empty() && v.token_to_piece(0, true) == "<unk>");
  CHECK(v.detokenize(Ids{259, 3 + 0xC3, 3 + 0xA9}, false, false) == "\xC3\xA9");  // leading space dropped
  CHECK(v.detokenize(Ids{264}, false, false) == "ab");
  CHECK(v.detokenize(Ids{1, 264}, false, false) == " ab");  // the BOS consumed the space removal
  CHECK(v.detokenize(Ids{1, 264}, true, false) == " ab");
  CHECK(v.detokenize(Ids{1, 264}, false, true) == "<s> ab");
  CHECK(v.detokenize(Ids{1, 264, 2}, true, true) == " ab</s>");  // add_eos is off: EOS stays
  CHECK(v.is_eog(2) && !v.is_eog(1));
  const std::string bad = "x\xFF\xC3(";
  CHECK(v.detokenize(v.tokenize(bad, false, false), false, false) == bad);
}

TEST(tiny_gemma4_vocab) {
  // BPE on UTF-8 characters with U+2581 for spaces and <0xXX> byte fallback.
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>"};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    tokens.push_back(hex);
  }
  for (const char* t : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "\n", "\n\n"}) tokens.push_back(t);  // 259..264
  std::vector<int32_t> types(tokens.size(), 1);
  types[0] = types[1] = types[2] = 3;
  for (int b = 0; b < 256; ++b) types[3 + b] = 6;
  const std::vector<std::string> merges = {"\xE2\x96\x81 a"};
  guild::gguf::GgufWriter w;
  w.add_string("general.architecture", "gemma4");
  w.add_string("tokenizer.ggml.model", "gemma4");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add("tokenizer.ggml.token_type", guild::gguf::GgufValue::i32_array(types));
  w.add_string_array("tokenizer.ggml.merges", merges);
  w.add_u32("tokenizer.ggml.bos_token_id", 2);
  w.add_u32("tokenizer.ggml.eos_token_id", 1);
  w.add_bool("tokenizer.ggml.add_bos_token", false);  // llama.cpp forces it on for gemma4
  Loaded l = write_and_open(w, "tiny-gemma4.gguf");
  REQUIRE(l.vocab);
  const Vocab& v = *l.vocab;
  CHECK(v.pre_name() == "gemma4" && v.add_bos());
  CHECK((v.tokenize("a a", true, false) == Ids{2, 260, 262}));
  CHECK((v.tokenize("\n\nb", false, false) == Ids{264, 261}));  // an all-newline word that is a token
  CHECK((v.tokenize("\n\n\n", false, false) == Ids{263, 263, 263}));
  CHECK((v.tokenize("\xC3\xA9", false, false) == Ids{3 + 0xC3, 3 + 0xA9}));
  CHECK(v.token_to_piece(262, false) == " a" && v.token_to_piece(3 + 0xC3, false) == "\xC3");
  CHECK(v.detokenize(v.tokenize("a a \xC3\xA9\n", false, false), false, false) == "a a \xC3\xA9\n");
}

// ---- the real vocabularies (fixtures) ---------------------------------------

TEST(qwen3_edge_cases) {
  const std::string root = check::fixtures_dir();
  Loaded l = open_vocab(root + "/models/qwen3-vocab.gguf");
  REQUIRE(l.vocab);
  const Vocab& v = *l.vocab;
  CHECK(v.n_tokens() == 151936 && v.pre_name() == "qwen2" && !v.add_bos());
  CHECK(v.tokenize("", false, false).empty() && v.detokenize(Ids{}, false, true).empty());
  for (const char* s : {" ", "  ", "   ", "\t", "\n", " \n ", "\r\n\r\n", "\xC2\xA0", "\xE3\x80\x80 "}) {
    const Ids ids = v.tokenize(s, false, false);
    CHECK_MSG(!ids.empty() && v.detokenize(ids, false, false) == s, "'%s'", s);
  }
  CHECK((v.tokenize(" ", false, false) == Ids{220}));
  // invalid UTF-8: no crash, bytes back exactly
  for (std::string s : {std::string("\xFF"), std::string("abc\xC3"), std::string("\xED\xA0\x80 x"),
                        std::string("\xF4\x90\x80\x80"), std::string("\xC0\x80\x80\x80"), std::string("a\0b", 3),
                        std::string("\xE4\xB8") + "<|im_end|>"}) {
    for (bool parse : {false, true}) {
      const Ids ids = v.tokenize(s, false, parse);
      CHECK_MSG(v.detokenize(ids, false, true) == s, "invalid UTF-8 round trip (%zu bytes)", s.size());
    }
  }
  // special tokens
  const int32_t im_start = v.token_id("<|im_start|>"), im_end = v.token_id("<|im_end|>");
  const int32_t think = v.token_id("<think>");
  CHECK(im_start == 151644 && im_end == 151645 && think >= 0);
  CHECK((v.tokenize("<|im_start|><|im_end|>", false, true) == Ids{im_start, im_end}));
  CHECK(v.tokenize("<|im_start|>", false, false).size() > 1);
  CHECK((v.tokenize("<think>", false, false) == Ids{think}));  // user-defined: split without parse_special
  CHECK(v.token_kind(think) == guild::TokenKind::UserDefined && v.token_kind(im_end) == guild::TokenKind::Control);
  CHECK(v.token_to_piece(im_end, false).empty() && v.token_to_piece(im_end, true) == "<|im_end|>");
  CHECK(v.is_eog(im_end) && v.is_eog(v.token_id("<|endoftext|>")) && !v.is_eog(im_start) && !v.is_eog(9707));
  CHECK(v.eos() == 151645 && v.bos() == 151643 && v.eot() == im_end);
  CHECK(v.token_to_piece(151900, true).empty());  // [PAD...] (unused)
  CHECK(v.chat_template().find("<|im_start|>") != std::string_view::npos);
}

TEST(spm_split_utf8_and_spaces) {
  const std::string root = check::fixtures_dir();
  Loaded l = open_vocab(root + "/models/mixtral-a-F32.gguf");
  REQUIRE(l.vocab);
  const Vocab& v = *l.vocab;
  // The reduced vocab has no CJK pieces: each character becomes byte tokens,
  // whose pieces are single (invalid) bytes; detokenize joins them back.
  const std::string text = "\xE6\x97\xA5\xE6\x9C\xAC ok";
  const Ids ids = v.tokenize(text, false, false);
  int byte_tokens = 0;
  for (int32_t id : ids) byte_tokens += v.token_kind(id) == guild::TokenKind::Byte;
  CHECK(byte_tokens == 6);
  CHECK(v.token_to_piece(ids[1], false).size() == 1);
  CHECK(v.detokenize(ids, false, false) == text);
  const Ids with_bos = v.tokenize(text, true, false);
  CHECK(with_bos.size() == ids.size() + 1 && with_bos[0] == 1);
  CHECK(v.detokenize(with_bos, true, false) == " " + text);  // llama.cpp keeps the space after a removed BOS
  for (const char* s : {"", " ", "  x", "x  ", "\n", "a\tb"}) {
    const Ids t = v.tokenize(s, false, false);
    CHECK_MSG(v.detokenize(t, false, false) == s, "'%s'", s);
  }
}

TEST(long_inputs_and_threads) {
  const std::string root = check::fixtures_dir();
  Loaded q = open_vocab(root + "/models/qwen3-vocab.gguf");
  Loaded m = open_vocab(root + "/models/mixtral-a-F32.gguf");
  REQUIRE(q.vocab && m.vocab);
  std::string para =
      "The quick brown fox (id=42) jumps over 1234567 lazy dogs; \xE4\xB8\xAD\xE6\x96\x87\xE5\x88\x86\xE8\xAF\x8D "
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xF0\x9F\xA6\x99  def f(x):\n    return x * 2\n\n";
  std::string big;
  while (big.size() < 100000) big += para;
  const std::vector<std::pair<const char*, std::string>> inputs = {
      {"mixed text", big}, {"one letter", std::string(100000, 'a')}, {"spaces", std::string(100000, ' ')},
      {"digits", std::string(100000, '7')}, {"newlines", std::string(100000, '\n')}};
  for (const auto& [name, text] : inputs) {
    for (const Loaded* l : {&q, &m}) {
      const auto t0 = std::chrono::steady_clock::now();
      const Ids ids = l->vocab->tokenize(text, false, true);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("  %-6s %-10s 100 KB -> %7zu tokens in %.3f s\n", std::string(l->vocab->model_name()).c_str(),
                  name, ids.size(), sec);
      CHECK(sec < 2.0);  // typically a few tens of ms
      CHECK(l->vocab->detokenize(ids, false, true) == text);
    }
  }
  // const methods from several threads at once
  const Ids want = q.vocab->tokenize(para, false, true);
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) ok[t] += q.vocab->tokenize(para, false, true) == want;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK(ok[t] == 50);
}
