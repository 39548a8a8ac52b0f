#include "bench/kernel_profile.h"

#include <algorithm>
#include <map>

#include "bench/chrome_trace.h"
#include "core/error.h"
#include "core/strings.h"

namespace sg::bench {
namespace {

// "void sg::kernels::(anonymous namespace)::argmax_kernel(int*, float const*, long, long)" ->
// "sg::kernels::argmax_kernel": the part before the argument list, without anonymous namespaces
// (whose parenthesis is not the argument list's); templates stay (their arguments tell tile shapes apart).
std::string short_kernel_name(const std::string& mangled) {
  std::string name = demangle(mangled);
  const std::string anonymous = "(anonymous namespace)::";
  for (size_t at = name.find(anonymous); at != std::string::npos; at = name.find(anonymous, at)) {
    name.erase(at, anonymous.size());
  }
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (c == '(' && depth == 0 && i > 0) {
      name.resize(i);
      break;
    }
  }
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);
  return name;
}

}  // namespace

KernelProfile profile_kernels(const std::vector<ActivityRecord>& records) {
  KernelProfile profile;
  profile.summary = summarize_activity(records);
  std::map<std::string, KernelProfileRow> by_name;
  for (const ActivityRecord& r : records) {
    if (r.start_ns == 0 || r.end_ns < r.start_ns) continue;
    const std::string name = r.kind == ActivityKind::kernel && !r.name.empty()
                                 ? short_kernel_name(r.name)
                                 : std::string(activity_kind_name(r.kind));
    KernelProfileRow& row = by_name[name];
    row.name = name;
    const uint64_t ns = r.end_ns - r.start_ns;
    ++row.launches;
    row.total_ns += ns;
    row.longest_ns = std::max(row.longest_ns, ns);
  }
  for (auto& [name, row] : by_name) profile.rows.push_back(std::move(row));
  std::stable_sort(profile.rows.begin(), profile.rows.end(),
                   [](const KernelProfileRow& a, const KernelProfileRow& b) { return a.total_ns > b.total_ns; });
  return profile;
}

std::string format_kernel_profile(const KernelProfile& profile, int64_t repetitions, const std::string& repetition_name,
                                  double measured_ms_per_repetition, size_t top) {
  SG_CHECK(repetitions > 0, "format_kernel_profile: repetitions must be positive");
  const double n = static_cast<double>(repetitions);
  const ActivitySummary& s = profile.summary;
  uint64_t total_ns = 0;
  for (const auto& row : profile.rows) total_ns += row.total_ns;
  std::string out =
      strprintf("device time per %s (%lld %ss, CUPTI): %.1f us busy of %.1f us measured (%.0f%%); %.1f launches\n",
                repetition_name.c_str(), static_cast<long long>(repetitions), repetition_name.c_str(),
                s.busy_ns / n / 1e3, measured_ms_per_repetition * 1e3,
                measured_ms_per_repetition > 0 ? 100.0 * s.busy_ns / n / 1e6 / measured_ms_per_repetition : 0.0,
                static_cast<double>(s.records()) / n);
  out += strprintf("%10s %10s %7s %11s  %s\n", "launches", "us", "share", "longest us", "kernel");
  const auto line = [&](double launches, uint64_t ns, uint64_t longest, const std::string& name) {
    out += strprintf("%10.1f %10.1f %6.1f%% %11.1f  %s\n", launches, ns / n / 1e3,
                     total_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(total_ns) : 0.0,
                     longest / 1e3, name.c_str());
  };
  for (size_t i = 0; i < profile.rows.size() && i < top; ++i) {
    const KernelProfileRow& row = profile.rows[i];
    line(static_cast<double>(row.launches) / n, row.total_ns, row.longest_ns, row.name);
  }
  if (profile.rows.size() > top) {
    uint64_t launches = 0, ns = 0, longest = 0;
    for (size_t i = top; i < profile.rows.size(); ++i) {
      launches += profile.rows[i].launches;
      ns += profile.rows[i].total_ns;
      longest = std::max(longest, profile.rows[i].longest_ns);
    }
    line(static_cast<double>(launches) / n, ns, longest, strprintf("(%zu others)", profile.rows.size() - top));
  }
  return out;
}

}  // namespace sg::bench
