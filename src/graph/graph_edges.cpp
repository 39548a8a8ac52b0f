#include "graph/graph_edges.h"

#include <cstring>

#include "cuda/check.h"

namespace sg::graph {

namespace {

// Both directions share the runtime's two-call query: the count, then the nodes with their edge data.
using EdgeQuery = cudaError_t (*)(cudaGraphNode_t, cudaGraphNode_t*, cudaGraphEdgeData*, size_t*);

NodeEdges query_edges(cudaGraphNode_t node, EdgeQuery query) {
  size_t n = 0;
  SG_CUDA_CHECK(query(node, nullptr, nullptr, &n));
  NodeEdges e{std::vector<cudaGraphNode_t>(n), std::vector<cudaGraphEdgeData>(n)};
  if (n > 0) SG_CUDA_CHECK(query(node, e.nodes.data(), e.data.data(), &n));
  return e;
}

}  // namespace

NodeEdges node_dependencies(cudaGraphNode_t node) { return query_edges(node, &cudaGraphNodeGetDependencies); }

NodeEdges node_dependents(cudaGraphNode_t node) { return query_edges(node, &cudaGraphNodeGetDependentNodes); }

bool is_default_edge(const cudaGraphEdgeData& edge) {
  static const cudaGraphEdgeData plain{};
  return std::memcmp(&edge, &plain, sizeof(edge)) == 0;
}

cudaGraphNodeType node_type(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  SG_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  return type;
}

}  // namespace sg::graph
