// Library workspace memsets moved off the critical path, on the GPU: in a captured chain
//   library kernel -> ours -> ours -> memset(workspace counter) -> library kernel -> ours
// the memset ends up right after the first library kernel, the second library kernel still follows both
// the memset and our kernels, and replays read a cleared counter every time; a memset outside any
// registered workspace, or one right after a library kernel, stays where it was; one that only our kernels
// precede becomes a root; GraphExec reports how many it moved.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/device.h"
#include "cuda/library_workspaces.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "graph/graph_exec.h"
#include "graph/workspace_memsets.h"

// Outside namespace sg: to the rewrite this is a library's kernel. It reports and then dirties its counter,
// as a persistent GEMM's tile counter is left non-zero.
__global__ void library_counter_kernel(int* counter, int* seen) {
  *seen = *counter;
  *counter = 7;
}

namespace sg::graph {
namespace {

using test::DeviceBuffer;

__global__ void our_increment_kernel(float* x) { *x += 1.0f; }

class WorkspaceMemsets : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

std::vector<cudaGraphNode_t> dependencies(cudaGraphNode_t node) {
  size_t n = 0;
  SG_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &n));
  std::vector<cudaGraphNode_t> from(n);
  std::vector<cudaGraphEdgeData> edges(n);
  if (n > 0) SG_CUDA_CHECK(cudaGraphNodeGetDependencies(node, from.data(), edges.data(), &n));
  return from;
}

bool contains(const std::vector<cudaGraphNode_t>& v, cudaGraphNode_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The graph's nodes in capture order (top-level nodes come back in creation order).
struct Chain {
  cudaGraph_t graph = nullptr;
  std::vector<cudaGraphNode_t> nodes;
};

// lib -> ours -> ours -> memset(target) -> lib -> ours, captured on one stream.
Chain capture_chain(cudaStream_t s, int* counter, int* memset_target, int* seen, float* x) {
  SG_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  library_counter_kernel<<<1, 1, 0, s>>>(counter, seen);
  our_increment_kernel<<<1, 1, 0, s>>>(x);
  our_increment_kernel<<<1, 1, 0, s>>>(x);
  SG_CUDA_CHECK(cudaMemsetAsync(memset_target, 0, sizeof(int), s));
  library_counter_kernel<<<1, 1, 0, s>>>(counter, seen + 1);
  our_increment_kernel<<<1, 1, 0, s>>>(x);
  Chain c;
  SG_CUDA_CHECK(cudaStreamEndCapture(s, &c.graph));
  c.nodes = graph_nodes(c.graph);
  return c;
}

TEST_F(WorkspaceMemsets, KernelNodeNamesTellOursFromTheLibrarys) {
  cuda::Stream stream;
  DeviceBuffer<int> counter(1), seen(2);
  DeviceBuffer<float> x(1);
  Chain c = capture_chain(stream.get(), counter.get(), counter.get(), seen.get(), x.get());
  ASSERT_EQ(c.nodes.size(), 6u);
  EXPECT_NE(kernel_node_name(c.nodes[0]).find("library_counter_kernel"), std::string::npos);
  EXPECT_NE(kernel_node_name(c.nodes[0]).rfind("_ZN2sg", 0), 0u) << "the library kernel must not look like ours";
  EXPECT_EQ(kernel_node_name(c.nodes[1]).rfind("_ZN2sg", 0), 0u) << kernel_node_name(c.nodes[1]);
  EXPECT_NE(kernel_node_name(c.nodes[1]).find("our_increment_kernel"), std::string::npos);
  EXPECT_EQ(kernel_node_name(c.nodes[3]), "") << "a memset node has no kernel name";
  SG_CUDA_CHECK(cudaGraphDestroy(c.graph));
}

TEST_F(WorkspaceMemsets, MovesTheCounterClearUpToThePreviousLibraryKernel) {
  cuda::Stream stream;
  DeviceBuffer<int> workspace(64), seen(2);
  DeviceBuffer<float> x(1);
  const cuda::LibraryWorkspace registration(workspace.get(), 64 * sizeof(int));
  int* counter = workspace.get() + 5;
  Chain c = capture_chain(stream.get(), counter, counter, seen.get(), x.get());
  ASSERT_EQ(c.nodes.size(), 6u);
  EXPECT_EQ(hoist_library_workspace_memsets(c.graph), 1);

  const cudaGraphNode_t lib0 = c.nodes[0], ours1 = c.nodes[2], memset = c.nodes[3], lib1 = c.nodes[4];
  EXPECT_EQ(dependencies(memset), std::vector<cudaGraphNode_t>{lib0}) << "the memset now follows the library kernel";
  const std::vector<cudaGraphNode_t> lib1_deps = dependencies(lib1);
  EXPECT_EQ(lib1_deps.size(), 2u);
  EXPECT_TRUE(contains(lib1_deps, memset) && contains(lib1_deps, ours1))
      << "the library kernel still follows the memset and our kernels";
  EXPECT_EQ(dependencies(c.nodes[5]), std::vector<cudaGraphNode_t>{lib1});

  // Replays: the first library kernel sees the counter as the previous replay left it (7 after the first),
  // the second always sees it cleared.
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, c.graph, 0));
  SG_CUDA_CHECK(cudaMemsetAsync(counter, 0x11, sizeof(int), stream.get()));
  SG_CUDA_CHECK(cudaMemsetAsync(x.get(), 0, sizeof(float), stream.get()));
  for (int replay = 0; replay < 3; ++replay) {
    SG_CUDA_CHECK(cudaMemsetAsync(seen.get(), 0xFF, 2 * sizeof(int), stream.get()));  // poison
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream.get()));
    stream.synchronize();
    const std::vector<int> s = seen.download();
    EXPECT_EQ(s[0], replay == 0 ? 0x11111111 : 7) << "replay " << replay;
    EXPECT_EQ(s[1], 0) << "replay " << replay << ": the second library kernel saw an uncleared counter";
  }
  EXPECT_EQ(x.download()[0], 9.0f);
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(c.graph));
}

TEST_F(WorkspaceMemsets, LeavesOtherMemsetsWhereTheyAre) {
  cuda::Stream stream;
  DeviceBuffer<int> workspace(64), outside(4), seen(2);
  DeviceBuffer<float> x(1);
  const cuda::LibraryWorkspace registration(workspace.get(), 64 * sizeof(int));
  // Outside every workspace (the memset clears a buffer of ours).
  Chain c = capture_chain(stream.get(), workspace.get(), outside.get() + 1, seen.get(), x.get());
  EXPECT_EQ(hoist_library_workspace_memsets(c.graph), 0);
  EXPECT_EQ(dependencies(c.nodes[3]), std::vector<cudaGraphNode_t>{c.nodes[2]});
  SG_CUDA_CHECK(cudaGraphDestroy(c.graph));
  // Straddling the workspace's end.
  EXPECT_FALSE(cuda::inside_library_workspace(workspace.get() + 63, 8));
  EXPECT_TRUE(cuda::inside_library_workspace(workspace.get() + 63, 4));

  // Right after a library kernel already: nothing to gain.
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  library_counter_kernel<<<1, 1, 0, stream.get()>>>(workspace.get(), seen.get());
  SG_CUDA_CHECK(cudaMemsetAsync(workspace.get(), 0, sizeof(int), stream.get()));
  library_counter_kernel<<<1, 1, 0, stream.get()>>>(workspace.get(), seen.get() + 1);
  cudaGraph_t g = nullptr;
  SG_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &g));
  EXPECT_EQ(hoist_library_workspace_memsets(g), 0);
  SG_CUDA_CHECK(cudaGraphDestroy(g));
}

TEST_F(WorkspaceMemsets, BecomesARootWhenOnlyOurKernelsPrecedeIt) {
  cuda::Stream stream;
  DeviceBuffer<int> workspace(16), seen(2);
  DeviceBuffer<float> x(1);
  const cuda::LibraryWorkspace registration(workspace.get(), 16 * sizeof(int));
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  our_increment_kernel<<<1, 1, 0, stream.get()>>>(x.get());
  our_increment_kernel<<<1, 1, 0, stream.get()>>>(x.get());
  SG_CUDA_CHECK(cudaMemsetAsync(workspace.get(), 0, sizeof(int), stream.get()));
  library_counter_kernel<<<1, 1, 0, stream.get()>>>(workspace.get(), seen.get());
  cudaGraph_t g = nullptr;
  SG_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &g));
  const std::vector<cudaGraphNode_t> nodes = graph_nodes(g);
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(hoist_library_workspace_memsets(g), 1);
  EXPECT_TRUE(dependencies(nodes[2]).empty());
  EXPECT_EQ(dependencies(nodes[3]).size(), 2u);
  SG_CUDA_CHECK(cudaGraphDestroy(g));
}

TEST_F(WorkspaceMemsets, GraphExecReportsTheMovedMemsets) {
  cuda::Stream stream;
  DeviceBuffer<int> workspace(16), seen(2);
  DeviceBuffer<float> x(1);
  const cuda::LibraryWorkspace registration(workspace.get(), 16 * sizeof(int));
  Chain c = capture_chain(stream.get(), workspace.get(), workspace.get(), seen.get(), x.get());
  GraphExec exec("workspace memset test");
  exec.install(c.graph, stream.get(), 0.0);
  EXPECT_EQ(exec.info().memset_nodes_hoisted, 1u);
  EXPECT_EQ(exec.info().memset_nodes_lowered, 1u);
  exec.launch(stream.get());
  stream.synchronize();
  EXPECT_EQ(seen.download()[1], 0);
}

}  // namespace
}  // namespace sg::graph
