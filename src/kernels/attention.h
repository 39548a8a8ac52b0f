#pragma once
// Causal grouped-query attention through cuDNN's fused scaled-dot-product attention (flash attention
// forward and backward), driven by the cudnn-frontend graph API. CPU twin: reference/attention.h (same
// layouts and math; dropout masks differ, see there).
//
// Plan time: an `AttentionPlan` per shape builds the forward and backward operation graphs, checks that
// the cuDNN runtime supports them (throwing sg::Error that says what is unsupported and why), builds the
// execution plans and queries their workspace sizes, which the model reserves in its arena.
// Step time: forward()/backward() only bind the stream to the cuDNN handle and execute the prebuilt
// graph with the variant pack (device pointers): no allocation, no sync, no host reads; capturable.
//
// Layout (no transposes, strides only): qkv [T, qkv_width] row-major, qkv_width = (heads+2*kv_heads)*d,
// T = B*S. Q is viewed as [B, heads, S, d] with strides [S*qkv_width, d, qkv_width, 1] at qkv; K and V as
// [B, kv_heads, S, d] with the same strides at qkv + heads*d and qkv + (heads+kv_heads)*d. O and dO are
// [T, heads*d] = [B, heads, S, d] with strides [S*heads*d, d, heads*d, 1]. dQKV has qkv's layout.
// lse [B, heads, S] fp32 = cuDNN's softmax Stats (natural-log logsumexp of the scaled scores), written
// by forward() and read by backward().
// Numerics: bf16 in/out, fp32 accumulate and softmax, scale 1/sqrt(d), causal (top-left aligned:
// query i sees keys j <= i). Backward uses cuDNN's DETERMINISTIC algorithm (no dQ atomics with varying
// order), so two runs are bitwise equal.
// Workspace: one device region of workspace_bytes() (16-byte aligned; 256 recommended) serves forward
// and backward and every layer of the same shape (one AttentionPlan per shape is enough: pointers are
// per call). The deterministic backward on sm_90 with cuDNN < 9.25 materialises dP in it:
// about B*heads*ceil64(S)*ceil64(S)*2 bytes (llama/1b: B=4, heads=16, S=2048 -> 512 MiB), plus small
// fp32 buffers; query the plan, do not guess.
// Dropout on the attention probabilities (dropout_p > 0, a plan-time constant): cuDNN's own Philox
// dropout, seed and offset read from DEVICE int64 scalars at execution (graph-safe: a replayed graph
// reads the current values). The mask depends only on (seed, offset, position), so backward
// regenerates the forward's mask when given the same seed/offset.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cuda/bf16.h"

namespace sg::kernels {

// Owns one cudnnHandle_t. Create once (plan time); it outlives the AttentionPlans that use it. The
// handle is bound to the stream of each execute call; use a context from one host thread at a time.
class CudnnContext {
 public:
  CudnnContext();
  ~CudnnContext();
  CudnnContext(const CudnnContext&) = delete;
  CudnnContext& operator=(const CudnnContext&) = delete;
  void* handle() const { return handle_; }  // cudnnHandle_t (kept opaque: no cudnn.h in this header)
  static size_t runtime_version();            // cudnnGetVersion(), e.g. 91400

 private:
  void* handle_ = nullptr;
};

struct AttentionShape {
  int64_t batch = 0;     // B sequences
  int64_t seq_len = 0;   // S tokens each
  int64_t heads = 0;     // query heads
  int64_t kv_heads = 0;  // key/value heads (num_query_groups); heads % kv_heads == 0
  int64_t head_dim = 0;  // d (cuDNN: multiple of 8, <= 256 for bf16 flash attention on sm_90)
  float dropout_p = 0.0f;  // attention-probability dropout, 0 <= p < 1

  int64_t tokens() const { return batch * seq_len; }
  int64_t qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
  int64_t out_width() const { return heads * head_dim; }
  std::string describe() const;
};

struct AttentionForwardParams {
  bf16* out = nullptr;              // [T, heads*d]
  float* lse = nullptr;             // [B, heads, S] fp32 softmax stats, for backward
  const bf16* qkv = nullptr;        // [T, qkv_width]
  const int64_t* dropout_seed = nullptr;    // device scalar; required iff dropout_p > 0
  const int64_t* dropout_offset = nullptr;  // device scalar; required iff dropout_p > 0
  void* workspace = nullptr;        // device, >= AttentionPlan::forward_workspace_bytes() (may be null if 0)
};

struct AttentionBackwardParams {
  bf16* dqkv = nullptr;             // [T, qkv_width], fully overwritten (dq, dk, dv parts)
  const bf16* dout = nullptr;       // [T, heads*d]
  const bf16* qkv = nullptr;        // [T, qkv_width], as given to forward
  const bf16* out = nullptr;        // [T, heads*d], as written by forward
  const float* lse = nullptr;       // [B, heads, S], as written by forward
  const int64_t* dropout_seed = nullptr;    // the forward's seed/offset; required iff dropout_p > 0
  const int64_t* dropout_offset = nullptr;
  void* workspace = nullptr;        // device, >= AttentionPlan::backward_workspace_bytes()
};

class AttentionPlan {
 public:
  // Plan time: builds, checks support of and plans both graphs. Throws sg::Error naming the shape and
  // what cuDNN does not support (or the cudnn-frontend error of the step being built).
  AttentionPlan(CudnnContext& cudnn, const AttentionShape& shape);
  ~AttentionPlan();
  AttentionPlan(const AttentionPlan&) = delete;
  AttentionPlan& operator=(const AttentionPlan&) = delete;

  const AttentionShape& shape() const { return shape_; }
  size_t forward_workspace_bytes() const;
  size_t backward_workspace_bytes() const;
  // Forward and backward never overlap on the step stream, so one region of this size serves both.
  size_t workspace_bytes() const;

  // Step time: bind the stream, execute the prebuilt graph. Throws sg::Error on a null/misaligned
  // pointer or a cuDNN execution error.
  void forward(cudaStream_t stream, const AttentionForwardParams& params) const;
  void backward(cudaStream_t stream, const AttentionBackwardParams& params) const;

 private:
  struct Graphs;  // cudnn-frontend graphs and tensor handles (attention.cpp)
  CudnnContext& cudnn_;
  AttentionShape shape_;
  std::unique_ptr<Graphs> graphs_;
};

}  // namespace sg::kernels
