#pragma once
// A validation report as text, for a failing assertion's message: every violation, then every note.
#include <string>

#include "config/validate.h"

namespace sg::test {

inline std::string describe(const config::ValidationReport& r) {
  std::string out;
  for (const auto& v : r.violations) out += config::format_violation(v);
  for (const auto& n : r.notes) out += config::format_note(n);
  return out;
}

}  // namespace sg::test
