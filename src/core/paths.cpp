#include "core/paths.h"

namespace sg {

namespace fs = std::filesystem;

fs::path normalized_directory(const std::string& path) {
  std::error_code ec;
  // Absolute first: weakly_canonical leaves a relative path whose first element is missing as it is, so "ck"
  // (not created yet) and "./ck" would differ.
  const fs::path absolute = fs::absolute(path, ec).lexically_normal();
  fs::path p = fs::weakly_canonical(absolute, ec);
  if (ec) p = absolute;
  while (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p;
}

bool same_directory(const std::string& a, const std::string& b) {
  return normalized_directory(a) == normalized_directory(b);
}

std::string describe_path(const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  // A working directory removed under the process has no name to give: say so rather than print nothing.
  if (ec) return path + " (relative to the working directory, whose path cannot be read: " + ec.message() + ")";
  return path + " (relative to the working directory " + cwd.string() + ")";
}

}  // namespace sg
