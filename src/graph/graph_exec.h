#pragma once
// One executable graph: instantiate (with upload), launch, destroy; re-capture of the same region
// with the same topology is applied in place with cudaGraphExecUpdate (no new instantiation, no new
// device memory), and falls back to a fresh instantiation when the topology changed.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sg::graph {

struct GraphInfo {
  std::string name;
  uint64_t nodes = 0;         // of the latest capture
  uint64_t kernel_nodes = 0;
  uint64_t memset_nodes_lowered = 0;  // of the latest capture, now kernel nodes (graph/memset_nodes.h)
  uint64_t memset_nodes_hoisted = 0;  // of the latest capture, library workspace memsets moved up (graph/workspace_memsets.h)
  double capture_ms = 0.0;      // latest capture
  double instantiate_ms = 0.0;  // latest memset lowering + instantiate+upload or update
  double total_capture_ms = 0.0;
  double total_instantiate_ms = 0.0;
  int instantiations = 0;
  int updates = 0;            // captures applied with cudaGraphExecUpdate
  uint64_t launches = 0;
};

// A graph's top-level nodes, and its node and kernel-node counts.
std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph);
void count_graph_nodes(cudaGraph_t graph, uint64_t& nodes, uint64_t& kernel_nodes);

class GraphExec {
 public:
  explicit GraphExec(std::string name) { info_.name = std::move(name); }
  ~GraphExec() { destroy(); }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;

  // Takes ownership of `graph` (always destroyed here, also on error); moves library workspace memsets off
  // the critical path (graph/workspace_memsets.h) and lowers memset nodes to kernel nodes first
  // (graph/memset_nodes.h). Without an executable yet:
  // instantiates with cudaGraphInstantiateFlagUpload on `stream`. With one: tries
  // cudaGraphExecUpdate; on a topology mismatch destroys the old executable and instantiates anew.
  // Returns true when the executable was updated in place.
  bool install(cudaGraph_t graph, cudaStream_t stream, double capture_ms);

  // Enqueues one replay on `stream`.
  void launch(cudaStream_t stream);

  // Destroys the executable (an in-flight launch completes first: the driver frees it afterwards,
  // so this never blocks). Never throws.
  void destroy() noexcept;

  bool valid() const { return exec_ != nullptr; }
  cudaGraphExec_t get() const { return exec_; }
  const GraphInfo& info() const { return info_; }

 private:
  void instantiate(cudaGraph_t graph, cudaStream_t stream);

  cudaGraphExec_t exec_ = nullptr;
  GraphInfo info_;
};

}  // namespace sg::graph
