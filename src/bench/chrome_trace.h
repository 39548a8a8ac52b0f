#pragma once
// --trace FILE: one steady-state step's device activity per mode as Chrome trace JSON (the Trace Event
// Format that Perfetto, chrome://tracing and Nsight's importers read). Layout: one process per mode
// (named by its label, in run order), one thread per CUDA stream ("stream 13"), one complete event
// ("ph": "X") per kernel/memset/memcpy with ts and dur in microseconds, ts counted from the mode's first
// record so the modes line up at 0. Kernel names are demangled. Pure CPU.
#include <string>
#include <vector>

#include "bench/device_activity.h"

namespace sg::bench {

struct TraceProcess {
  std::string label;                    // the mode, e.g. "local"
  std::vector<ActivityRecord> records;  // one step
};

// The JSON text. `metadata_json` (a JSON object, e.g. the recipe and device) goes under "otherData".
std::string chrome_trace_json(const std::vector<TraceProcess>& processes, const std::string& metadata_json = "{}");

// Writes it to `path`; throws sg::Error naming the path when it cannot.
void write_chrome_trace(const std::string& path, const std::vector<TraceProcess>& processes,
                        const std::string& metadata_json = "{}");

// "_Z6kernelPfi" -> "kernel(float*, int)"; names that are not mangled C++ come back unchanged.
std::string demangle(const std::string& name);

}  // namespace sg::bench
