#include "graph/graph_edges.h"

#include <cstring>

#include "cuda/check.h"

namespace sg::graph {

NodeEdges node_dependencies(cudaGraphNode_t node) {
  size_t n = 0;
  SG_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &n));
  NodeEdges e{std::vector<cudaGraphNode_t>(n), std::vector<cudaGraphEdgeData>(n)};
  if (n > 0) SG_CUDA_CHECK(cudaGraphNodeGetDependencies(node, e.nodes.data(), e.data.data(), &n));
  return e;
}

NodeEdges node_dependents(cudaGraphNode_t node) {
  size_t n = 0;
  SG_CUDA_CHECK(cudaGraphNodeGetDependentNodes(node, nullptr, nullptr, &n));
  NodeEdges e{std::vector<cudaGraphNode_t>(n), std::vector<cudaGraphEdgeData>(n)};
  if (n > 0) SG_CUDA_CHECK(cudaGraphNodeGetDependentNodes(node, e.nodes.data(), e.data.data(), &n));
  return e;
}

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
