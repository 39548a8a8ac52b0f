#pragma once
// A node's edges and type, for the graph rewrites (graph/memset_nodes.h, graph/workspace_memsets.h).
#include <cuda_runtime.h>

#include <vector>

namespace sg::graph {

// The nodes at the other end of a node's edges, with each edge's data.
struct NodeEdges {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaGraphEdgeData> data;
};
NodeEdges node_dependencies(cudaGraphNode_t node);  // incoming
NodeEdges node_dependents(cudaGraphNode_t node);    // outgoing

// A plain edge (what stream capture makes without programmatic launches): all edge data zero.
bool is_default_edge(const cudaGraphEdgeData& edge);

cudaGraphNodeType node_type(cudaGraphNode_t node);

}  // namespace sg::graph
