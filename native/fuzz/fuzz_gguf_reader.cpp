// Fuzz target: the GGUF reader (artifact/gguf.h) and the tokenizer built from
// a file's metadata (Vocab::from_gguf). The input is a whole .gguf file,
// presented as an in-memory file (the reader maps files by path). A file the
// reader accepts is then walked completely, as the runtime would use it:
// every metadata value and array element through the typed accessors, every
// tensor's first and last data byte (a range the reader validated wrongly
// faults or trips AddressSanitizer), the tensor index; and its tokenizer, if
// it has one, loads and tokenizes fixed texts.
#include <cstdint>
#include <cstring>
#include <string>

#include "artifact/gguf.h"
#include "core/tensor_type.h"
#include "fuzz_check.h"
#include "verbose.h"
#include "memory_file.h"
#include "tokenizer/vocab.h"
#include "vocab_checks.h"

using namespace guild;
using namespace guild::gguf;

namespace {

// Reads bounded so that a file with millions of elements stays fast; the
// reader has already checked every count against the file size.
constexpr uint64_t kMaxElementsRead = 4096;

volatile uint8_t g_sink;  // keeps the data reads from being optimised away

void walk_array(const MetaArray& a, uint32_t depth) {
  FUZZ_CHECK(depth <= limits::kMaxArrayDepth, "array nesting %u beyond the limit", depth);
  const uint64_t n = a.count < kMaxElementsRead ? a.count : kMaxElementsRead;
  for (uint64_t i = 0; i < n; ++i) {
    int64_t iv;
    double dv;
    (void)a.get_i64(i, &iv);
    (void)a.get_f64(i, &dv);
  }
  int64_t iv;
  FUZZ_CHECK(!a.get_i64(a.count, &iv), "get_i64 past the end succeeded");
  if (a.elem_type == ValueType::STRING) {
    FUZZ_CHECK(a.strings.size() == a.count, "string array of %llu elements holds %zu",
               static_cast<unsigned long long>(a.count), a.strings.size());
    for (uint64_t i = 0; i < n; ++i)
      if (!a.strings[i].empty()) g_sink = static_cast<uint8_t>(a.strings[i].front() ^ a.strings[i].back());
  }
  if (a.elem_type == ValueType::ARRAY) {
    FUZZ_CHECK(a.nested.size() == a.count, "nested array of %llu elements holds %zu",
               static_cast<unsigned long long>(a.count), a.nested.size());
    for (uint64_t i = 0; i < n; ++i) {
      FUZZ_CHECK(a.nested[i].array != nullptr, "nested element %llu has no array", static_cast<unsigned long long>(i));
      walk_array(*a.nested[i].array, depth + 1);
    }
  }
}

void walk_file(const ModelFiles& files) {
  const GgufFile& f = files.primary();
  const uint8_t* base = f.mapping();
  const uint64_t size = f.file_size();
  FUZZ_CHECK(f.data_offset() <= size, "data offset %llu beyond the file (%llu bytes)",
             static_cast<unsigned long long>(f.data_offset()), static_cast<unsigned long long>(size));
  FUZZ_CHECK(f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0, "alignment %llu",
             static_cast<unsigned long long>(f.alignment()));
  for (const auto& [key, value] : f.metadata()) {
    FUZZ_CHECK(!key.empty() && key.size() <= limits::kMaxKeyBytes, "key of %zu bytes", key.size());
    FUZZ_CHECK(f.find(key) == &value, "find() does not return the first entry of a key");
    std::string err;
    (void)files.get_string(key, &err);
    (void)files.get_int(key, &err);
    (void)files.get_float(key, &err);
    (void)files.get_bool(key, &err);
    (void)files.get_array(key, &err);
    if (value.type == ValueType::STRING && !value.str.empty()) {
      FUZZ_CHECK(value.str.data() >= reinterpret_cast<const char*>(base) &&
                     value.str.data() + value.str.size() <= reinterpret_cast<const char*>(base + size),
                 "string value of '%.*s' outside the mapping", static_cast<int>(key.size()), key.data());
      g_sink = static_cast<uint8_t>(value.str.front() ^ value.str.back());
    }
    if (value.type == ValueType::ARRAY) {
      FUZZ_CHECK(value.array != nullptr, "array value without an array");
      walk_array(*value.array, 1);
    }
  }
  for (const TensorInfo& t : files.tensors()) {
    FUZZ_CHECK(t.n_dims >= 1 && t.n_dims <= limits::kMaxDims, "n_dims %u", t.n_dims);
    FUZZ_CHECK(files.find_tensor(t.name) != nullptr, "tensor index misses a tensor");
    uint64_t row = 0;
    FUZZ_CHECK(tensor_row_bytes(t.type, static_cast<uint64_t>(t.ne[0]), &row), "type %u, ne0 %lld accepted", t.type,
               static_cast<long long>(t.ne[0]));
    FUZZ_CHECK(row * static_cast<uint64_t>(t.n_rows()) == t.nbytes, "nbytes %llu != %llu rows x %llu",
               static_cast<unsigned long long>(t.nbytes), static_cast<unsigned long long>(t.n_rows()),
               static_cast<unsigned long long>(row));
    const GgufFile& shard = *files.shards()[t.shard];
    if (t.nbytes > 0) {
      FUZZ_CHECK(t.data >= shard.mapping() + shard.data_offset() &&
                     t.data + t.nbytes <= shard.mapping() + shard.file_size(),
                 "tensor data outside its shard's data section");
      g_sink = static_cast<uint8_t>(t.data[0] ^ t.data[t.nbytes - 1]);
    }
  }
  (void)files.total_bytes();
  (void)files.file_bytes();
  std::string err;
  FUZZ_CHECK(files.unchanged_on_disk(&err), "an in-memory file changed on disk: %s", err.c_str());
}

// Texts for a fuzzed vocabulary: plain words, the special tokens of common
// vocabularies, digits, whitespace runs, multi-byte and invalid UTF-8.
constexpr std::string_view kTexts[] = {
    "Hello world! It's 2024, isn't it?  \n\n\tdone",
    "<|im_start|>user\nhi<|im_end|>\n<s></s><unk><|endoftext|>",
    "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80 caf\xC3\xA9 \xFF\xC3 \xE2\x96\x81x 12345678",
};

void exercise_tokenizer(const ModelFiles& files) {
  std::string err;
  std::unique_ptr<Vocab> vocab = Vocab::from_gguf(files, &err);
  if (!vocab) {
    FUZZ_LOG("tokenizer: %s", err.c_str());
    FUZZ_CHECK(!err.empty() && err.find('\n') == std::string::npos, "a vocabulary refused without a one-line reason");
    return;
  }
  FUZZ_LOG("%zu tensors; tokenizer %s/%s, %d tokens", files.tensors().size(), std::string(vocab->model_name()).c_str(),
           std::string(vocab->pre_name()).c_str(), vocab->n_tokens());
  fuzz::exercise_token_table(*vocab, 64);
  uint8_t flags = 0;
  for (std::string_view text : kTexts) fuzz::exercise_vocab(*vocab, text, flags++ * 0x0b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::MemoryFile file(data, size);
  std::string err;
  std::unique_ptr<ModelFiles> files = ModelFiles::open(file.path(), &err);
  if (!files) {
    FUZZ_LOG("reader: %s", err.c_str());
    FUZZ_CHECK(!err.empty() && err.find('\n') == std::string::npos, "refused without a one-line reason: %s", err.c_str());
    return 0;
  }
  walk_file(*files);
  exercise_tokenizer(*files);
  return 0;
}
