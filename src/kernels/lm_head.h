#pragma once
// The LM head fused with the cross-entropy loss, chunked over rows so the logits of all T tokens are
// never in memory at once. For each chunk c of rows (one stream, in order):
//   logits_c  = h_c W^T                 GEMM, bf16 out  -> workspace [chunk_rows, Vp]
//   cross_entropy(logits_c)             dlogits_c (bf16) -> workspace [chunk_rows, Vp]; row_loss_c
//   dh_c      = dlogits_c W             GEMM, bf16 out, OVERWRITES dhidden rows of the chunk
//   dW       += dlogits_c^T h_c         GEMM, main_grad (fp32 or bf16), beta = 1 (beta 0 for the first chunk when
//                                       LmHeadBuffers::overwrite_dweight: the step's first write of dW)
// plus loss_token_count before the chunks and cross_entropy_loss_reduce after them (kernels/cross_entropy.h),
// which ADDS loss_scale * mean-over-masked-tokens into the device loss accumulator.
// The logits are bf16, as Megatron's output layer (and HF transformers) produce them; the cross-entropy
// computes in fp32 from them. Half the bytes of fp32 logits for the GEMM to write and the loss to read.
//
// Plan time (once): lm_head_layout() sizes the workspace (pure CPU, so the model can plan its arena
// first); LmHeadPlan then plans the cuBLASLt GEMMs (full chunk and, if T is not a multiple of the
// chunk, the tail chunk). Step time: LmHeadPlan::execute only launches (capturable).
// Vp = V rounded up to a multiple of 8, so every workspace row starts 16-byte aligned for cuBLASLt;
// the padding columns are never read or written.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/gemm.h"

namespace sg::kernels {

struct LmHeadShape {
  int64_t T = 0;  // tokens of one microbatch (micro_batch_size * seq_length)
  int64_t H = 0;  // hidden size, a multiple of 8
  int64_t V = 0;  // vocabulary size (any)
};

// Workspace carve-up. All offsets are from the workspace base (256-byte aligned) and 256-byte aligned.
struct LmHeadLayout {
  int64_t chunk_rows = 0;     // rows per chunk (the last chunk may be shorter)
  int64_t num_chunks = 0;
  int64_t padded_vocab = 0;   // Vp: row stride of the logits/dlogits workspaces
  size_t logits_offset = 0;   // bf16 [chunk_rows, Vp]
  size_t dlogits_offset = 0;  // bf16 [chunk_rows, Vp]
  size_t row_loss_offset = 0;     // fp32 [T]
  size_t token_count_offset = 0;  // fp32 [1]
  size_t workspace_bytes = 0;     // what the model reserves (workspaces category, 256-byte aligned)
};

// Default cap on the chunk's logits + dlogits (4 bytes per element): 512 MiB, e.g. 1024 rows of a
// 128256-token vocabulary, 4096 rows of a 32768 one.
inline constexpr size_t kLmHeadDefaultChunkBudgetBytes = size_t{512} << 20;

// The budget the model plans with (TrainStepOptions' default): kLmHeadDefaultChunkBudgetBytes, unless the
// environment variable STEPGRAPH_LM_HEAD_CHUNK_MIB holds a whole number of MiB from 1 to 65536, for measuring
// other budgets (docs/performance.md, twenty-fourth session). Any other value is an error naming the variable.
inline constexpr const char* kLmHeadChunkBudgetVariable = "STEPGRAPH_LM_HEAD_CHUNK_MIB";
size_t lm_head_chunk_budget_bytes();

// chunk_rows = min(T, floor(chunk_budget_bytes / (4 Vp))) rounded down to a multiple of 64 when >= 64
// (GEMM-friendly); at least 1. Throws sg::Error for a bad shape (H not a multiple of 8, T/H/V <= 0).
LmHeadLayout lm_head_layout(const LmHeadShape& shape, size_t chunk_budget_bytes = kLmHeadDefaultChunkBudgetBytes);

struct LmHeadBuffers {
  const bf16* hidden = nullptr;      // [T, H] final-norm output
  const bf16* weight = nullptr;      // [V, H] LM head (or the tied embedding)
  const int32_t* targets = nullptr;  // [T], in [0, V) where loss_mask != 0
  const float* loss_mask = nullptr;  // [T]
  bf16* dhidden = nullptr;           // [T, H] OVERWRITTEN
  FloatBuffer dweight{};             // [V, H] main_grad (the plan's dtype), ADDED into (see overwrite_dweight)
  bool overwrite_dweight = false;    // the first chunk OVERWRITES dweight (not read): the step's first
                                     // writer of this gradient (model/gradient_zeroing.h)
  float* loss_accumulator = nullptr; // device scalar, += loss_scale * sum(mask*ce) / max(sum(mask), 1)
  double* loss_sums = nullptr;       // instead of loss_accumulator, execute_loss only (evaluation): device [2],
                                     // += {sum(mask*ce), sum(mask)} (kernels/cross_entropy.h)
  void* workspace = nullptr;         // layout().workspace_bytes, 256-byte aligned, not shared with
                                     // anything live across the LM head
};

class LmHeadPlan {
 public:
  // Plans the GEMMs in `blas` (which must outlive this plan; execute() must use blas's stream).
  // loss_scale = 1 / num_microbatches; grad_dtype: the main_grad's (LmHeadBuffers::dweight).
  LmHeadPlan(Blas& blas, const LmHeadShape& shape, float loss_scale,
             size_t chunk_budget_bytes = kLmHeadDefaultChunkBudgetBytes, FloatDtype grad_dtype = FloatDtype::fp32);

  const LmHeadShape& shape() const { return shape_; }
  const LmHeadLayout& layout() const { return layout_; }

  // Only launches (token count, per chunk: 3 GEMMs + cross-entropy, loss reduction). Checks pointers
  // on the host (non-null, 16-byte alignment) and throws sg::Error naming the buffer.
  void execute(cudaStream_t stream, const LmHeadBuffers& buffers) const;
  // Forward only (evaluation): per chunk the logits GEMM and the cross-entropy, then the loss reduction —
  // the same loss execute() adds, bit for bit, with neither backward GEMM (or, with loss_sums, its token sum and
  // count). dhidden and dweight are not
  // used (may be null); the cross-entropy still writes dlogits into the workspace, which nothing reads.
  void execute_loss(cudaStream_t stream, const LmHeadBuffers& buffers) const;

 private:
  void run(cudaStream_t stream, const LmHeadBuffers& buffers, bool backward) const;
  struct ChunkGemms {
    const GemmPlan* logits = nullptr;   // logits_c = h_c W^T
    const GemmPlan* dhidden = nullptr;  // dh_c = dlogits_c W
    const GemmPlan* dweight = nullptr;  // dW += dlogits_c^T h_c
  };
  ChunkGemms plan_chunk(Blas& blas, int64_t rows) const;

  LmHeadShape shape_;
  LmHeadLayout layout_;
  float loss_scale_;
  FloatDtype grad_dtype_;
  ChunkGemms full_;
  ChunkGemms tail_;  // set when T % chunk_rows != 0
  int64_t tail_rows_ = 0;
};

}  // namespace sg::kernels
