#pragma once
// What the graph runtime did, for the trainer's log and the bench: one struct, filled by
// GraphRegistry::stats() (and the runners for the region count and the capture step time).
#include <cstdint>
#include <string>

#include "core/strings.h"

namespace sg::graph {

struct GraphStats {
  int graphs_created = 0;        // graph instantiations (cudaGraphInstantiate)
  int graphs_updated = 0;        // re-captures applied in place with cudaGraphExecUpdate
  int graphs_live = 0;           // executable graphs held now
  int graphable_regions = 0;     // regions the scope plan graphs (1 for a full-iteration graph)
  double capture_ms = 0.0;       // host time spent capturing, summed over captures
  double instantiate_ms = 0.0;   // host time spent instantiating + uploading / updating, summed
  uint64_t replays = 0;          // graph launches
  uint64_t nodes = 0;            // nodes of the live graphs
  uint64_t kernel_nodes = 0;     // kernel nodes of the live graphs (memset nodes lowered included)
  uint64_t memset_nodes_lowered = 0;  // captured memset nodes replaced by fill kernels (graph/memset_nodes.h)
  uint64_t memset_nodes_hoisted = 0;  // library workspace memsets moved off the critical path (graph/workspace_memsets.h)
  double capture_step_ms = -1.0; // wall time of the step that captured (< 0: no capture yet)

  std::string summary() const {
    std::string s = strprintf(
        "graphs: %d created, %d updated, %d live, %d graphable regions; %llu nodes (%llu kernels, %llu of them "
        "lowered memsets; %llu workspace memsets moved up); "
        "capture %.2f ms, instantiate %.2f ms; %llu replays",
        graphs_created, graphs_updated, graphs_live, graphable_regions,
        static_cast<unsigned long long>(nodes), static_cast<unsigned long long>(kernel_nodes),
        static_cast<unsigned long long>(memset_nodes_lowered), static_cast<unsigned long long>(memset_nodes_hoisted),
        capture_ms,
        instantiate_ms, static_cast<unsigned long long>(replays));
    if (capture_step_ms >= 0.0) s += strprintf("; capture step %.2f ms", capture_step_ms);
    return s;
  }
};

}  // namespace sg::graph
