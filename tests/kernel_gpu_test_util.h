#pragma once
// Helpers for kernel GPU tests: strided views of token rows (the Mamba2 mixer's in_proj output row
// [z | xBC | dt] and its gradient) in and out of host row buffers, gradient rows poisoned inside the view
// with a sentinel outside it, bitwise comparison, and the rerun / CUDA-graph replay determinism check.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.h"

namespace sg::test {

inline void sync_device() { SG_CUDA_CHECK(cudaDeviceSynchronize()); }

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Columns [offset, offset + width) of every row of a [rows, stride] buffer, as a dense [rows, width].
template <class T>
std::vector<T> view_columns(const std::vector<T>& buf, int64_t rows, int64_t stride, int64_t offset, int64_t width) {
  std::vector<T> out(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) out[r * width + c] = buf[r * stride + offset + c];
  return out;
}

// A [rows, stride] bf16 buffer holding `sentinel` outside the view and NaN inside it, so a kernel that
// forgets an element of its view, or writes outside it, fails.
inline std::vector<bf16> poisoned_view_rows(int64_t rows, int64_t stride, int64_t offset, int64_t width,
                                            float sentinel) {
  std::vector<float> host(static_cast<size_t>(rows * stride), sentinel);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = offset; c < offset + width; ++c) host[r * stride + c] = NAN;
  return to_bf16(host);
}

// Elements outside the view that no longer hold `sentinel`.
inline int64_t count_changed_outside_view(const std::vector<bf16>& buf, int64_t rows, int64_t stride, int64_t offset,
                                          int64_t width, float sentinel) {
  const std::vector<float> host = to_float(buf);
  int64_t changed = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < stride; ++c)
      if ((c < offset || c >= offset + width) && host[r * stride + c] != sentinel) ++changed;
  return changed;
}

// Captures `enqueue(stream)` into a CUDA graph, replays it once and waits: the launches must be capturable
// (no allocation, no host synchronisation) and the replay computes what an eager launch would.
inline void replay_as_graph(cudaStream_t stream, const std::function<void(cudaStream_t)>& enqueue) {
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue(stream);
  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

// Named raw bytes of downloaded buffers: what a determinism check compares.
using Snapshot = std::vector<std::pair<std::string, std::vector<unsigned char>>>;
template <class T>
std::pair<std::string, std::vector<unsigned char>> named_bytes(const std::string& name, const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  return {name, std::vector<unsigned char>(p, p + v.size() * sizeof(T))};
}

// `first` is snapshot() after a first prepare() + enqueue(stream). Runs prepare() + enqueue eagerly again,
// then prepare() + a CUDA-graph replay of enqueue, and expects every buffer to equal `first` bit for bit.
inline void expect_bitwise_repeatable(cudaStream_t stream, const std::function<void()>& prepare,
                                      const std::function<void(cudaStream_t)>& enqueue,
                                      const std::function<Snapshot()>& snapshot, const Snapshot& first) {
  prepare();
  enqueue(stream);
  sync_device();
  const Snapshot rerun = snapshot();
  prepare();
  replay_as_graph(stream, enqueue);
  const Snapshot replay = snapshot();
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_TRUE(rerun[i].second == first[i].second) << first[i].first << " differs on an eager rerun";
    EXPECT_TRUE(replay[i].second == first[i].second) << first[i].first << " differs in a CUDA-graph replay";
  }
}

}  // namespace sg::test
