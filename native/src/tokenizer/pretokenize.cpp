// Pre-tokenizers: hand-written state machines, no std::regex.
//
// llama.cpp splits text with a list of regexes (llama-vocab.cpp) that it runs
// either through hand-written splitters (GPT-2 and Llama-3 patterns) or through
// std::regex. For std::regex it first "collapses" the text: every code point
// >= 128 becomes one byte naming its class (whitespace -> \v, letter, number,
// punctuation, mark, symbol, anything else), and \p{L} etc. in the pattern
// become bracket expressions over those bytes plus their ASCII members. Regexes
// without \p{..} run on the wide text instead, with non-ASCII whitespace
// replaced by \v. The matchers below reproduce those semantics exactly
// (ECMAScript: leftmost match, alternatives in order, greedy with
// backtracking), including what follows from the collapsing: the ASCII
// members of \p{P} / \p{S} are llama.cpp's fixed lists, and \s is ASCII
// \t\n\v\f\r and space plus non-ASCII White_Space.
#include <algorithm>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace guild::tok {

namespace {

using unicode::is_whitespace;

constexpr uint32_t kNone = 0xFFFFFFFFu;  // "past the segment"

bool ascii_alpha(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }
uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }
bool is_rn(uint32_t c) { return c == '\r' || c == '\n'; }

// std::regex's \s in the "C" locale, on ASCII.
bool ascii_space(uint32_t c) { return c == ' ' || (c >= 0x09 && c <= 0x0D); }

// ---- classes as std::regex sees the collapsed text ----------------------
bool c_ws(uint32_t c) { return c < 128 ? ascii_space(c) : is_whitespace(c); }
uint8_t c_cat(uint32_t c) { return is_whitespace(c) ? 0 : unicode::flags(c); }  // c >= 128
bool c_letter(uint32_t c) { return c < 128 ? ascii_alpha(c) : (c_cat(c) & unicode::kLetter) != 0; }
bool c_number(uint32_t c) { return c < 128 ? ascii_digit(c) : (c_cat(c) & unicode::kNumber) != 0; }
bool c_mark(uint32_t c) { return c >= 128 && (c_cat(c) & unicode::kMark) != 0; }
bool c_punct(uint32_t c) {
  if (c >= 128) return (c_cat(c) & unicode::kPunct) != 0;
  // llama.cpp's ASCII members of \p{P}: !"#%&'()*,-./:;?@[\]_{}
  return (c >= 0x21 && c <= 0x23) || (c >= 0x25 && c <= 0x2A) || (c >= 0x2C && c <= 0x2F) || c == 0x3A ||
         c == 0x3B || c == 0x3F || c == 0x40 || (c >= 0x5B && c <= 0x5D) || c == 0x5F || c == 0x7B || c == 0x7D;
}
bool c_symbol(uint32_t c) {
  if (c >= 128) return (c_cat(c) & unicode::kSymbol) != 0;
  // llama.cpp's ASCII members of \p{S}: $+<=>^`|~
  return c == '$' || c == '+' || (c >= '<' && c <= '>') || c == '^' || c == '`' || c == '|' || c == '~';
}

// ---- the wide text: non-ASCII whitespace reads as \v --------------------
uint32_t w_char(uint32_t c) { return (c > 0x7F && is_whitespace(c)) ? 0x0B : c; }
bool w_ws(uint32_t c) { return ascii_space(w_char(c)); }

struct Range {
  uint32_t lo, hi;
};
template <size_t N>
bool in_ranges(uint32_t c, const Range (&r)[N]) {
  c = w_char(c);
  for (const Range& x : r)
    if (c >= x.lo && c <= x.hi) return true;
  return false;
}

constexpr Range kCjkHangul[] = {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}};
constexpr Range kCjkKana[] = {{0x4E00, 0x9FA5}, {0x3040, 0x309F}, {0x30A0, 0x30FF}};
constexpr Range kDsLlmPunct[] = {{0x21, 0x2F},     {0x3A, 0x7E},     {0xFF01, 0xFF0F},
                                 {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002}};
constexpr Range kDsLlmLetters[] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

// One segment [b, e) of the code points, with bounds-checked access.
struct Seg {
  const uint32_t* c;
  size_t b, e;
  std::vector<uint32_t>& out;
  size_t prev;  // end of the last piece

  uint32_t at(size_t p) const { return p < e ? c[p] : kNone; }
  // Emits [prev, end) if non-empty.
  void add(size_t end) {
    if (end > prev) out.push_back(static_cast<uint32_t>(end));
    prev = end;
  }
  template <class Pred>
  size_t run(size_t p, Pred pred) const {  // end of the run of pred from p
    while (p < e && pred(c[p])) ++p;
    return p;
  }
};

// Category of an in-range code point, 0 past the end (llama.cpp's empty flags).
uint8_t cat_at(const Seg& s, size_t p) { return p < s.e ? unicode::flags(s.c[p]) : 0; }
bool ws_at(const Seg& s, size_t p) { return p < s.e && is_whitespace(s.c[p]); }

// ---- llama.cpp's hand-written GPT-2 splitter -----------------------------
void split_gpt2(Seg& s) {
  using namespace unicode;
  size_t pos = s.b;
  while (pos < s.e) {
    const uint32_t ch = s.c[pos];
    if (ch == '\'' && pos + 1 < s.e) {  // 's 't 'm 'd 're 've 'll (case-sensitive)
      const uint32_t n1 = s.c[pos + 1];
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') { s.add(pos += 2); continue; }
      if (pos + 2 < s.e) {
        const uint32_t n2 = s.c[pos + 2];
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          s.add(pos += 3);
          continue;
        }
      }
    }
    const size_t p2 = ch == ' ' ? pos + 1 : pos;  // " ?" then a class
    const uint8_t f2 = cat_at(s, p2);
    const bool w2 = ws_at(s, p2);
    if (f2 & kLetter) {
      pos = p2;
      while (cat_at(s, pos) & kLetter) ++pos;
      s.add(pos);
      continue;
    }
    if (f2 & kNumber) {
      pos = p2;
      while (cat_at(s, pos) & kNumber) ++pos;
      s.add(pos);
      continue;
    }
    if (!w2 && !(f2 & (kLetter | kNumber)) && f2 != 0) {
      pos = p2;
      while (pos < s.e && !ws_at(s, pos) && !(cat_at(s, pos) & (kLetter | kNumber))) ++pos;
      s.add(pos);
      continue;
    }
    size_t n_ws = 0;
    while (ws_at(s, pos + n_ws)) ++n_ws;
    if (n_ws > 1 && pos + n_ws < s.e) {  // \s+(?!\S): leave the last one
      s.add(pos += n_ws - 1);
      continue;
    }
    if (n_ws > 0) {
      s.add(pos += n_ws);
      continue;
    }
    s.add(++pos);
  }
}

// ---- the Llama-3 family --------------------------------------------------
// llama.cpp's hand-written Llama-3 splitter; with other options this is also
// exactly what std::regex does with the Qwen2 / Qwen3.5 / seed-coder /
// minicpm5 patterns (same alternatives, different digit grouping, word class
// and punctuation tail).
struct L3Options {
  size_t max_digits;       // 1, 3, or 0 = unlimited
  bool marks_in_words;     // [\p{L}\p{M}]+ words, marks not punctuation (Qwen3.5)
  bool punct_newlines;     // [\r\n]* after a punctuation run
  bool contractions = true;
};

void split_llama3(Seg& s, const L3Options& o) {
  using namespace unicode;
  const uint8_t word_cls = o.marks_in_words ? (kLetter | kMark) : kLetter;
  const auto word_at = [&](size_t p) { return (cat_at(s, p) & word_cls) != 0; };
  const auto punct_at = [&](size_t p) {
    return p < s.e && !ws_at(s, p) && !(cat_at(s, p) & (word_cls | kNumber));
  };
  size_t pos = s.b;
  while (pos < s.e) {
    const uint32_t ch = s.c[pos];
    if (o.contractions && ch == '\'' && pos + 1 < s.e) {  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
      const uint32_t n1 = ascii_lower(s.c[pos + 1]);
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') { s.add(pos += 2); continue; }
      if (pos + 2 < s.e) {
        const uint32_t n2 = ascii_lower(s.c[pos + 2]);
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          s.add(pos += 3);
          continue;
        }
      }
    }
    const bool number = cat_at(s, pos) & kNumber;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_rn(ch) && !number && (word_at(pos) || word_at(pos + 1))) {
      ++pos;
      while (word_at(pos)) ++pos;
      s.add(pos);
      continue;
    }
    // \p{N}{1,max}
    if (number) {
      size_t start = pos;
      while (cat_at(s, pos) & kNumber) {
        ++pos;
        if (o.max_digits && pos - start >= o.max_digits) {
          s.add(pos);
          start = pos;
        }
      }
      s.add(pos);
      continue;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*". A lone space at the very end also lands
    // here in llama.cpp (the regex gives the same piece through \s+).
    const size_t p2 = ch == ' ' ? pos + 1 : pos;
    if (punct_at(p2) || (ch == ' ' && p2 == s.e)) {
      pos = p2;
      while (punct_at(pos)) ++pos;
      if (o.punct_newlines)
        while (pos < s.e && is_rn(s.c[pos])) ++pos;
      s.add(pos);
      continue;
    }
    size_t n_ws = 0, last_rn = 0;
    while (ws_at(s, pos + n_ws)) {
      if (is_rn(s.c[pos + n_ws])) last_rn = pos + n_ws + 1;
      ++n_ws;
    }
    if (last_rn > 0) {  // \s*[\r\n]+
      s.add(pos = last_rn);
      continue;
    }
    if (n_ws > 1 && pos + n_ws < s.e) {  // \s+(?!\S)
      s.add(pos += n_ws - 1);
      continue;
    }
    if (n_ws > 0) {  // \s+
      s.add(pos += n_ws);
      continue;
    }
    s.add(++pos);
  }
}

// The whitespace alternatives shared by several patterns, on a run of
// (collapsed) whitespace starting at p: \s*[\r\n]+ | \s+(?!\S) | \s+
size_t whitespace_tail(const Seg& s, size_t p) {
  size_t end = s.run(p, c_ws);
  if (end == p) return 0;
  for (size_t q = end; q > p; --q)
    if (is_rn(s.c[q - 1])) return q - p;
  const size_t n = end - p;
  return (n > 1 && end < s.e) ? n - 1 : n;
}

// ---- o200k (gpt-4o / llama4) and tekken ----------------------------------
// std::regex on the collapsed text with
//   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(contraction)?
//  |[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(contraction)?
//  |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Collapsed, a non-ASCII letter counts as both "not a-z" (U) and "not A-Z"
// (W), which decides where the backtracking stops.
void split_o200k(Seg& s, size_t max_digits, bool contractions) {
  const auto upper = [](uint32_t c) { return c < 128 ? (c >= 'A' && c <= 'Z') : c_letter(c); };
  const auto lower = [](uint32_t c) { return c < 128 ? (c >= 'a' && c <= 'z') : c_letter(c); };
  const auto contraction = [&](size_t p) -> size_t {  // length of (?:'[sS]|...)? at p
    if (!contractions || p + 1 >= s.e || s.c[p] != '\'') return 0;
    const uint32_t n1 = ascii_lower(s.c[p + 1]);
    if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
    if (p + 2 >= s.e) return 0;
    const uint32_t n2 = ascii_lower(s.c[p + 2]);
    return ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) ? 3 : 0;
  };
  size_t pos = s.b;
  while (pos < s.e) {
    const uint32_t ch = s.c[pos];
    const bool prefix = !is_rn(ch) && !c_letter(ch) && !c_number(ch);
    if (c_letter(ch) || (prefix && pos + 1 < s.e && c_letter(s.c[pos + 1]))) {
      const size_t w = c_letter(ch) ? pos : pos + 1;  // first letter
      const size_t u_end = s.run(w, upper);
      size_t end;
      if (u_end < s.e && lower(s.c[u_end])) {
        end = s.run(u_end, lower);  // U* W+
      } else {
        size_t last_both = u_end;   // backtrack U* to its last non-ASCII letter
        for (size_t q = u_end; q > w; --q)
          if (s.c[q - 1] >= 128) { last_both = q - 1; break; }
        end = last_both < u_end ? last_both + 1 : u_end;  // else the second alternative: U+
      }
      s.add(pos = end + contraction(end));
      continue;
    }
    if (c_number(ch)) {
      s.add(pos = std::min(s.run(pos, c_number), pos + max_digits));
      continue;
    }
    const auto punct = [](uint32_t c) { return !c_ws(c) && !c_letter(c) && !c_number(c); };
    const size_t p2 = ch == ' ' ? pos + 1 : pos;
    if ((p2 < s.e && punct(s.c[p2])) || (ch == ' ' && p2 == s.e)) {
      pos = s.run(p2, punct);
      while (pos < s.e && (is_rn(s.c[pos]) || s.c[pos] == '/')) ++pos;
      s.add(pos);
      continue;
    }
    const size_t n = whitespace_tail(s, pos);
    s.add(pos += n ? n : 1);
  }
}

// ---- regex-iterator stages -------------------------------------------------
// match(s, p) is the length of the match starting at p (0 = none). Unmatched
// stretches between matches become pieces of their own, as in llama.cpp.
template <class Match>
void split_matches(Seg& s, Match match) {
  size_t pos = s.b;
  while (pos < s.e) {
    const size_t n = match(s, pos);
    if (n == 0) {
      ++pos;
      continue;
    }
    s.add(pos);  // the gap before the match, if any
    s.add(pos += n);
  }
  s.add(s.e);
}

// \s?X+  (the optional whitespace only when an X follows it)
template <class Ws, class Cls>
size_t space_then_run(const Seg& s, size_t p, Ws ws, Cls cls) {
  if (ws(s.c[p]) && p + 1 < s.e && cls(s.c[p + 1])) return s.run(p + 1, cls) - p;
  return cls(s.c[p]) ? s.run(p, cls) - p : 0;
}

size_t match_dsv3(const Seg& s, size_t p) {
  const uint32_t ch = s.c[p];
  const auto ascii_alpha_cls = [](uint32_t c) { return c < 128 && ascii_alpha(c); };
  const auto word = [](uint32_t c) { return c_letter(c) || c_mark(c); };
  const auto ps = [](uint32_t c) { return c_punct(c) || c_symbol(c); };
  // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
  const bool ascii_ps = (ch >= 0x21 && ch <= 0x2F) || (ch >= 0x3A && ch <= 0x40) ||
                        (ch >= 0x5B && ch <= 0x60) || (ch >= 0x7B && ch <= 0x7E);
  if (ascii_ps && p + 1 < s.e && ascii_alpha_cls(s.c[p + 1])) return s.run(p + 1, ascii_alpha_cls) - p;
  // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
  if (!is_rn(ch) && !c_letter(ch) && !ps(ch) && p + 1 < s.e && word(s.c[p + 1])) return s.run(p + 1, word) - p;
  if (word(ch)) return s.run(p, word) - p;
  // " ?[\p{P}\p{S}]+[\r\n]*"
  const size_t q = (ch == ' ' && p + 1 < s.e && ps(s.c[p + 1])) ? p + 1 : p;
  if (ps(s.c[q])) return s.run(s.run(q, ps), is_rn) - p;
  return whitespace_tail(s, p);
}

void split_stage(Stage st, Seg& s) {
  switch (st) {
    case Stage::Gpt2: return split_gpt2(s);
    case Stage::Llama3: return split_llama3(s, {3, false, true});
    case Stage::Qwen2: return split_llama3(s, {1, false, true});
    case Stage::Qwen35: return split_llama3(s, {1, true, true});
    case Stage::SeedCoder: return split_llama3(s, {1, false, false});
    case Stage::Llama3AnyDigits: return split_llama3(s, {0, false, true});
    case Stage::Qwen2NoContractions: return split_llama3(s, {1, false, true, false});
    case Stage::Gpt4o: return split_o200k(s, 3, true);
    case Stage::Tekken: return split_o200k(s, 1, false);
    case Stage::NewlineRuns:
      return split_matches(s, [](const Seg& g, size_t p) {
        const bool nl = g.c[p] == '\n';
        return g.run(p, [nl](uint32_t c) { return (c == '\n') == nl; }) - p;
      });
    case Stage::NewlineEach:
      return split_matches(s, [](const Seg& g, size_t p) -> size_t { return is_rn(g.c[p]) ? 1 : 0; });
    case Stage::SpaceLetters:
      return split_matches(s, [](const Seg& g, size_t p) { return space_then_run(g, p, c_ws, c_letter); });
    case Stage::SpacePunct:
      return split_matches(s, [](const Seg& g, size_t p) { return space_then_run(g, p, c_ws, c_punct); });
    case Stage::CjkHangul:
      return split_matches(s, [](const Seg& g, size_t p) {
        return g.run(p, [](uint32_t c) { return in_ranges(c, kCjkHangul); }) - p;
      });
    case Stage::CjkKana:
      return split_matches(s, [](const Seg& g, size_t p) {
        return g.run(p, [](uint32_t c) { return in_ranges(c, kCjkKana); }) - p;
      });
    case Stage::NumberEach:
      return split_matches(s, [](const Seg& g, size_t p) -> size_t { return c_number(g.c[p]) ? 1 : 0; });
    case Stage::NumberRun:
      return split_matches(s, [](const Seg& g, size_t p) { return g.run(p, c_number) - p; });
    case Stage::Number3:
      return split_matches(s, [](const Seg& g, size_t p) { return std::min<size_t>(g.run(p, c_number) - p, 3); });
    case Stage::DsLlmLetters:
      return split_matches(s, [](const Seg& g, size_t p) {
        return space_then_run(g, p, w_ws, [](uint32_t c) { return in_ranges(c, kDsLlmLetters); });
      });
    case Stage::DsLlmPunct:
      return split_matches(s, [](const Seg& g, size_t p) {
        return space_then_run(g, p, w_ws, [](uint32_t c) { return in_ranges(c, kDsLlmPunct); });
      });
    case Stage::TrailingSpace: {  // \s+$: the whitespace run that reaches the end
      size_t t = s.e;
      while (t > s.b && w_ws(s.c[t - 1])) --t;
      s.add(t);
      s.add(s.e);
      return;
    }
    case Stage::DsV3Main: return split_matches(s, match_dsv3);
    case Stage::PunctSymRun:
    case Stage::PunctSymRunTick: {
      const bool tick = st == Stage::PunctSymRunTick;
      return split_matches(s, [tick](const Seg& g, size_t p) {
        return g.run(p, [tick](uint32_t c) {
                 return c_punct(c) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
                        c == '~' || c == '|' || (tick && c == '`');
               }) - p;
      });
    }
    case Stage::AsciiDigits3:
      return split_matches(s, [](const Seg& g, size_t p) -> size_t {
        return (p + 2 < g.e && ascii_digit(g.c[p]) && ascii_digit(g.c[p + 1]) && ascii_digit(g.c[p + 2])) ? 3 : 0;
      });
  }
}

}  // namespace

void pretokenize(const std::vector<Stage>& stages, const std::vector<uint32_t>& cps,
                 std::vector<uint32_t>* word_ends) {
  std::vector<uint32_t> ends, next;
  word_ends->clear();
  if (cps.empty()) return;
  ends.push_back(static_cast<uint32_t>(cps.size()));
  for (Stage st : stages) {
    next.clear();
    size_t b = 0;
    for (uint32_t e : ends) {
      Seg s{cps.data(), b, e, next, b};
      split_stage(st, s);
      b = e;
    }
    ends.swap(next);
  }
  word_ends->swap(ends);
}

}  // namespace guild::tok
