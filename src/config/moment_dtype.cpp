#include "config/moment_dtype.h"

#include <utility>

#include "config/config.h"
#include "config/config_detail.h"
#include "config/validate.h"
#include "core/strings.h"

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

std::optional<std::string> moment_dtype_spelled(const std::string& name) {
  if (name == "torch.float32" || name == "float32") return "fp32";
  if (name == "torch.bfloat16" || name == "bfloat16") return "bf16";
  return std::nullopt;
}

void read_bridge_moment_dtypes(OptimizerConfig& optimizer, std::vector<Note>& notes) {
  std::vector<KeyValue> values;
  std::vector<std::string> read;
  for (auto [key, dtype] : {std::pair<const char*, std::string*>{"optimizer.exp_avg_dtype", &optimizer.exp_avg_dtype},
                            {"optimizer.exp_avg_sq_dtype", &optimizer.exp_avg_sq_dtype}}) {
    const std::optional<std::string> name = moment_dtype_spelled(*dtype);
    if (!name) continue;
    values.push_back({key, detail::format_yaml(*dtype)});
    read.push_back(strprintf("%s %s as %s", key, dtype->c_str(), name->c_str()));
    *dtype = *name;
  }
  if (values.empty()) return;
  notes.push_back({16, "Bridge's spelling of a dtype read as stepgraph's: " + join(read, ", "), values});
}

}  // namespace sg::config
