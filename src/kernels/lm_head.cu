#include "kernels/lm_head.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/cross_entropy.h"
#include "kernels/shape_limits.h"

namespace sg::kernels {
namespace {

constexpr size_t kWorkspaceAlignment = 256;

size_t align_up(size_t bytes) { return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment; }

bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

size_t lm_head_chunk_budget_bytes() {
  const char* value = std::getenv(kLmHeadChunkBudgetVariable);
  if (value == nullptr) return kLmHeadDefaultChunkBudgetBytes;
  const std::string text(value);
  int64_t mib = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mib);
  SG_CHECK(ec == std::errc() && end == text.data() + text.size() && mib >= 1 && mib <= 65536,
           strprintf("%s='%s': must be a whole number of MiB from 1 to 65536 (the LM head's logits + dlogits per "
                     "chunk), or unset for the default %zu",
                     kLmHeadChunkBudgetVariable, value, kLmHeadDefaultChunkBudgetBytes >> 20));
  return static_cast<size_t>(mib) << 20;
}

LmHeadLayout lm_head_layout(const LmHeadShape& s, size_t chunk_budget_bytes) {
  SG_CHECK(s.T > 0 && s.H > 0 && s.V > 0,
           strprintf("lm_head: T=%lld, H=%lld and V=%lld must be positive", (long long)s.T, (long long)s.H,
                     (long long)s.V));
  const std::string hidden_problem = lm_head_hidden_problem(s.H);  // kernels/shape_limits.h, validated too
  SG_CHECK(hidden_problem.empty(), "lm_head: " + hidden_problem + "; choose a hidden_size divisible by 8");
  LmHeadLayout L;
  L.padded_vocab = (s.V + 7) / 8 * 8;
  const size_t row_bytes = static_cast<size_t>(L.padded_vocab) * (sizeof(bf16) + sizeof(bf16));
  int64_t rows = static_cast<int64_t>(chunk_budget_bytes / row_bytes);
  SG_CHECK(rows >= 1, strprintf("lm_head: the chunk budget %s is smaller than one row of logits+dlogits (%s for "
                                "V=%lld); raise it",
                                human_bytes(chunk_budget_bytes).c_str(), human_bytes(row_bytes).c_str(),
                                (long long)s.V));
  if (rows >= s.T) {
    rows = s.T;
  } else if (rows >= 64) {
    rows = rows / 64 * 64;
  }
  L.chunk_rows = rows;
  L.num_chunks = (s.T + rows - 1) / rows;
  L.logits_offset = 0;
  L.dlogits_offset = align_up(static_cast<size_t>(rows) * L.padded_vocab * sizeof(bf16));
  L.row_loss_offset = align_up(L.dlogits_offset + static_cast<size_t>(rows) * L.padded_vocab * sizeof(bf16));
  L.token_count_offset = align_up(L.row_loss_offset + static_cast<size_t>(s.T) * sizeof(float));
  L.workspace_bytes = align_up(L.token_count_offset + sizeof(float));
  return L;
}

LmHeadPlan::LmHeadPlan(Blas& blas, const LmHeadShape& shape, float loss_scale, size_t chunk_budget_bytes,
                       FloatDtype grad_dtype)
    : shape_(shape), layout_(lm_head_layout(shape, chunk_budget_bytes)), loss_scale_(loss_scale), grad_dtype_(grad_dtype) {
  full_ = plan_chunk(blas, layout_.chunk_rows);
  tail_rows_ = shape_.T % layout_.chunk_rows;
  if (tail_rows_ != 0) tail_ = plan_chunk(blas, tail_rows_);
}

// Row-major operands seen column-major by cuBLASLt (see kernels/gemm.h): h_c [R,H] is col-major [H,R]
// ld H; W [V,H] is col-major [H,V] ld H; logits/dlogits [R,V] (row stride Vp) are col-major [V,R] ld Vp.
LmHeadPlan::ChunkGemms LmHeadPlan::plan_chunk(Blas& blas, int64_t rows) const {
  const int64_t H = shape_.H, V = shape_.V, Vp = layout_.padded_vocab;
  ChunkGemms g;
  {  // logits^T [V,R] = (W col-major [H,V])^T * h_c col-major [H,R]: m=V, n=R, k=H, bf16 out.
    GemmDesc d;
    d.transpose_a = true;
    d.transpose_b = false;
    d.m = V, d.n = rows, d.k = H;
    d.lda = H, d.ldb = H, d.ldd = Vp;
    d.d_type = GemmDtype::kBF16;
    d.beta = 0.0f;
    g.logits = &blas.plan(d);
  }
  {  // dh_c^T [H,R] = W col-major [H,V] * dlogits col-major [V,R]: m=H, n=R, k=V, bf16 out (overwrite).
    GemmDesc d;
    d.transpose_a = false;
    d.transpose_b = false;
    d.m = H, d.n = rows, d.k = V;
    d.lda = H, d.ldb = Vp, d.ldd = H;
    d.d_type = GemmDtype::kBF16;
    d.beta = 0.0f;
    g.dhidden = &blas.plan(d);
  }
  {  // dW^T [H,V] += h_c col-major [H,R] * (dlogits col-major [V,R])^T: m=H, n=V, k=R, main_grad, beta 1.
    GemmDesc d;
    d.transpose_a = false;
    d.transpose_b = true;
    d.m = H, d.n = V, d.k = rows;
    d.lda = H, d.ldb = Vp, d.ldd = H;
    d.d_type = grad_dtype_ == FloatDtype::bf16 ? GemmDtype::kBF16 : GemmDtype::kFP32;
    d.beta = 1.0f;
    g.dweight = &blas.plan(d);
  }
  return g;
}

void LmHeadPlan::execute(cudaStream_t stream, const LmHeadBuffers& b) const {
  SG_CHECK(b.dhidden && b.dweight.data && b.loss_accumulator,
           "lm_head execute: dhidden, dweight and loss_accumulator must be device pointers");
  SG_CHECK(b.dweight.dtype == grad_dtype_, strprintf("lm_head execute: planned for %s gradients, given a %s dweight",
                                                     float_dtype_name(grad_dtype_), float_dtype_name(b.dweight.dtype)));
  run(stream, b, /*backward=*/true);
}

void LmHeadPlan::execute_loss(cudaStream_t stream, const LmHeadBuffers& b) const { run(stream, b, /*backward=*/false); }

void LmHeadPlan::run(cudaStream_t stream, const LmHeadBuffers& b, bool backward) const {
  SG_CHECK(b.hidden && b.weight && b.targets && b.loss_mask && b.workspace &&
               (b.loss_accumulator == nullptr) != (b.loss_sums == nullptr),
           "lm_head: hidden, weight, targets, loss_mask, workspace and exactly one of loss_accumulator and loss_sums "
           "must be device pointers");
  SG_CHECK(aligned_to(b.workspace, kWorkspaceAlignment),
           strprintf("lm_head: workspace %p must be 256-byte aligned", b.workspace));
  const int64_t T = shape_.T, H = shape_.H, V = shape_.V;
  char* ws = static_cast<char*>(b.workspace);
  bf16* logits = reinterpret_cast<bf16*>(ws + layout_.logits_offset);
  bf16* dlogits = reinterpret_cast<bf16*>(ws + layout_.dlogits_offset);
  float* row_loss = reinterpret_cast<float*>(ws + layout_.row_loss_offset);
  float* token_count = reinterpret_cast<float*>(ws + layout_.token_count_offset);

  loss_token_count(stream, {.loss_mask = b.loss_mask, .T = T, .token_count = token_count});
  for (int64_t r0 = 0; r0 < T; r0 += layout_.chunk_rows) {
    const int64_t rows = std::min(layout_.chunk_rows, T - r0);
    const ChunkGemms& g = rows == layout_.chunk_rows ? full_ : tail_;
    const bf16* h_c = b.hidden + r0 * H;
    g.logits->run(stream, b.weight, h_c, logits);

    cross_entropy_forward_backward(stream, {.logits = logits,
                                            .logits_dtype = LogitsDtype::bf16,
                                            .targets = b.targets + r0,
                                            .loss_mask = b.loss_mask + r0,
                                            .dlogits = dlogits,
                                            .row_loss = row_loss + r0,
                                            .rows = rows,
                                            .V = V,
                                            .logits_stride = layout_.padded_vocab,
                                            .dlogits_stride = layout_.padded_vocab,
                                            .token_count = token_count,
                                            .loss_scale = loss_scale_});

    if (!backward) continue;
    g.dhidden->run(stream, b.weight, dlogits, b.dhidden + r0 * H);
    if (b.overwrite_dweight && r0 == 0) {
      g.dweight->run_overwriting(stream, h_c, dlogits, b.dweight.data);
    } else {
      g.dweight->run(stream, h_c, dlogits, b.dweight.data);
    }
  }
  cross_entropy_loss_reduce(stream, {.row_loss = row_loss,
                                     .T = T,
                                     .token_count = token_count,
                                     .loss_scale = loss_scale_,
                                     .loss_accumulator = b.loss_accumulator,
                                     .loss_sums = b.loss_sums});
}

}  // namespace sg::kernels
