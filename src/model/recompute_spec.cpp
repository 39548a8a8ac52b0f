#include "model/recompute_spec.h"

namespace sg::model {
namespace {

struct GranularityName {
  RecomputeGranularity granularity;
  const char* name;
};
struct MethodName {
  RecomputeMethod method;
  const char* name;
};

// Megatron's --recompute-granularity and --recompute-method choices, in its order.
constexpr GranularityName kGranularityNames[] = {
    {.granularity = RecomputeGranularity::full, .name = "full"},
    {.granularity = RecomputeGranularity::selective, .name = "selective"},
};
constexpr MethodName kMethodNames[] = {
    {.method = RecomputeMethod::uniform, .name = "uniform"},
    {.method = RecomputeMethod::block, .name = "block"},
};

}  // namespace

const char* recompute_granularity_name(RecomputeGranularity granularity) {
  for (const GranularityName& g : kGranularityNames) {
    if (g.granularity == granularity) return g.name;
  }
  return "none";  // the key unset: no Megatron spelling (see the header)
}

std::optional<RecomputeGranularity> find_recompute_granularity(std::string_view name) {
  for (const GranularityName& g : kGranularityNames) {
    if (name == g.name) return g.granularity;
  }
  return std::nullopt;
}

std::vector<std::string> recompute_granularity_names() {
  std::vector<std::string> names;
  for (const GranularityName& g : kGranularityNames) names.emplace_back(g.name);
  return names;
}

const char* recompute_method_name(RecomputeMethod method) {
  for (const MethodName& m : kMethodNames) {
    if (m.method == method) return m.name;
  }
  return "?";
}

std::optional<RecomputeMethod> find_recompute_method(std::string_view name) {
  for (const MethodName& m : kMethodNames) {
    if (name == m.name) return m.method;
  }
  return std::nullopt;
}

std::vector<std::string> recompute_method_names() {
  std::vector<std::string> names;
  for (const MethodName& m : kMethodNames) names.emplace_back(m.name);
  return names;
}

}  // namespace sg::model
