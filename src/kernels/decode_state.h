#pragma once
// The device-side bookkeeping of one generation step (CPU twin: reference/decode_state.h): records the
// sampled tokens in the history, moves every sequence's position on by one and advances the step
// counter (the sampling draws' Philox offset). One block, so every thread reads the step before it
// changes. Graph-safe.
#include <cuda_runtime.h>

#include <cstdint>

namespace sg::kernels {

struct DecodeAdvanceParams {
  int32_t* history = nullptr;       // [B, history_stride]
  int64_t history_stride = 0;       // tokens per sequence the history holds
  const int32_t* tokens = nullptr;  // [B] this step's tokens
  int32_t* positions = nullptr;     // [B]
  int64_t* step = nullptr;          // device scalar
  int64_t B = 0;
};
void decode_advance(cudaStream_t stream, const DecodeAdvanceParams& p);

}  // namespace sg::kernels
