// The tokenizer against llama.cpp's own outputs:
//  * expected/*/tokenize.json: ids (with and without parse_special), pieces
//    (token_to_piece, special rendered) and llama_detokenize bytes;
//  * vocab/ggml-vocab-*.gguf{,.inp,.out}: llama.cpp's test-tokenizer-0 vectors
//    (add_special = false, parse_special = false).
#include <map>
#include <memory>

#include "artifact/gguf.h"
#include "check.h"
#include "core/json.h"
#include "tokenizer/vocab.h"

namespace {

std::string hex(std::string_view bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string unhex(std::string_view h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16));
  return out;
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) {
    if (i) s += ' ';
    s += std::to_string(ids[i]);
  }
  if (ids.size() > 40) s += " ...";
  return s;
}

struct Loaded {
  std::unique_ptr<guild::gguf::ModelFiles> files;
  std::unique_ptr<guild::Vocab> vocab;
};

Loaded load(const std::string& path) {
  Loaded l;
  std::string err;
  l.files = guild::gguf::ModelFiles::open(path, &err);
  if (!l.files) {
    std::printf("  cannot open %s: %s\n", path.c_str(), err.c_str());
    return l;
  }
  l.vocab = guild::Vocab::from_gguf(*l.files, &err);
  if (!l.vocab) std::printf("  cannot load vocab of %s: %s\n", path.c_str(), err.c_str());
  return l;
}

std::vector<int32_t> json_ids(const guild::json::Value& v) {
  std::vector<int32_t> ids;
  for (const auto& x : v.as_array()) ids.push_back(static_cast<int32_t>(x.as_int()));
  return ids;
}

}  // namespace

TEST(tokenize_json_fixtures) {
  const std::string root = check::fixtures_dir();
  std::vector<std::string> files;
  for (const auto& d : std::filesystem::directory_iterator(root + "/expected")) {
    const std::string f = d.path().string() + "/tokenize.json";
    if (std::filesystem::exists(f)) files.push_back(f);
  }
  std::sort(files.begin(), files.end());
  REQUIRE(!files.empty());
  int total_pass = 0, total = 0;
  for (const std::string& file : files) {
    std::string err;
    auto doc = guild::json::parse(check::read_file(file), &err);
    CHECK_MSG(doc.has_value(), "%s: %s", file.c_str(), err.c_str());
    if (!doc) continue;
    const std::string model = root + "/" + (*doc)["model"].as_string();
    Loaded l = load(model);
    CHECK_MSG(l.vocab != nullptr, "%s", model.c_str());
    if (!l.vocab) continue;
    const bool add_special = (*doc)["add_special"].as_bool();
    int pass = 0, n = 0;
    for (const auto& vec : (*doc)["vectors"].as_array()) {
      ++n;
      const std::string text = unhex(vec["text_utf8_hex"].as_string());
      bool ok = true;
      for (const char* mode : {"no_parse_special", "parse_special"}) {
        const auto& exp = vec[mode];
        const bool parse = std::string_view(mode) == "parse_special";
        const std::vector<int32_t> want = json_ids(exp["ids"]);
        const std::vector<int32_t> got = l.vocab->tokenize(text, add_special, parse);
        if (got != want) {
          ok = false;
          std::printf("  %s [%s] %s: ids differ\n    want %s\n    got  %s\n", file.c_str(), mode,
                      vec["text"].as_string().substr(0, 60).c_str(), ids_str(want).c_str(), ids_str(got).c_str());
        }
        const auto& pieces = exp["pieces_hex"].as_array();
        for (size_t i = 0; i < want.size() && i < pieces.size(); ++i) {
          const std::string p = hex(l.vocab->token_to_piece(want[i], true));
          if (p != pieces[i].as_string()) {
            ok = false;
            std::printf("  %s [%s]: piece of %d is %s, want %s\n", file.c_str(), mode, want[i], p.c_str(),
                        pieces[i].as_string().c_str());
          }
        }
        const std::string detok = hex(l.vocab->detokenize(want, false, true));
        if (detok != exp["detokenized_hex"].as_string()) {
          ok = false;
          std::printf("  %s [%s] %s: detokenize differs\n    want %s\n    got  %s\n", file.c_str(), mode,
                      vec["text"].as_string().substr(0, 60).c_str(), exp["detokenized_hex"].as_string().c_str(),
                      detok.c_str());
        }
      }
      pass += ok;
    }
    std::printf("  %-52s %d/%d vectors\n", file.substr(root.size() + 1).c_str(), pass, n);
    CHECK(pass == n);
    total_pass += pass;
    total += n;
  }
  std::printf("  tokenize.json total: %d/%d vectors\n", total_pass, total);
}

TEST(llama_vocab_test_vectors) {
  const std::string root = check::fixtures_dir();
  std::vector<std::string> vocabs;
  for (const auto& d : std::filesystem::directory_iterator(root + "/vocab")) {
    const std::string p = d.path().string();
    if (p.size() > 5 && p.compare(p.size() - 5, 5, ".gguf") == 0 && std::filesystem::exists(p + ".inp") &&
        std::filesystem::exists(p + ".out"))
      vocabs.push_back(p);
  }
  std::sort(vocabs.begin(), vocabs.end());
  REQUIRE(!vocabs.empty());
  for (const std::string& path : vocabs) {
    Loaded l = load(path);
    CHECK_MSG(l.vocab != nullptr, "%s", path.c_str());
    if (!l.vocab) continue;
    // Inputs separated by "\n__ggml_vocab_test__\n" (as test-tokenizer-0 reads them).
    const std::string raw = check::read_file(path + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> inputs;
    for (size_t pos = 0; pos < raw.size();) {
      const size_t next = raw.find(sep, pos);
      if (next == std::string::npos) {
        inputs.push_back(raw.substr(pos));
        break;
      }
      inputs.push_back(raw.substr(pos, next - pos));
      pos = next + sep.size();
    }
    std::vector<std::vector<int32_t>> outputs;
    std::istringstream out(check::read_file(path + ".out"));
    for (std::string line; std::getline(out, line);) {
      std::vector<int32_t> ids;
      std::istringstream ls(line);
      for (int32_t id; ls >> id;) ids.push_back(id);
      outputs.push_back(ids);
    }
    CHECK_MSG(inputs.size() == outputs.size(), "%s: %zu inputs, %zu outputs", path.c_str(), inputs.size(),
              outputs.size());
    // llama_detokenize returns the input again unless the vocabulary's
    // clean_up_tokenization_spaces rules ("gpt-2" and others) touch it.
    const auto cleanup_applies = [](const std::string& s) {
      for (const char* pat : {" ?", " !", " .", " ,", " '"})
        if (s.find(pat) != std::string::npos) return true;
      return false;
    };
    int pass = 0, roundtrip = 0;
    const size_t n = std::min(inputs.size(), outputs.size());
    for (size_t i = 0; i < n; ++i) {
      const std::vector<int32_t> got = l.vocab->tokenize(inputs[i], false, false);
      if (got == outputs[i]) {
        ++pass;
      } else {
        std::printf("  %s #%zu '%s'\n    want %s\n    got  %s\n", path.c_str(), i, inputs[i].substr(0, 60).c_str(),
                    ids_str(outputs[i]).c_str(), ids_str(got).c_str());
      }
      const bool same = l.vocab->detokenize(outputs[i], false, false) == inputs[i];
      roundtrip += same;
      CHECK_MSG(same || cleanup_applies(inputs[i]), "%s #%zu: detokenize does not round-trip", path.c_str(), i);
    }
    std::printf("  %-40s %d/%zu vectors, detokenize round trip %d/%zu\n",
                path.substr(root.size() + 1).c_str(), pass, n, roundtrip, n);
    CHECK(pass == static_cast<int>(n));
  }
}
