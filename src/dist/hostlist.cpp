#include "dist/hostlist.h"

#include "core/error.h"
#include "core/strings.h"

namespace sg::dist {

std::string first_host(std::string_view hostlist, const std::string& variable) {
  const auto fail = [&](const char* why) {
    return Error(strprintf("%s = '%.*s' is not a Slurm hostlist (%s); set MASTER_ADDR to the host of rank 0",
                           variable.c_str(), static_cast<int>(hostlist.size()), hostlist.data(), why));
  };
  // The first top-level item: up to the first comma outside brackets.
  int depth = 0;
  size_t end = hostlist.size();
  for (size_t i = 0; i < hostlist.size(); ++i) {
    const char c = hostlist[i];
    if (c == '[') {
      if (++depth > 1) throw fail("nested brackets");
    } else if (c == ']') {
      if (--depth < 0) throw fail("']' without '['");
    } else if (c == ',' && depth == 0) {
      end = i;
      break;
    }
  }
  const std::string item = trim(hostlist.substr(0, end));
  if (item.empty()) throw fail("no host");
  std::string host;
  for (size_t i = 0; i < item.size(); ++i) {
    if (item[i] != '[') {
      host.push_back(item[i]);
      continue;
    }
    const size_t close = item.find(']', i);
    if (close == std::string::npos) throw fail("'[' without ']'");
    const std::string group = item.substr(i + 1, close - i - 1);
    // First range of the group, then the first value of that range ("001-004" -> "001").
    std::string first = group.substr(0, group.find(','));
    first = first.substr(0, first.find('-'));
    if (first.empty()) throw fail("an empty bracket range");
    for (const char d : first) {
      if (d < '0' || d > '9') throw fail("a bracket range that is not numeric");
    }
    host += first;
    i = close;
  }
  return host;
}

}  // namespace sg::dist
