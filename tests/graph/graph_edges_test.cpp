// graph/graph_edges.h's is_default_edge on the CPU (the edge queries need a graph, so they are in
// graph_edges_gpu_test.cu): only an all-zero edge — what stream capture makes without programmatic
// launches — is a plain edge; a programmatic port or type, a to-port, or any non-zero byte is not. The
// graph rewrites (memset_nodes, workspace_memsets) move nodes only across plain edges, so a programmatic
// edge taken for a plain one would drop its early-launch semantics.
#include "graph/graph_edges.h"

#include <gtest/gtest.h>

#include <cstring>

namespace sg::graph {
namespace {

TEST(GraphEdges, AZeroEdgeIsDefault) {
  EXPECT_TRUE(is_default_edge(cudaGraphEdgeData{}));
  cudaGraphEdgeData e;
  std::memset(&e, 0, sizeof(e));
  e.type = cudaGraphDependencyTypeDefault;
  e.from_port = cudaGraphKernelNodePortDefault;
  EXPECT_TRUE(is_default_edge(e));
}

TEST(GraphEdges, ProgrammaticEdgesAreNotDefault) {
  cudaGraphEdgeData e{};
  e.type = cudaGraphDependencyTypeProgrammatic;
  e.from_port = cudaGraphKernelNodePortProgrammatic;
  EXPECT_FALSE(is_default_edge(e));  // what a programmatic-dependent launch captures
  e.from_port = cudaGraphKernelNodePortLaunchCompletion;
  EXPECT_FALSE(is_default_edge(e));
  cudaGraphEdgeData type_only{};
  type_only.type = cudaGraphDependencyTypeProgrammatic;
  EXPECT_FALSE(is_default_edge(type_only));
  cudaGraphEdgeData port_only{};
  port_only.from_port = cudaGraphKernelNodePortProgrammatic;
  EXPECT_FALSE(is_default_edge(port_only));
}

TEST(GraphEdges, AnyNonZeroByteIsNotDefault) {
  cudaGraphEdgeData to{};
  to.to_port = 1;
  EXPECT_FALSE(is_default_edge(to));
  // Every byte of the struct, reserved ones included (a field a later CUDA adds there is not "plain").
  for (size_t i = 0; i < sizeof(cudaGraphEdgeData); ++i) {
    cudaGraphEdgeData e{};
    reinterpret_cast<unsigned char*>(&e)[i] = 0x01;
    EXPECT_FALSE(is_default_edge(e)) << "byte " << i;
  }
}

}  // namespace
}  // namespace sg::graph
