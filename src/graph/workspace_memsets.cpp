// Moving library workspace memsets up a captured graph (see workspace_memsets.h for why and when).
#include "graph/workspace_memsets.h"

#include <cuda.h>  // driver types only: the entry points come from cudaGetDriverEntryPointByVersion

#include <algorithm>
#include <vector>

#include "cuda/check.h"
#include "cuda/library_workspaces.h"
#include "graph/graph_edges.h"
#include "graph/graph_exec.h"

namespace sg::graph {

namespace {

using KernelNodeGetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
using FuncGetName = CUresult (*)(const char**, CUfunction);
using KernelGetName = CUresult (*)(const char**, CUkernel);

struct DriverEntryPoints {
  KernelNodeGetParams get_params = nullptr;
  FuncGetName func_name = nullptr;
  KernelGetName kernel_name = nullptr;
};

template <class Fn>
Fn entry_point(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  // 12030: the versions with the v2 kernel node parameters (func or kern) and cuKernelGetName.
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, 12030, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

const DriverEntryPoints& driver() {
  static const DriverEntryPoints d{
      .get_params = entry_point<KernelNodeGetParams>("cuGraphKernelNodeGetParams"),
      .func_name = entry_point<FuncGetName>("cuFuncGetName"),
      .kernel_name = entry_point<KernelGetName>("cuKernelGetName"),
  };
  return d;
}

bool ours(cudaGraphNode_t node) {
  return node_type(node) == cudaGraphNodeTypeKernel && kernel_node_name(node).rfind("_ZN2sg", 0) == 0;
}

// The node's one incoming edge's source, or nullptr when it has none, several, or a non-default one.
cudaGraphNode_t single_plain_dependency(cudaGraphNode_t node) {
  const NodeEdges in = node_dependencies(node);
  return in.nodes.size() == 1 && is_default_edge(in.data[0]) ? in.nodes[0] : nullptr;
}

bool depends_on(cudaGraphNode_t node, cudaGraphNode_t on) {
  const NodeEdges in = node_dependencies(node);
  return std::find(in.nodes.begin(), in.nodes.end(), on) != in.nodes.end();
}

}  // namespace

std::string kernel_node_name(cudaGraphNode_t node) {
  const DriverEntryPoints& d = driver();
  if (d.get_params == nullptr) return "";
  CUDA_KERNEL_NODE_PARAMS params{};
  if (d.get_params(reinterpret_cast<CUgraphNode>(node), &params) != CUDA_SUCCESS) return "";
  const char* name = nullptr;
  if (params.func != nullptr && d.func_name != nullptr) {
    if (d.func_name(&name, params.func) != CUDA_SUCCESS) name = nullptr;
  } else if (params.kern != nullptr && d.kernel_name != nullptr) {
    if (d.kernel_name(&name, params.kern) != CUDA_SUCCESS) name = nullptr;
  }
  return name != nullptr ? std::string(name) : std::string();
}

int hoist_library_workspace_memsets(cudaGraph_t graph) {
  int moved = 0;
  for (cudaGraphNode_t memset : graph_nodes(graph)) {
    if (node_type(memset) != cudaGraphNodeTypeMemset) continue;
    cudaMemsetParams p{};
    SG_CUDA_CHECK(cudaGraphMemsetNodeGetParams(memset, &p));
    const size_t row_bytes = p.width * p.elementSize;
    const size_t extent = p.height <= 1 ? row_bytes : (p.height - 1) * p.pitch + row_bytes;
    if (!cuda::inside_library_workspace(p.dst, extent)) continue;

    cudaGraphNode_t before = single_plain_dependency(memset);
    if (before == nullptr || !ours(before)) continue;  // right after a library kernel already, or not a chain
    const NodeEdges out = node_dependents(memset);
    if (!std::all_of(out.data.begin(), out.data.end(), is_default_edge)) continue;
    const std::vector<cudaGraphNode_t>& after = out.nodes;

    // Up past our kernels: the new source is the first node up the chain that is not ours, or the last of ours
    // below a join; nullptr when the chain starts with ours (the memset becomes a root).
    cudaGraphNode_t source = before;
    while (source != nullptr && ours(source)) {
      if (node_dependencies(source).nodes.empty()) {
        source = nullptr;
        break;
      }
      cudaGraphNode_t up = single_plain_dependency(source);
      if (up == nullptr) break;
      source = up;
    }
    if (source == before) continue;

    // The memset's dependents keep `before` ahead of them; then the memset leaves the chain.
    for (cudaGraphNode_t next : after) {
      if (!depends_on(next, before)) SG_CUDA_CHECK(cudaGraphAddDependencies(graph, &before, &next, nullptr, 1));
    }
    SG_CUDA_CHECK(cudaGraphRemoveDependencies(graph, &before, &memset, nullptr, 1));
    if (source != nullptr) SG_CUDA_CHECK(cudaGraphAddDependencies(graph, &source, &memset, nullptr, 1));
    ++moved;
  }
  return moved;
}

}  // namespace sg::graph
