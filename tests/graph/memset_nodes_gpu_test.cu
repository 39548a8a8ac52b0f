// Memset nodes lowered to fill kernels, on the GPU: the fill kernel writes exactly what
// ref::memset_elements writes (and nothing around it) for sizes that are and are not multiples of its
// 16-byte stores, odd offsets, every element size, pitched rows and more rows than a grid holds; a
// captured graph with memsets between kernels, fan-in and fan-out gives the same bytes after lowering
// as before, has no memset node left and keeps its edges; memsets from kLargestLoweredMemsetBytes up
// stay memset nodes; GraphExec lowers and updates in place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "graph/graph_exec.h"
#include "graph/memset_nodes.h"
#include "reference/memset.h"

namespace sg::graph {
namespace {

using test::DeviceBuffer;

class MemsetNodes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

std::vector<unsigned char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(gen());
  return v;
}

struct FillCase {
  size_t offset;
  unsigned element_size;
  uint32_t value;
  size_t width;
  size_t height;
  size_t pitch;
};

TEST_F(MemsetNodes, FillKernelMatchesReferenceAndWritesNothingElse) {
  const std::vector<FillCase> cases = {
      {0, 1, 0x00, 1, 1, 0},
      {3, 1, 0xAB, 15, 1, 0},
      {1, 1, 0x5C, 16, 1, 0},
      {7, 1, 0x11, 17, 1, 0},
      {0, 4, 0x00000000, (29631488 / 4), 1, 0},  // the tiny model's gradient zeroing
      {4, 4, 0xDEADBEEF, (1 << 20) + 7, 1, 0},
      {2, 2, 0xBEEF, 100003, 1, 0},
      {13, 1, 0xFE, 5000001, 1, 0},               // more vectors than the grid has threads
      {8, 4, 0x3F800000, 1, 1, 0},                // cuDNN's 4-byte counter
      {1, 1, 0x42, 33, 9, 50},
      {4, 4, 0xCAFEF00D, 3, 70000, 16},            // more rows than gridDim.y
      {6, 2, 0x1234, 1000, 7, 2050},
      {5, 1, 0x77, 40, 0, 64},                    // zero rows: nothing written
  };
  cuda::Stream stream;
  uint32_t seed = 1;
  for (const FillCase& c : cases) {
    const size_t span = c.offset + (c.height - 1) * (c.height > 1 ? c.pitch : 0) + c.width * c.element_size;
    const size_t bytes = span + 64;  // guard bytes after the region
    DeviceBuffer<unsigned char> buf(bytes);
    const std::vector<unsigned char> poison = random_bytes(bytes, seed++);  // fresh, so unwritten or stray bytes show
    buf.upload(poison);
    cudaMemsetParams p{};
    p.dst = buf.get() + c.offset;
    p.pitch = c.pitch;
    p.value = c.value;
    p.elementSize = c.element_size;
    p.width = c.width;
    p.height = c.height;
    launch_memset_fill(stream.get(), memset_fill_job(p));
    stream.synchronize();
    std::vector<unsigned char> expected = poison;
    ref::memset_elements(expected.data() + c.offset, c.pitch, c.value, c.element_size, c.width, c.height);
    const std::vector<unsigned char> got = buf.download();
    size_t first_diff = bytes;
    for (size_t i = 0; i < bytes; ++i) {
      if (got[i] != expected[i]) {
        first_diff = i;
        break;
      }
    }
    EXPECT_EQ(first_diff, bytes) << "offset " << c.offset << " es " << c.element_size << " width " << c.width
                                 << " height " << c.height << ": first wrong byte at " << first_diff;
  }
}

__global__ void add_to_bytes(unsigned char* x, size_t n, unsigned char by) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    x[i] = static_cast<unsigned char>(x[i] + by);
  }
}

int count_nodes_of(cudaGraph_t graph, cudaGraphNodeType want) {
  int count = 0;
  for (cudaGraphNode_t node : graph_nodes(graph)) {
    cudaGraphNodeType t{};
    SG_CUDA_CHECK(cudaGraphNodeGetType(node, &t));
    count += t == want;
  }
  return count;
}

size_t count_edges(cudaGraph_t graph) {
  size_t n = 0;
  SG_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n));
  return n;
}

// Kernels and memsets on two streams joined by events, so the graph has fan-out and fan-in around
// memset nodes; each step reads what the previous one wrote, so a lost edge changes the bytes.
void enqueue_mixed_work(cudaStream_t s0, cudaStream_t s1, cudaEvent_t fork, cudaEvent_t join, unsigned char* a,
                        unsigned char* b, size_t n) {
  add_to_bytes<<<8, 128, 0, s0>>>(a, n, 1);
  SG_CUDA_CHECK(cudaMemsetAsync(a + 3, 0x20, n / 2, s0));  // odd offset, 1-byte elements
  SG_CUDA_CHECK(cudaEventRecord(fork, s0));
  SG_CUDA_CHECK(cudaStreamWaitEvent(s1, fork, 0));
  add_to_bytes<<<8, 128, 0, s0>>>(a, n, 3);  // reads the memset's bytes
  SG_CUDA_CHECK(cudaMemsetAsync(b, 0x7, n, s1));
  add_to_bytes<<<4, 128, 0, s1>>>(b, n, 5);
  SG_CUDA_CHECK(cudaMemset2DAsync(b + 1, 64, 0x33, 17, n / 64 - 1, s1));
  SG_CUDA_CHECK(cudaEventRecord(join, s1));
  SG_CUDA_CHECK(cudaStreamWaitEvent(s0, join, 0));
  SG_CUDA_CHECK(cudaMemsetAsync(a, 0x1, 5, s0));
  add_to_bytes<<<8, 128, 0, s0>>>(b, n, 7);
  SG_CUDA_CHECK(cudaGetLastError());
}

TEST_F(MemsetNodes, LoweredGraphGivesTheSameBytesAndKeepsItsEdges) {
  constexpr size_t n = 64 * 1024 + 13;
  cuda::Stream s0, s1;
  cudaEvent_t fork = nullptr, join = nullptr;
  SG_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  SG_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  DeviceBuffer<unsigned char> a(n), b(n);

  SG_CUDA_CHECK(cudaStreamBeginCapture(s0.get(), cudaStreamCaptureModeThreadLocal));
  enqueue_mixed_work(s0.get(), s1.get(), fork, join, a.get(), b.get(), n);
  cudaGraph_t original = nullptr;
  SG_CUDA_CHECK(cudaStreamEndCapture(s0.get(), &original));
  cudaGraph_t lowered = nullptr;
  SG_CUDA_CHECK(cudaGraphClone(&lowered, original));

  const int memsets = count_nodes_of(original, cudaGraphNodeTypeMemset);
  ASSERT_EQ(memsets, 4) << "the capture should hold the four memsets as memset nodes";
  const int kernels = count_nodes_of(original, cudaGraphNodeTypeKernel);
  const size_t edges = count_edges(original);
  EXPECT_EQ(lower_memset_nodes(lowered), memsets);
  EXPECT_EQ(count_nodes_of(lowered, cudaGraphNodeTypeMemset), 0);
  EXPECT_EQ(count_nodes_of(lowered, cudaGraphNodeTypeKernel), kernels + memsets);
  EXPECT_EQ(count_edges(lowered), edges);
  EXPECT_EQ(lower_memset_nodes(lowered), 0) << "a second pass has nothing left to lower";

  const std::vector<unsigned char> init_a = random_bytes(n, 11), init_b = random_bytes(n, 12);
  auto run = [&](cudaGraph_t graph) {
    a.upload(init_a);
    b.upload(init_b);
    cudaGraphExec_t exec = nullptr;
    SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 3; ++i) SG_CUDA_CHECK(cudaGraphLaunch(exec, s0.get()));
    s0.synchronize();
    SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
    return std::make_pair(a.download(), b.download());
  };
  const auto want = run(original);
  const auto got = run(lowered);
  EXPECT_TRUE(got.first == want.first) << "buffer a differs after lowering";
  EXPECT_TRUE(got.second == want.second) << "buffer b differs after lowering";
  EXPECT_TRUE(want.first != init_a && want.second != init_b) << "the graph must change both buffers";

  SG_CUDA_CHECK(cudaGraphDestroy(original));
  SG_CUDA_CHECK(cudaGraphDestroy(lowered));
  SG_CUDA_CHECK(cudaEventDestroy(fork));
  SG_CUDA_CHECK(cudaEventDestroy(join));
}

TEST_F(MemsetNodes, FillJobsKernelMatchesReferenceAndWritesNothingElse) {
  // Odd offsets, every element size, a job smaller than one vector, an empty one and one over a grid row.
  const std::vector<FillCase> cases = {{3, 1, 0xAB, 15, 1, 0},     {40, 4, 0xDEADBEEF, 1000, 1, 0},
                                       {5000, 2, 0xBEEF, 3001, 1, 0}, {12000, 1, 0x5C, 0, 1, 0},
                                       {12016, 4, 0x3F800000, 1, 1, 0}, {13001, 1, 0x42, 5000001, 1, 0}};
  size_t bytes = 0;
  for (const FillCase& c : cases) bytes = std::max(bytes, c.offset + c.width * c.element_size);
  bytes += 64;
  DeviceBuffer<unsigned char> buf(bytes);
  const std::vector<unsigned char> poison = random_bytes(bytes, 77);
  buf.upload(poison);
  std::vector<cudaMemsetParams> params;
  std::vector<unsigned char> expected = poison;
  for (const FillCase& c : cases) {
    cudaMemsetParams p{};
    p.dst = buf.get() + c.offset;
    p.value = c.value;
    p.elementSize = c.element_size;
    p.width = c.width;
    p.height = 1;
    params.push_back(p);
    ref::memset_elements(expected.data() + c.offset, 0, c.value, c.element_size, c.width, 1);
  }
  cuda::Stream stream;
  launch_memset_fill_jobs(stream.get(), memset_fill_jobs(params.data(), static_cast<int>(params.size())));
  stream.synchronize();
  EXPECT_TRUE(buf.download() == expected) << "the jobs kernel wrote other bytes than the memsets would";

  // Overlapping jobs, several rows and too many jobs are refused.
  cudaMemsetParams overlap[2] = {params[1], params[1]};
  overlap[1].dst = static_cast<unsigned char*>(params[1].dst) + 8;
  EXPECT_THROW(memset_fill_jobs(overlap, 2), Error);
  cudaMemsetParams rows = params[0];
  rows.height = 2;
  rows.pitch = 64;
  EXPECT_THROW(memset_fill_jobs(&rows, 1), Error);
  std::vector<cudaMemsetParams> many(kMaxMergedMemsets + 1, params[0]);
  EXPECT_THROW(memset_fill_jobs(many.data(), static_cast<int>(many.size())), Error);
}

TEST_F(MemsetNodes, AChainOfDisjointMemsetsBecomesOneFillKernel) {
  constexpr size_t n = 256 * 1024 + 7;
  cuda::Stream s0;
  DeviceBuffer<unsigned char> a(n), c(4096);
  auto enqueue = [&](cudaStream_t s) {
    add_to_bytes<<<8, 128, 0, s>>>(a.get(), n, 1);
    // Four disjoint memsets in a row (odd offsets, one of 4 bytes, one of many blocks): one fill kernel.
    SG_CUDA_CHECK(cudaMemsetAsync(a.get() + 1, 0x11, 1000, s));
    SG_CUDA_CHECK(cudaMemsetAsync(a.get() + 2000, 0x22, 6000, s));
    SG_CUDA_CHECK(cudaMemsetAsync(a.get() + 9000, 0x44, 4, s));
    SG_CUDA_CHECK(cudaMemsetAsync(a.get() + 10000, 0x55, n - 10000, s));
    add_to_bytes<<<8, 128, 0, s>>>(a.get(), n, 5);
    // Two overlapping ones: their order matters, so they stay apart.
    SG_CUDA_CHECK(cudaMemsetAsync(c.get(), 0x01, 100, s));
    SG_CUDA_CHECK(cudaMemsetAsync(c.get() + 50, 0x02, 100, s));
    add_to_bytes<<<4, 128, 0, s>>>(c.get(), 4096, 3);
    SG_CUDA_CHECK(cudaGetLastError());
  };
  SG_CUDA_CHECK(cudaStreamBeginCapture(s0.get(), cudaStreamCaptureModeThreadLocal));
  enqueue(s0.get());
  cudaGraph_t original = nullptr;
  SG_CUDA_CHECK(cudaStreamEndCapture(s0.get(), &original));
  cudaGraph_t lowered = nullptr;
  SG_CUDA_CHECK(cudaGraphClone(&lowered, original));
  ASSERT_EQ(count_nodes_of(original, cudaGraphNodeTypeMemset), 6);
  EXPECT_EQ(lower_memset_nodes(lowered), 6);
  EXPECT_EQ(count_nodes_of(lowered, cudaGraphNodeTypeMemset), 0);
  EXPECT_EQ(count_nodes_of(lowered, cudaGraphNodeTypeKernel), 3 + 1 + 2) << "the chain of four is one node";
  EXPECT_EQ(count_edges(lowered), size_t{5}) << "a chain: kernel, fill, kernel, fill, fill, kernel";

  const std::vector<unsigned char> init_a = random_bytes(n, 31), init_c = random_bytes(4096, 32);
  auto run = [&](cudaGraph_t graph) {
    a.upload(init_a);
    c.upload(init_c);
    cudaGraphExec_t exec = nullptr;
    SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 2; ++i) SG_CUDA_CHECK(cudaGraphLaunch(exec, s0.get()));
    s0.synchronize();
    SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
    return std::make_pair(a.download(), c.download());
  };
  const auto want = run(original);
  const auto got = run(lowered);
  EXPECT_TRUE(got.first == want.first) << "buffer a differs after merging";
  EXPECT_TRUE(got.second == want.second) << "buffer c differs: the overlapping memsets ran out of order";
  SG_CUDA_CHECK(cudaGraphDestroy(original));
  SG_CUDA_CHECK(cudaGraphDestroy(lowered));
}

TEST_F(MemsetNodes, LargeMemsetsStayMemsetNodes) {
  cuda::Stream stream;
  DeviceBuffer<unsigned char> big(kLargestLoweredMemsetBytes), small(kLargestLoweredMemsetBytes - 1);
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  SG_CUDA_CHECK(cudaMemsetAsync(big.get(), 0, kLargestLoweredMemsetBytes, stream.get()));
  SG_CUDA_CHECK(cudaMemsetAsync(small.get(), 0, kLargestLoweredMemsetBytes - 1, stream.get()));
  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &graph));
  EXPECT_EQ(lower_memset_nodes(graph), 1) << "only the memset below the threshold is lowered";
  EXPECT_EQ(count_nodes_of(graph, cudaGraphNodeTypeMemset), 1);
  EXPECT_EQ(count_nodes_of(graph, cudaGraphNodeTypeKernel), 1);
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

TEST_F(MemsetNodes, GraphExecLowersAndUpdatesInPlace) {
  constexpr size_t n = 4096 + 3;
  cuda::Stream s0, s1;
  cudaEvent_t fork = nullptr, join = nullptr;
  SG_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  SG_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  DeviceBuffer<unsigned char> a(n), b(n), a2(n), b2(n);
  auto capture = [&](unsigned char* x, unsigned char* y) {
    SG_CUDA_CHECK(cudaStreamBeginCapture(s0.get(), cudaStreamCaptureModeThreadLocal));
    enqueue_mixed_work(s0.get(), s1.get(), fork, join, x, y, n);
    cudaGraph_t g = nullptr;
    SG_CUDA_CHECK(cudaStreamEndCapture(s0.get(), &g));
    return g;
  };
  GraphExec exec("memset test region");
  EXPECT_FALSE(exec.install(capture(a.get(), b.get()), s0.get(), 0.0));
  EXPECT_EQ(exec.info().memset_nodes_lowered, 4u);
  // The same launches on other buffers: same topology, so the lowered graph updates in place.
  EXPECT_TRUE(exec.install(capture(a2.get(), b2.get()), s0.get(), 0.0));
  EXPECT_EQ(exec.info().instantiations, 1);
  EXPECT_EQ(exec.info().updates, 1);

  const std::vector<unsigned char> init_a = random_bytes(n, 21), init_b = random_bytes(n, 22);
  a.upload(init_a);
  b.upload(init_b);
  a2.upload(init_a);
  b2.upload(init_b);
  exec.launch(s0.get());  // now writes a2/b2
  s0.synchronize();
  EXPECT_TRUE(a.download() == init_a && b.download() == init_b) << "the updated graph still wrote the old buffers";
  // The eager run of the same work on a/b is the reference.
  enqueue_mixed_work(s0.get(), s1.get(), fork, join, a.get(), b.get(), n);
  s0.synchronize();
  EXPECT_TRUE(a2.download() == a.download());
  EXPECT_TRUE(b2.download() == b.download());
  SG_CUDA_CHECK(cudaEventDestroy(fork));
  SG_CUDA_CHECK(cudaEventDestroy(join));
}

}  // namespace
}  // namespace sg::graph
