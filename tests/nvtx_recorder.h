#pragma once
// Records this process's NVTX ranges (nvtxRangePushA / nvtxRangePop) for tests, through NVTX's static
// injection hook (nvtx_recorder.cpp): no profiler needed. Linked into the GPU test executable only.
#include <string>
#include <vector>

namespace sg::test {

struct NvtxRangeEvent {
  std::string name;
  int depth = 0;  // 0: outermost range open while recording
};

// NVTX initialises on the process's first NVTX call: after one, false means another NVTX tool (a
// profiler via NVTX_INJECTION64_PATH) was attached instead.
bool nvtx_recorder_attached();

// Pushes seen between start and stop, in order, with their nesting depth relative to the start.
void nvtx_recording_start();
std::vector<NvtxRangeEvent> nvtx_recording_stop();

}  // namespace sg::test
