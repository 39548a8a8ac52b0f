#include "generate/text_continuation.h"

#include <algorithm>

#include "core/strings.h"

namespace sg::generate {

namespace {

bool in(unsigned char b, unsigned char lo, unsigned char hi) { return b >= lo && b <= hi; }
bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Length of the well-formed UTF-8 character starting at text[i] (RFC 3629, table 3-7 of the Unicode
// standard), 0 when none starts there.
size_t utf8_char_length(std::string_view text, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const size_t left = text.size() - i;
  const unsigned char b0 = at(0);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (in(b0, 0xC2, 0xDF)) {
    n = 2;
  } else if (in(b0, 0xE0, 0xEF)) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (in(b0, 0xF0, 0xF4)) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (left < n || !in(at(1), lo, hi)) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (!is_continuation(at(k))) return 0;
  }
  return n;
}

}  // namespace

std::optional<size_t> first_invalid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_char_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::string escaped_excerpt(std::string_view text, size_t focus, size_t max_bytes) {
  focus = std::min(focus, text.size());
  size_t begin = focus > max_bytes / 2 ? focus - max_bytes / 2 : 0;
  while (begin > 0 && is_continuation(static_cast<unsigned char>(text[begin]))) --begin;  // a whole character
  const size_t end = std::min(text.size(), begin + max_bytes);
  std::string out = begin > 0 ? "..." : "";
  for (size_t i = begin; i < end;) {
    const size_t n = utf8_char_length(text, i);
    const auto b = static_cast<unsigned char>(text[i]);
    if (n > 1) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += n == 1 && b >= 0x20 && b < 0x7F ? std::string(1, static_cast<char>(b)) : strprintf("\\x%02X", b);
      ++i;
    }
  }
  if (end < text.size()) out += "...";
  return out;
}

Continuation continuation_text(std::string_view prompt_text, std::string_view full_text) {
  if (full_text.substr(0, prompt_text.size()) == prompt_text) {
    return {std::string(full_text.substr(prompt_text.size())), false};
  }
  const size_t limit = std::min(prompt_text.size(), full_text.size());
  size_t common = 0;
  while (common < limit && prompt_text[common] == full_text[common]) ++common;
  // Both decodes are UTF-8 (a tokenizer decodes lossily): start on a whole character of full_text.
  while (common > 0 && common < full_text.size() && is_continuation(static_cast<unsigned char>(full_text[common]))) {
    --common;
  }
  return {std::string(full_text.substr(common)), true};
}

}  // namespace sg::generate
