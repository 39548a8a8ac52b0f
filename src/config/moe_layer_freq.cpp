#include "config/moe_layer_freq.h"

#include <cctype>

#include "config/config.h"
#include "config/config_detail.h"
#include "core/strings.h"

namespace sg::config {

namespace {

constexpr const char* kKey = "model.moe_layer_freq";
// A list expression is user input: its length and its nesting are bounded before anything is built or recursed into.
constexpr size_t kMaxEntries = 100000;
constexpr int kMaxDepth = 32;

[[noreturn]] void fail(const std::string& value, const std::string& why) {
  const std::string text = value.size() > 200 ? value.substr(0, 200) + "..." : value;
  throw ConfigError(
      strprintf("%s = %s: %s; write an integer N (every N-th block is MoE), a 0/1 list with one "
                "entry per block ([1,0,1,1]) or a list expression such as \"([1]*3+[0])*2\"",
                kKey, text.c_str(), why.c_str()));
}

// expr := term ('+' term)*;  term := atom ('*' int)*;  atom := '[' bit (',' bit)* ']' | '(' expr ')'
class ListExpression {
 public:
  explicit ListExpression(std::string text) : text_(std::move(text)) {}

  std::vector<int> parse() {
    std::vector<int> out = expr();
    skip_space();
    if (pos_ != text_.size()) fail(text_, strprintf("unexpected '%c' at character %zu", text_[pos_], pos_ + 1));
    return out;
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(text_, strprintf("expected '%c' at character %zu", c, pos_ + 1));
  }
  int64_t integer() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (start == pos_ || pos_ - start > 6) fail(text_, strprintf("expected a small integer at character %zu", start + 1));
    return std::stoll(text_.substr(start, pos_ - start));
  }
  std::vector<int> expr() {
    std::vector<int> out = term();
    while (eat('+')) {
      const std::vector<int> more = term();
      if (out.size() + more.size() > kMaxEntries) {
        fail(text_, strprintf("a '+' before character %zu makes %zu entries, at most %zu (one per block)", pos_,
                              out.size() + more.size(), kMaxEntries));
      }
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  }
  std::vector<int> term() {
    std::vector<int> out = atom();
    while (eat('*')) {
      const int64_t times = integer();  // at most 6 digits: the product below fits
      const uint64_t entries = out.size() * static_cast<uint64_t>(times);
      if (entries > kMaxEntries) {
        fail(text_, strprintf("a repeat at character %zu makes %llu entries, at most %zu (one per block)", pos_,
                              static_cast<unsigned long long>(entries), kMaxEntries));
      }
      std::vector<int> repeated;
      repeated.reserve(entries);
      for (int64_t i = 0; i < times; ++i) repeated.insert(repeated.end(), out.begin(), out.end());
      out = std::move(repeated);
    }
    return out;
  }
  std::vector<int> atom() {
    if (eat('(')) {
      if (++depth_ > kMaxDepth) {
        fail(text_, strprintf("parentheses nest deeper than %d at character %zu", kMaxDepth, pos_));
      }
      std::vector<int> out = expr();
      expect(')');
      --depth_;
      return out;
    }
    expect('[');
    std::vector<int> out;
    do {
      const int64_t bit = integer();
      if (bit > 1) fail(text_, "list entries must be 0 (dense MLP) or 1 (MoE)");
      out.push_back(static_cast<int>(bit));
    } while (eat(','));
    expect(']');
    return out;
  }

  std::string text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// "[a<sep>b]". Appended, not "[" + join(...) + "]": GCC 12 warns a false -Wrestrict on a literal + string temporary.
std::string bracketed(const std::vector<std::string>& value, const char* separator) {
  std::string out = "[";
  out += join(value, separator);
  out += ']';
  return out;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

std::string format_moe_layer_freq(const std::vector<std::string>& value) {
  if (value.size() == 1 && all_digits(value[0])) return value[0];
  bool ints = !value.empty();
  for (const std::string& item : value) ints = ints && all_digits(item);
  if (ints) return bracketed(value, ", ");
  bool expression = false;
  for (const std::string& item : value) expression = expression || item.find_first_of("[]()*+") != std::string::npos;
  // An expression with commas arrives split at them (config_yaml.cpp): one string again, which reads back
  // split the same way.
  if (expression) return detail::format_yaml(join(value, ","));
  return detail::format_yaml(value);  // not a form Bridge has: as written, for validate to name
}

std::vector<int> expand_moe_layer_freq(const std::vector<std::string>& value, int64_t num_layers) {
  const std::string text = bracketed(value, ",");  // "[]" when empty
  if (value.empty()) fail(text, "it is empty");
  if (num_layers > static_cast<int64_t>(kMaxEntries)) {  // one entry per block: bounded before it is expanded
    fail(text, strprintf("model.num_layers = %lld is more blocks than it expands to (at most %zu)",
                         static_cast<long long>(num_layers), kMaxEntries));
  }
  std::vector<int> per_block;
  if (value.size() == 1 && all_digits(value[0])) {
    // An integer: every N-th block (Megatron: [1 if i % N == 0 else 0 for i in range(num_layers)]).
    if (value[0].size() > 6) fail(value[0], "the frequency is too large");
    const int64_t every = std::stoll(value[0]);
    if (every < 1) fail(value[0], "the frequency must be at least 1");
    for (int64_t b = 0; b < num_layers; ++b) per_block.push_back(b % every == 0 ? 1 : 0);
    return per_block;
  }
  bool expression = false;
  for (const std::string& item : value) expression = expression || item.find_first_of("[]()*+") != std::string::npos;
  if (expression) {
    // A string with commas inside ("([1,0]*2)") arrives split at them: rejoin it.
    per_block = ListExpression(join(value, ",")).parse();
  } else {
    for (const std::string& item : value) {
      if (item != "0" && item != "1") fail(text, "list entries must be 0 (dense MLP) or 1 (MoE), got '" + item + "'");
      per_block.push_back(item == "1" ? 1 : 0);
    }
  }
  if (static_cast<int64_t>(per_block.size()) != num_layers) {
    fail(text, strprintf("it lists %zu blocks but model.num_layers is %lld (one entry per block)", per_block.size(),
                         static_cast<long long>(num_layers)));
  }
  return per_block;
}

}  // namespace sg::config
