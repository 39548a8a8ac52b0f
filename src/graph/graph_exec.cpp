#include "graph/graph_exec.h"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "graph/memset_nodes.h"
#include "graph/workspace_memsets.h"

namespace sg::graph {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

const char* instantiate_result_name(cudaGraphInstantiateResult r) {
  switch (r) {
    case cudaGraphInstantiateSuccess: return "success";
    case cudaGraphInstantiateError: return "error";
    case cudaGraphInstantiateInvalidStructure: return "invalid structure (e.g. a cycle)";
    case cudaGraphInstantiateNodeOperationNotSupported: return "a node operation is not supported";
    case cudaGraphInstantiateMultipleDevicesNotSupported: return "nodes on several devices";
    default: return "unknown";
  }
}

// STEPGRAPH_KEEP_WORKSPACE_MEMSET_ORDER=1 leaves library workspace memsets where the capture put them
// (graph/workspace_memsets.h): to measure what moving them gains, or to rule it out.
bool keep_workspace_memset_order() {
  static const bool keep = [] {
    const char* v = std::getenv("STEPGRAPH_KEEP_WORKSPACE_MEMSET_ORDER");
    return v != nullptr && std::string(v) == "1";
  }();
  return keep;
}

// STEPGRAPH_KEEP_MEMSET_NODES=1 keeps captured memset nodes as they are: to measure what lowering
// them gains (docs/graph-runtime.md), or to rule it out when chasing a problem.
bool keep_memset_nodes() {
  static const bool keep = [] {
    const char* v = std::getenv("STEPGRAPH_KEEP_MEMSET_NODES");
    return v != nullptr && std::string(v) == "1";
  }();
  return keep;
}

// STEPGRAPH_GRAPH_DOT_DIR=<dir>: every captured graph is written as <dir>/<name>.dot (verbose: kernel
// names, launch shapes, memset targets) before the memset rewrite, to see what a region captured.
void write_dot_if_asked(cudaGraph_t graph, const std::string& name) {
  static const char* dir = std::getenv("STEPGRAPH_GRAPH_DOT_DIR");
  if (dir == nullptr || *dir == '\0') return;
  std::string file;
  for (const char c : name) file += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  const std::string path = std::string(dir) + "/" + file + ".dot";
  const cudaError_t err = cudaGraphDebugDotPrint(graph, path.c_str(), cudaGraphDebugDotFlagsVerbose);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(strprintf("STEPGRAPH_GRAPH_DOT_DIR: cannot write %s (%s): does the folder exist and is it writable?",
                          path.c_str(), cudaGetErrorString(err)));
  }
  log::info(strprintf("graph %s written to %s", name.c_str(), path.c_str()));
}

// Destroys the captured graph on every path out of install().
struct GraphOwner {
  cudaGraph_t graph;
  ~GraphOwner() {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
  }
};

}  // namespace

std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph) {
  size_t count = 0;
  SG_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> list(count);
  if (count > 0) SG_CUDA_CHECK(cudaGraphGetNodes(graph, list.data(), &count));
  list.resize(count);
  return list;
}

void count_graph_nodes(cudaGraph_t graph, uint64_t& nodes, uint64_t& kernel_nodes) {
  const std::vector<cudaGraphNode_t> list = graph_nodes(graph);
  nodes = list.size();
  kernel_nodes = 0;
  for (cudaGraphNode_t node : list) {
    cudaGraphNodeType type{};
    SG_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel) ++kernel_nodes;
  }
}

void GraphExec::instantiate(cudaGraph_t graph, cudaStream_t stream) {
  cudaGraphInstantiateParams params{};
  // Upload at instantiation: the first replay then costs what every later one costs.
  params.flags = cudaGraphInstantiateFlagUpload;
  params.uploadStream = stream;
  const cudaError_t err = cudaGraphInstantiateWithParams(&exec_, graph, &params);
  if (err != cudaSuccess) {
    exec_ = nullptr;
    (void)cudaGetLastError();
    throw Error(strprintf("instantiating the CUDA graph of %s failed: %s: %s (result: %s)", info_.name.c_str(),
                          cudaGetErrorName(err), cudaGetErrorString(err),
                          instantiate_result_name(params.result_out)));
  }
  ++info_.instantiations;
}

bool GraphExec::install(cudaGraph_t graph, cudaStream_t stream, double capture_ms) {
  GraphOwner owner{graph};
  SG_CHECK(graph != nullptr, strprintf("GraphExec::install(%s): null graph", info_.name.c_str()));
  info_.capture_ms = capture_ms;
  info_.total_capture_ms += capture_ms;

  write_dot_if_asked(graph, info_.name);
  const auto t0 = Clock::now();  // the rewrites count as part of instantiation
  info_.memset_nodes_hoisted =
      keep_workspace_memset_order() ? 0 : static_cast<uint64_t>(hoist_library_workspace_memsets(graph));
  info_.memset_nodes_lowered = keep_memset_nodes() ? 0 : static_cast<uint64_t>(lower_memset_nodes(graph));
  count_graph_nodes(graph, info_.nodes, info_.kernel_nodes);
  bool updated = false;
  if (exec_ != nullptr) {
    cudaGraphExecUpdateResultInfo result{};
    const cudaError_t err = cudaGraphExecUpdate(exec_, graph, &result);
    if (err == cudaSuccess) {
      // Keep the "first replay is not slower" property of instantiation with upload.
      SG_CUDA_CHECK(cudaGraphUpload(exec_, stream));
      updated = true;
      ++info_.updates;
    } else {
      // Topology or node kinds changed: expected to be rare (a region whose launches changed).
      (void)cudaGetLastError();
      log::debug(strprintf("graph %s: cudaGraphExecUpdate not possible (%s, result %d); re-instantiating",
                           info_.name.c_str(), cudaGetErrorName(err), static_cast<int>(result.result)));
      destroy();
    }
  }
  if (!updated) instantiate(graph, stream);
  info_.instantiate_ms = ms_since(t0);
  info_.total_instantiate_ms += info_.instantiate_ms;
  return updated;
}

void GraphExec::launch(cudaStream_t stream) {
  SG_CHECK(exec_ != nullptr, strprintf("graph %s launched before it was captured", info_.name.c_str()));
  const cudaError_t err = cudaGraphLaunch(exec_, stream);
  if (err != cudaSuccess) {
    throw Error(strprintf("cudaGraphLaunch of %s failed: %s: %s%s%s", info_.name.c_str(), cudaGetErrorName(err),
                          cudaGetErrorString(err), *cuda::error_hint(err) ? "\n  hint: " : "",
                          cuda::error_hint(err)));
  }
  ++info_.launches;
}

void GraphExec::destroy() noexcept {
  if (exec_ == nullptr) return;
  // On a healthy context this returns at once (in-flight launches finish first); on a broken one
  // (sticky error) it returns the error, which we ignore: the process is going down anyway.
  (void)cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
}

}  // namespace sg::graph
