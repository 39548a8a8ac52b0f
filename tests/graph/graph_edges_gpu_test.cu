// graph/graph_edges.h's queries on a real graph: node_dependencies / node_dependents return every edge in
// each direction with its data (plain edges default, a programmatic edge between two kernel nodes not),
// nodes without edges return none, and node_type names each node's kind. is_default_edge alone is checked
// on the CPU (graph_edges_test.cpp).
// Filter: --gtest_filter='GraphEdgesGpu*'
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cuda/check.h"
#include "cuda/device.h"
#include "gpu_test_util.h"
#include "graph/graph_edges.h"

namespace sg::graph {
namespace {

__global__ void graph_edges_noop_kernel(int* x) {
  if (x != nullptr) *x += 1;
}

class GraphEdgesGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
    SG_CUDA_CHECK(cudaGraphCreate(&graph_, 0));
  }
  void TearDown() override {
    if (graph_ != nullptr) SG_CUDA_CHECK(cudaGraphDestroy(graph_));
  }
  cudaGraphNode_t empty_node(std::vector<cudaGraphNode_t> deps = {}) {
    cudaGraphNode_t n = nullptr;
    SG_CUDA_CHECK(cudaGraphAddEmptyNode(&n, graph_, deps.data(), deps.size()));
    return n;
  }
  cudaGraphNode_t kernel_node(int* x) {
    void* args[] = {&x};
    cudaKernelNodeParams p{};
    p.func = reinterpret_cast<void*>(&graph_edges_noop_kernel);
    p.gridDim = dim3(1);
    p.blockDim = dim3(1);
    p.kernelParams = args;
    cudaGraphNode_t n = nullptr;
    SG_CUDA_CHECK(cudaGraphAddKernelNode(&n, graph_, nullptr, 0, &p));
    return n;
  }
  cudaGraph_t graph_ = nullptr;
};

bool same_set(std::vector<cudaGraphNode_t> a, std::vector<cudaGraphNode_t> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

// A diamond of plain edges: a -> b, a -> c, b -> d, c -> d; and a lone node.
TEST_F(GraphEdgesGpu, PlainEdgesInBothDirections) {
  const cudaGraphNode_t a = empty_node();
  const cudaGraphNode_t b = empty_node({a});
  const cudaGraphNode_t c = empty_node({a});
  const cudaGraphNode_t d = empty_node({b, c});
  const cudaGraphNode_t lone = empty_node();

  EXPECT_TRUE(node_dependencies(a).nodes.empty());
  EXPECT_TRUE(same_set(node_dependents(a).nodes, {b, c}));
  EXPECT_TRUE(same_set(node_dependencies(b).nodes, {a}));
  EXPECT_TRUE(same_set(node_dependents(b).nodes, {d}));
  EXPECT_TRUE(same_set(node_dependencies(d).nodes, {b, c}));
  EXPECT_TRUE(node_dependents(d).nodes.empty());
  EXPECT_TRUE(node_dependencies(lone).nodes.empty());
  EXPECT_TRUE(node_dependents(lone).nodes.empty());
  for (const cudaGraphNode_t n : {a, b, c, d}) {
    for (const NodeEdges& e : {node_dependencies(n), node_dependents(n)}) {
      ASSERT_EQ(e.data.size(), e.nodes.size());
      for (const cudaGraphEdgeData& edge : e.data) EXPECT_TRUE(is_default_edge(edge));
    }
  }
  EXPECT_EQ(node_type(a), cudaGraphNodeTypeEmpty);
}

// A programmatic edge between two kernel nodes comes back with its data, from both ends; a plain edge
// added next to it stays plain.
TEST_F(GraphEdgesGpu, AProgrammaticEdgeKeepsItsData) {
  test::DeviceBuffer<int> x(1);
  const cudaGraphNode_t k1 = kernel_node(x.get());
  const cudaGraphNode_t k2 = kernel_node(x.get());
  const cudaGraphNode_t after = empty_node();
  cudaGraphEdgeData programmatic{};
  programmatic.from_port = cudaGraphKernelNodePortProgrammatic;
  programmatic.type = cudaGraphDependencyTypeProgrammatic;
  SG_CUDA_CHECK(cudaGraphAddDependencies(graph_, &k1, &k2, &programmatic, 1));
  SG_CUDA_CHECK(cudaGraphAddDependencies(graph_, &k1, &after, nullptr, 1));

  const NodeEdges out = node_dependents(k1);
  ASSERT_EQ(out.nodes.size(), 2u);
  ASSERT_EQ(out.data.size(), 2u);
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    if (out.nodes[i] == k2) {
      EXPECT_FALSE(is_default_edge(out.data[i]));
      EXPECT_EQ(out.data[i].type, cudaGraphDependencyTypeProgrammatic);
      EXPECT_EQ(out.data[i].from_port, cudaGraphKernelNodePortProgrammatic);
    } else {
      EXPECT_EQ(out.nodes[i], after);
      EXPECT_TRUE(is_default_edge(out.data[i]));
    }
  }
  const NodeEdges in = node_dependencies(k2);
  ASSERT_EQ(in.nodes.size(), 1u);
  EXPECT_EQ(in.nodes[0], k1);
  EXPECT_EQ(in.data[0].type, cudaGraphDependencyTypeProgrammatic);
  EXPECT_EQ(node_type(k1), cudaGraphNodeTypeKernel);
}

TEST_F(GraphEdgesGpu, NodeTypeNamesEachKind) {
  test::DeviceBuffer<int> x(1);
  cudaMemsetParams m{};
  m.dst = x.get();
  m.value = 0;
  m.elementSize = 4;
  m.width = 1;
  m.height = 1;
  cudaGraphNode_t memset = nullptr;
  SG_CUDA_CHECK(cudaGraphAddMemsetNode(&memset, graph_, nullptr, 0, &m));
  EXPECT_EQ(node_type(memset), cudaGraphNodeTypeMemset);
  EXPECT_EQ(node_type(kernel_node(x.get())), cudaGraphNodeTypeKernel);
  EXPECT_EQ(node_type(empty_node()), cudaGraphNodeTypeEmpty);
}

}  // namespace
}  // namespace sg::graph
