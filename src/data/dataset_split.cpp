#include "data/dataset_split.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/strings.h"

namespace sg::data {

const char* split_name(Split split) {
  switch (split) {
    case Split::train: return "train";
    case Split::valid: return "valid";
    case Split::test: return "test";
  }
  return "?";
}

SplitShares parse_split(const std::string& text) {
  const auto fail = [&](const std::string& why) {
    return Error(strprintf("dataset.split = \"%s\": %s; write train,valid,test shares such as \"969,30,1\" "
                           "(Megatron's default), \"90,10\" or \"90/10/0\"",
                           text.c_str(), why.c_str()));
  };
  // Megatron reads the numbers with a regex, so "90,10,0", "90/10/0" and "90, 10, 0" all work there; stepgraph
  // takes ',' and '/' as separators and refuses anything else rather than guess what it meant.
  std::string commas = text;
  std::replace(commas.begin(), commas.end(), '/', ',');
  const std::vector<std::string> parts = split(commas, ',');
  if (parts.empty() || parts.size() > 3) throw fail("expected 1 to 3 numbers separated by ',' or '/'");
  SplitShares shares = {0.0, 0.0, 0.0};
  double total = 0.0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string part = trim(parts[i]);
    char* end = nullptr;
    errno = 0;
    const double v = part.empty() ? -1.0 : std::strtod(part.c_str(), &end);
    if (part.empty() || errno != 0 || end != part.c_str() + part.size() || !std::isfinite(v) || v < 0.0) {
      throw fail("'" + part + "' is not a non-negative number");
    }
    shares[i] = v;
    total += v;
  }
  if (!(total > 0.0)) throw fail("the shares sum to 0");
  for (double& s : shares) s /= total;
  return shares;
}

std::array<uint64_t, 4> split_document_bounds(const SplitShares& shares, uint64_t num_documents) {
  // std::nearbyint rounds half to even in the default rounding mode, like Python's round().
  const double n = static_cast<double>(num_documents);
  std::array<int64_t, 4> b = {0, 0, 0, 0};
  for (size_t i = 0; i < 3; ++i) b[i + 1] = b[i] + static_cast<int64_t>(std::nearbyint(shares[i] * n));
  const int64_t excess = b[3] - static_cast<int64_t>(num_documents);
  for (size_t i = 1; i < 4; ++i) b[i] -= excess;
  std::array<uint64_t, 4> out{};
  for (size_t i = 0; i < 4; ++i) out[i] = static_cast<uint64_t>(std::max<int64_t>(b[i], 0));
  return out;
}

}  // namespace sg::data
