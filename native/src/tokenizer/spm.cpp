// SentencePiece BPE ("llama" tokenizer model), as llama.cpp's
// llm_tokenizer_spm_session does it: the (whitespace-escaped) text is split
// into UTF-8 characters (length from the lead byte alone), every adjacent pair
// whose concatenation is a token is queued with that token's score, and the
// best pair (highest score, then leftmost) is merged until none is left. Final
// symbols that are not tokens become byte tokens <0xXX>.
#include <algorithm>
#include <cstdio>

#include "tokenizer/tokenizer_impl.h"

namespace guild::tok {

namespace {

struct Symbol {
  uint32_t start, len;
  int32_t prev, next;
};
struct Bigram {
  float score;
  int32_t left, right;
  uint32_t size;
};
// Max-heap order: higher score first, then the leftmost pair.
bool heap_less(const Bigram& a, const Bigram& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

// llama.cpp's unicode_len_utf8: the length implied by the lead byte.
size_t utf8_len(uint8_t lead) {
  static const uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

}  // namespace

void SpmModel::build(const std::vector<float>* scores, const TokenMap* token_map, int32_t unk_id) {
  scores_ = scores;
  token_map_ = token_map;
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    int32_t id = find_token(*token_map, hex);
    if (id < 0) {
      const char c = static_cast<char>(b);
      id = find_token(*token_map, std::string_view(&c, 1));
    }
    byte_token_[b] = id >= 0 ? id : unk_id;
  }
}

void SpmModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<Symbol> syms;
  syms.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(n), idx - 1,
                    off + n == text.size() ? -1 : idx + 1});
    off += n;
  }

  std::vector<Bigram> heap;
  const auto add_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = syms[l].len + syms[r].len;
    const int32_t id = find_token(*token_map_, text.substr(syms[l].start, size));
    if (id < 0) return;
    heap.push_back({(*scores_)[id], l, r, size});
    std::push_heap(heap.begin(), heap.end(), heap_less);
  };
  for (size_t i = 1; i < syms.size(); ++i) add_pair(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), heap_less);
    const Bigram bg = heap.back();
    heap.pop_back();
    Symbol& l = syms[bg.left];
    Symbol& r = syms[bg.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.size) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = bg.left;
    add_pair(l.prev, bg.left);
    add_pair(bg.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const std::string_view piece = text.substr(syms[i].start, syms[i].len);
    const int32_t id = find_token(*token_map_, piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t b = byte_token_[static_cast<uint8_t>(c)];
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace guild::tok
