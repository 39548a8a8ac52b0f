#include "config/moment_dtype.h"

namespace sg::config {

const std::vector<std::string>& moment_dtype_names() {
  static const std::vector<std::string> names = {"fp32", "bf16"};
  return names;
}

std::optional<kernels::FloatDtype> moment_dtype_named(const std::string& name) {
  if (name == "fp32") return kernels::FloatDtype::fp32;
  if (name == "bf16") return kernels::FloatDtype::bf16;
  return std::nullopt;
}

}  // namespace sg::config
