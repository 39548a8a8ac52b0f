#pragma once
// The shapes the GPU kernels are built for, written once: each kernel's plan-time check calls these, and so
// does `stepgraph validate` (config/validate_shapes*.cpp, rule 16), so a config the kernels would refuse is
// refused before any GPU work, for the same reason. Host-only (no CUDA headers): CPU tests and the config
// layer use them without a device.
//
// Each *_problem function returns what is wrong in the kernel's terms ("" when the shape is supported); the
// kernel prefixes its own name, validation adds the config keys and the fix.
#include <cstdint>
#include <string>

namespace sg::kernels {

// ---- cuDNN fused attention (kernels/attention.cpp) ----
// Q/K/V/O move in 16-byte vectors (8 bf16), so head_dim and every head offset in the fused QKV row are
// 16-byte multiples; cuDNN's sm_90 flash attention supports d <= 256.
inline constexpr int64_t kAttentionHeadDimMultiple = 8;
inline constexpr int64_t kAttentionMaxHeadDim = 256;
// cuDNN's attention backward refuses s_q = s_kv = 1.
inline constexpr int64_t kAttentionMinSeqLen = 2;
std::string attention_head_dim_problem(int64_t head_dim);
std::string attention_seq_len_problem(int64_t seq_len);

// ---- LM head (kernels/lm_head.cu) ----
// cuBLASLt reads the hidden states and the output weight as rows of 16 bytes (8 bf16).
inline constexpr int64_t kLmHeadHiddenMultiple = 8;
std::string lm_head_hidden_problem(int64_t hidden_size);

// ---- RMSNorm backward (kernels/rmsnorm_backward.cuh) ----
// A row belongs to one group of at most kRmsNormBackwardMaxThreads threads, each holding up to
// kRmsNormBackwardMaxVecChunks 16-byte vectors of it (the vector path: H % 8 == 0 and 16-byte aligned
// pointers) or kRmsNormBackwardMaxScalarChunks single bf16 (the scalar path) in registers. The forward has no
// width limit (wide rows take its block-per-row kernel).
inline constexpr int kRmsNormBackwardMaxThreads = 512;
inline constexpr int kRmsNormBackwardMaxVecChunks = 4;
inline constexpr int kRmsNormBackwardMaxScalarChunks = 16;
inline constexpr int kRmsNormVectorWidth = 8;  // bf16 per 16-byte vector
// The widest row: 16384 columns on the vector path, 8192 on the scalar one.
constexpr int64_t rmsnorm_backward_max_width(bool vector_path) {
  return int64_t{kRmsNormBackwardMaxThreads} *
         (vector_path ? kRmsNormBackwardMaxVecChunks * kRmsNormVectorWidth : kRmsNormBackwardMaxScalarChunks);
}
std::string rmsnorm_backward_width_problem(int64_t H, bool vector_path);

// ---- Mamba2 (kernels/ssd_scan_host.cuh, causal_conv1d.h) ----
// The SSD scan's kernels are instantiated for headdim 64 and dstate 16, 32, 64 or 128, over chunks of
// kSsdChunk tokens; the causal conv1d kernel for a width of kCausalConv1dWidth taps.
inline constexpr int64_t kSsdHeadDim = 64;
inline constexpr int kSsdChunk = 128;
inline constexpr int64_t kCausalConv1dWidth = 4;
bool ssd_state_dim_supported(int64_t dstate);
std::string ssd_head_dim_problem(int64_t headdim);
std::string ssd_state_dim_problem(int64_t dstate);
// Index and grid bounds of the scan (batch, heads < 2^16: grid dimensions; seqlen < 2^30; element offsets
// < 2^40).
struct SsdSizeLimitsInput {
  int64_t batch = 0, seqlen = 0, nheads = 0, headdim = 0;
};
std::string ssd_size_problem(const SsdSizeLimitsInput& s);

// ---- Gated RMSNorm of the Mamba2 mixer (kernels/gated_rmsnorm.cuh) ----
// The backward block of a group sums the group's dweight in dynamic shared memory, after block_reduce_sum's
// 32 floats: 4 (32 + gs) bytes for gs = d_inner / mamba_num_groups columns. Past 48 KiB the launcher opts in,
// up to sm_90's limit per block (cudaDevAttrMaxSharedMemoryPerBlockOptin on H100 and H200: 227 KiB), so gs is
// at most 58080.
inline constexpr int64_t kMaxOptInSharedBytesPerBlock = 232448;
inline constexpr int kGatedRmsNormReduceFloats = 32;
constexpr int64_t gated_rmsnorm_backward_smem_bytes(int64_t group_width) {
  return static_cast<int64_t>(sizeof(float)) * (kGatedRmsNormReduceFloats + group_width);
}
inline constexpr int64_t kGatedRmsNormMaxGroupWidth =
    kMaxOptInSharedBytesPerBlock / static_cast<int64_t>(sizeof(float)) - kGatedRmsNormReduceFloats;
std::string gated_rmsnorm_group_width_problem(int64_t group_width);

// ---- MoE (kernels/grouped_gemm.cpp, moe_router.cu) ----
// A feature dimension (N or K) of the experts' CUTLASS grouped GEMMs: TMA loads need 16-byte aligned rows
// and segment starts, so a multiple of 8 bf16, at least 8 and below 2^31.
inline constexpr int64_t kGroupedGemmDimMultiple = 8;
std::string grouped_gemm_dim_problem(int64_t size);
// Load-balancing groups of the router's loss kernels (grid dimension y): at most 65535.
inline constexpr int64_t kMoeMaxLossGroups = 65535;
std::string moe_loss_groups_problem(int64_t groups);

// ---- Batched column sums (kernels/partial_sums.cuh) ----
// add_partial_column_sums_batched reduces `count` partial matrices, one per grid row (grid dimension y): at
// most 65535. The training step reduces every RMSNorm's weight gradient in one such launch: each layer's
// pre-norm and the final norm, num_layers + 1 of them (model/train_step_run.cpp).
inline constexpr int64_t kMaxBatchedColumnSums = 65535;

}  // namespace sg::kernels
