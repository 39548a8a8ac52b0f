#include "bench/chrome_trace.h"

#include <cxxabi.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/strings.h"

namespace sg::bench {

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                              std::free);
  return status == 0 && text ? std::string(text.get()) : name;
}

std::string chrome_trace_json(const std::vector<TraceProcess>& processes, const std::string& metadata_json) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t pid = 0; pid < processes.size(); ++pid) {
    const TraceProcess& process = processes[pid];
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", process.label}}}});
    events.push_back(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
    uint64_t origin = UINT64_MAX;
    for (const ActivityRecord& r : process.records) {
      if (r.start_ns != 0 && r.end_ns >= r.start_ns) origin = std::min(origin, r.start_ns);
    }
    std::set<uint32_t> streams;
    for (const ActivityRecord& r : process.records) {
      if (r.start_ns == 0 || r.end_ns < r.start_ns) continue;  // no usable timestamp (see ActivitySummary::invalid)
      streams.insert(r.stream);
      nlohmann::json args = {{"stream", r.stream}};
      if (r.graph_id != 0) args["graph_id"] = r.graph_id;
      if (r.kind != ActivityKind::kernel) args["bytes"] = r.bytes;
      const std::string name = r.name.empty() ? std::string(activity_kind_name(r.kind)) : demangle(r.name);
      events.push_back({{"name", name},
                        {"cat", activity_kind_name(r.kind)},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", r.stream},
                        {"ts", static_cast<double>(r.start_ns - origin) / 1e3},
                        {"dur", static_cast<double>(r.end_ns - r.start_ns) / 1e3},
                        {"args", std::move(args)}});
    }
    for (const uint32_t stream : streams) {
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", stream},
                        {"args", {{"name", strprintf("stream %u", stream)}}}});
    }
  }
  nlohmann::json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
  trace["otherData"] = nlohmann::json::parse(metadata_json);
  return trace.dump(
      1, ' ', false,
      nlohmann::json::error_handler_t::replace);  // a recipe path that is not UTF-8 must not lose the trace
}

void write_chrome_trace(const std::string& path, const std::vector<TraceProcess>& processes,
                        const std::string& metadata_json) {
  const std::string text = chrome_trace_json(processes, metadata_json);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  SG_CHECK(out.good(), strprintf("cannot write the trace to %s: %s", path.c_str(), std::strerror(errno)));
  out << text << "\n";
  out.close();
  SG_CHECK(!out.fail(), strprintf("writing the trace to %s failed: %s", path.c_str(), std::strerror(errno)));
}

}  // namespace sg::bench
