#pragma once
// The linear layer of a decoding step, y = epilogue(x W^T) for a few rows (1 to kDecodeLinearMaxRows), as a
// matrix-vector kernel: the step's GEMMs read every weight once for one to eight rows, so they are bound by
// memory, and cuBLASLt's kernels for these shapes (tiles made for many rows, split-K with a separate reduce)
// reached 1.45-2.8 TB/s of the H100's 3.35 (docs/performance.md, thirty-fifth session). The epilogues take the
// launches that followed the GEMM: the MLP's activation, and for the attention's QKV projection RoPE and the
// KV-cache append.
//
// CPU twin: reference/linear.h's linear_forward then (with a bias) reference/linear.h's add_row_bias(y, bias, T, N),
// each value rounded to bf16 (the kernel's output without an epilogue), then reference/swiglu.h or
// reference/squared_relu.h on those bf16 values, rounded again. With s = x W^T + bias (fp32; bias[n] on W row n's
// column, or nothing without a bias):
//   kNone         y[T, N]     = bf16(s)
//   kSwiglu       y[T, N / 2] = bf16(silu(g) u), g = bf16(s[:, j]), u = bf16(s[:, N/2 + j])
//                                (W's rows are [gate N/2 | up N/2], as the MLP's fc1: model/mlp_activation.h)
//   kSquaredRelu  y[T, N]     = bf16(relu(v)^2), v = bf16(s)
//   kQkv          y[T, N]     = the attention's fused QKV rows, bf16(s), its q and k heads rotated at
//                                positions[t] (kernels/rope.h's math) where `qkv.rope` says so, and each row's k
//                                and v heads also written to the KV cache (kernels/decode_attention.h's
//                                kv_cache_append; a position outside the cache writes nothing there)
// So an epilogue gives exactly what kNone followed by the activation kernel gives, or for kQkv by rope_forward and
// kv_cache_append (the tests compare bits); with a bias, what cuBLASLt's bias epilogue (kernels/gemm.h's
// LinearForward with_bias) followed by those kernels gives, up to the GEMM's summation order. Without a bias the sums
// are rounded as they are (no + 0.0f, which would turn -0.0 into +0.0).
//
// Every sum runs in an order fixed by K (and by the choice of math, `tensor_cores`) alone (kernels/decode_linear.cuh):
// a row's outputs do not depend on the other rows of the call or on how many there are, and a captured step computes
// what an eager one does.
// fp32 accumulation from bf16 inputs, no atomics. Graph-safe: no allocation, no sync.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/decode_attention.h"
#include "kernels/rope.h"
#include "reference/decode_attention.h"
#include "reference/rope_frequencies.h"

namespace sg::kernels {

inline constexpr int64_t kDecodeLinearMaxRows = 8;

enum class DecodeLinearEpilogue { kNone, kSwiglu, kSquaredRelu, kQkv };

// kQkv's cache, positions and rotation: the fields of kernels::KvCacheAppendParams and kernels::RopeParams.
struct DecodeQkvEpilogue {
  bf16* k_cache = nullptr;             // [slots, kv_heads, capacity, head_dim]
  bf16* v_cache = nullptr;             // same
  const int32_t* positions = nullptr;  // device [T]
  ref::DecodeAttentionShape shape{};   // its T is the call's; N = shape.qkv_width()
  bool rope = false;                   // rotate the q and k heads (head_dim even)
  double base = 10000.0;
  ref::RopeScaling scaling{};
  int64_t rotary_dim = 0;  // dimensions rotated at the start of each head (RopeParams::rotary_dim); 0: all
};

struct DecodeLinearParams {
  bf16* y = nullptr;           // [T, decode_linear_out_width(epilogue, N)]
  const bf16* x = nullptr;     // [T, K], 16-byte aligned
  const bf16* w = nullptr;     // [N, K], 16-byte aligned
  const bf16* bias = nullptr;  // [N] or null: added to x W^T (per W row, fp32) before any rounding or epilogue
  int64_t T = 0;               // rows: 0 (nothing to do) to kDecodeLinearMaxRows
  int64_t K = 0;               // a multiple of 8 (16-byte rows)
  int64_t N = 0;               // rows of W; even with kSwiglu
  DecodeLinearEpilogue epilogue = DecodeLinearEpilogue::kNone;
  DecodeQkvEpilogue qkv{};  // kQkv only
  // The math: fp32 multiply-adds (false: what the decoder runs), or bf16 tensor cores (mma.sync m16n8k16, the rows
  // of x as its n = 8 columns; fp32 accumulation in the tensor core's order) for the many-row steps where the
  // multiply-adds keep the SMs issuing. An experiment that bench/decode_linear_bench.cu times against the other;
  // the same epilogues, the same guarantees (bitwise fused = unfused, each row = the row alone).
  bool tensor_cores = false;
};

int64_t decode_linear_out_width(DecodeLinearEpilogue epilogue, int64_t N);

// Whether decode_linear_forward takes T rows of this shape (its pointers must also be 16-byte aligned, which
// the arena's allocations are). Callers with more rows run cuBLASLt (model/decode_linear.h).
bool decode_linear_takes(int64_t T, int64_t K, int64_t N, DecodeLinearEpilogue epilogue);

void decode_linear_forward(cudaStream_t stream, const DecodeLinearParams& p);

// kQkv's unfused equivalent on QKV rows `qkv` [T, N] that a kNone call (or cuBLASLt) wrote: rope_forward with the
// first (where e.rope), then kv_cache_append with the second. A prompt's rows take that path
// (model/layers/attention_layer_decode.cpp); the tests compare it with the fused call.
RopeParams decode_qkv_rope_params(bf16* qkv, const DecodeQkvEpilogue& e);
KvCacheAppendParams decode_qkv_append_params(const bf16* qkv, const DecodeQkvEpilogue& e);

}  // namespace sg::kernels
