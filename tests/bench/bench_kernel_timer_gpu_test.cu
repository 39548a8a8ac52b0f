// KernelTimer (bench/kernel_timer.h) against launches whose count we know: eager kernels and a
// memset, the same work captured as a CUDA graph (after the timer attached) and replayed, nothing
// recorded outside a window, names kept only when asked, and one timer per process.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "bench/chrome_trace.h"
#include "bench/device_activity.h"
#include "bench/kernel_timer.h"

namespace sg::bench {
namespace {

__global__ void bench_timer_test_kernel(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.5f + 1.0f;
}

constexpr int kKernels = 5;
constexpr int kElements = 1 << 20;

void enqueue(cudaStream_t stream, float* x) {
  SG_CUDA_CHECK(cudaMemsetAsync(x, 0, kElements * sizeof(float), stream));
  for (int k = 0; k < kKernels; ++k) {
    bench_timer_test_kernel<<<(kElements + 255) / 256, 256, 0, stream>>>(x, kElements);
    SG_CUDA_CHECK_LAUNCH("bench_timer_test_kernel");
  }
}

int count_ours(const std::vector<ActivityRecord>& records, bool from_graph) {
  int n = 0;
  for (const ActivityRecord& r : records) {
    if (r.kind == ActivityKind::kernel && demangle(r.name).find("bench_timer_test_kernel") != std::string::npos &&
        (r.graph_id != 0) == from_graph) {
      ++n;
    }
  }
  return n;
}

TEST(KernelTimer, RecordsEagerKernelsAndGraphReplays) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  KernelTimer timer;
  EXPECT_THROW(KernelTimer second, Error);  // CUPTI's callbacks are process-wide
  cuda::Stream stream;
  test::DeviceBuffer<float> buffer(kElements);

  // Outside a window nothing is kept.
  enqueue(stream, buffer.get());
  stream.synchronize();
  timer.begin(true);
  EXPECT_TRUE(timer.end().empty());

  // Eager: every kernel and the memset, with names, timestamps and the stream.
  timer.begin(true);
  enqueue(stream, buffer.get());
  const std::vector<ActivityRecord> eager = timer.end();
  EXPECT_EQ(count_ours(eager, false), kKernels);
  int memsets = 0;
  for (const ActivityRecord& r : eager) {
    EXPECT_GE(r.end_ns, r.start_ns);
    EXPECT_GT(r.start_ns, 0u);
    if (r.kind == ActivityKind::memset) {
      ++memsets;
      EXPECT_EQ(r.bytes, kElements * sizeof(float));
    }
  }
  EXPECT_EQ(memsets, 1);
  const ActivitySummary summary = summarize_activity(eager);
  EXPECT_GT(summary.busy_ns, 0u);
  EXPECT_LE(summary.busy_ns, summary.span_ns);
  EXPECT_EQ(summary.invalid, 0u);

  // The same work as a graph, captured after the timer attached, replayed three times in one window.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue(stream, buffer.get());
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  constexpr int kReplays = 3;
  timer.begin(true);
  for (int r = 0; r < kReplays; ++r) SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  const std::vector<ActivityRecord> replayed = timer.end();
  EXPECT_EQ(count_ours(replayed, true), kReplays * kKernels);
  EXPECT_EQ(count_ours(replayed, false), 0);
  // The memset node shows up as a memset or as a driver kernel: either way one record per replay.
  EXPECT_GE(replayed.size(), static_cast<size_t>(kReplays * (kKernels + 1)));

  // Without keep_names the records carry no names (the floor passes do not pay for them).
  timer.begin(false);
  SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  const std::vector<ActivityRecord> unnamed = timer.end();
  EXPECT_GE(unnamed.size(), static_cast<size_t>(kKernels + 1));
  for (const ActivityRecord& r : unnamed) EXPECT_TRUE(r.name.empty());
  EXPECT_EQ(timer.dropped_records(), 0u);
  EXPECT_NE(KernelTimer::version().find("CUPTI"), std::string::npos);

  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
}  // namespace sg::bench
