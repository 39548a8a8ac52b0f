#pragma once
// 'E': the Mixture-of-Experts MLP (Megatron's MoELayer on one GPU, where every dispatcher is the same local
// permutation). On the normed input n [T, H]:
//   moe_router      logits = n Wg^T in fp32 (Megatron's moe_router_dtype fp32); top-k routing, probs;
//                   per-expert token counts; load-balancing / z-loss into the step's device scalars;
//                   the shared expert's FC1 + activation (when moe_shared_expert_intermediate_size is set)
//   moe_preprocess  offsets, the deterministic permutation (token drop by capacity), the permute of n
//   moe             per-expert FC1, the activation, FC2 as grouped GEMMs whose sizes stay on the device;
//                   combine weighted by the probs; + the shared expert's FC2
// The experts' activation is the model's MLP activation (model/mlp_activation.h): SwiGLU (FC1 writes
// gate | up, Mixtral) or squared ReLU (FC1 writes up alone, Nemotron-H).
// Backward mirrors it (moe: combine, FC2, activation, FC1; moe_preprocess: un-permute into d n; moe_router:
// router and loss gradients through the fp32 gating linear, the shared expert's FC1).
// At the step's end, before the optimizer update (step_end), the aux-loss-free expert bias moves by the
// step's token counts.
// Evaluation (LayerIO::dropout false) runs the same forward but adds no auxiliary loss and no count.
//
// Parameters, under the layer's prefix ("model.layers.b.block_sparse_moe.", "backbone.layers.i.mixer."):
//   gate.weight [E, H]; with the expert bias gate.e_score_correction_bias [E] (not decayed; no gradient;
//   changed only by step_end; with squared-ReLU experts always there, zero when the bias is off). The
//   experts in the names of the family that has them:
//   SwiGLU (Mixtral): experts.j.w1 / w3 [F, H] (one [E, 2F, H] block: expert j's gate then up rows),
//     experts.j.w2 [H, F] (one [E, H, F] block); a shared expert shared_expert.gate_proj / up_proj [S, H]
//     and shared_expert.down_proj [H, S]; with query and key norms or a shared-expert gate (Qwen3-MoE, Qwen2-MoE:
//     model/stack.h qwen_moe_names, the prefix "model.layers.b.mlp.") experts.j.gate_proj / up_proj and
//     experts.j.down_proj;
//   squared ReLU (Nemotron-H): experts.j.up_proj [F, H] (one [E, F, H] block), experts.j.down_proj [H, F];
//     a shared expert shared_experts.up_proj [S, H] and shared_experts.down_proj [H, S];
//   with add_bias_linear the experts' biases beside their weights, under the same names with .bias: one [E, 2F] block
//     (expert j's gate then up bias) or [E, F] for FC1, one [E, H] for FC2 (Megatron's expert biases: FC2's joins
//     the expert's output before the combine weights it; no transformers family has them; no shared expert then, as
//     Megatron's SharedExpertMLP refuses biases);
//   with moe_shared_expert_gate (Qwen2-MoE) shared_expert_gate.weight [1, H]: the shared expert's output is scaled
//     per token by sigmoid(n . w) (kernels/moe_shared_gate.h) and kept ungated for the backward.
// No dropout inside (the output dropout is the step's).
// Recompute (Megatron's names; model/layer.h): moe_act gives back the experts' activation output (rerun
// from the kept FC1 output); shared_experts the shared expert's FC1 and activation outputs (rerun from n); moe the
// whole layer's saved activations, routing and permutation included (the router, dispatch and experts
// rerun from n; only n is kept). Full recompute reruns everything and writes the output too. A rerun
// adds no auxiliary loss and no token count: those belong to the forward alone.
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/gemm.h"
#include "model/decode_layer.h"
#include "model/decode_linear.h"
#include "model/gpu_decode_layer.h"
#include "model/grouped_linear_bias.h"
#include "model/layer.h"
#include "model/mlp_activation.h"
#include "reference/moe_permute.h"
#include "reference/moe_router.h"

namespace sg::kernels {
class GroupedLinearForward;
}  // namespace sg::kernels

namespace sg::model {

// The plan-time shapes of one MoE layer for T tokens per microbatch (shared by the GPU layer and its twin).
struct MoeShapes {
  int64_t T = 0, H = 0, E = 0, k = 1;
  int64_t F = 0;             // moe_ffn_hidden_size
  int64_t S = 0;             // shared expert width (0: none)
  MlpActivation activation = MlpActivation::swiglu;  // the model's MLP activation
  int64_t rows = 0;          // rows of the permuted buffers (dispatch.permuted_rows())
  int64_t aux_groups = 1;    // load-balancing groups (seq_aux_loss: sequences)
  ref::MoeRouting routing;
  ref::MoeRouterLosses losses;
  ref::MoeDispatch dispatch;
  bool expert_bias = false;
  float bias_update_rate = 0.0f;
  bool shared_gate = false;  // moe_shared_expert_gate (with a shared expert only)

  bool any_loss() const { return losses.aux_coeff > 0.0f || losses.z_coeff > 0.0f; }
  int64_t fc1_width() const { return activation_input_width(activation, F); }         // FC1's output columns
  int64_t shared_fc1_width() const { return activation_input_width(activation, S); }  // the shared expert's
};
MoeShapes moe_shapes(const ModelSpec& model, int64_t T);
// The GEMMs of the layer that are not grouped (the training layer's and the decoding twin's): the fp32 gating
// linear logits[T, E] = n Wg^T, and the shared expert's down projection added into the routed output (beta 1).
kernels::GemmDesc moe_gate_forward_desc(const MoeShapes& s);
kernels::GemmDesc moe_shared_down_accumulate_desc(const MoeShapes& s);

// The declarations the GPU layer and its CPU twin share.
struct MoeDeclarations {
  ParamRef router, expert_bias, fc1, fc2, shared_fc1, shared_down;
  ParamRef fc1_bias, fc2_bias;         // add_bias_linear: [E, fc1 width], [E, H]
  ParamRef shared_gate;                // moe_shared_expert_gate: [1, H]
  void declare(LayerDeclarations& d);  // checks the MoE shapes (sg::Error naming the key)
};

class MoeLayer final : public Layer {
 public:
  explicit MoeLayer(LayerPlace place);
  ~MoeLayer() override;
  static LayerRecompute recompute_support() {
    return {{RecomputeModule::moe_act, RecomputeModule::moe, RecomputeModule::shared_experts}, true};
  }
  static LayerFlops flops_per_token(const ModelSpec& model);  // model/layer.h

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(LayerPlanContext& context) override;
  void plan_device(DevicePlanContext& context) override;
  void bind(LayerBindContext& context) override;
  // The shared expert's wgrad GEMMs; the router's and the experts' gradients are added (grouped GEMM).
  std::vector<ParamRef> first_written_grads() const override;
  void forward(graph::Module module, cudaStream_t stream, const LayerIO& io) override;
  void backward(graph::Module module, cudaStream_t stream, const LayerIO& io) override;
  void recompute(graph::Module module, cudaStream_t stream, const LayerIO& io) override;
  void step_begin(cudaStream_t stream) override;
  void step_end(cudaStream_t stream) override;

  const MoeShapes& shapes() const { return shapes_; }
  // Device [E] int32: the last step's kept tokens per expert, summed over its microbatches and over the data-parallel
  // ranks (logged).
  const int32_t* step_token_counts() const { return logged_counts_; }

 private:
  struct Plans;    // GEMM plans (moe_layer.cpp)
  struct Buffers;  // arena slots and pointers (moe_layer.cpp)
  // What Layer::recompute reruns, from the recompute settings (plan()).
  struct Reruns {
    bool router = false;   // routing and dispatch (moe, full)
    bool shared = false;   // the shared expert's FC1 + activation (shared_experts, moe, full)
    bool experts = false;  // FC1, activation, FC2 (moe, full)
    bool act = false;      // the activation alone (moe_act)
    bool output = false;   // combine + shared FC2 into the output (full)
  };
  // `step_state`: add the auxiliary losses and token counts (a training forward; not a rerun).
  void router_forward(cudaStream_t stream, const LayerIO& io, bool step_state);
  void shared_expert_forward(cudaStream_t stream, const LayerIO& io);
  void preprocess_forward(cudaStream_t stream, const LayerIO& io, bool step_state);
  void router_backward(cudaStream_t stream, const LayerIO& io);
  void experts_forward(cudaStream_t stream, const LayerIO& io, bool output);
  void experts_backward(cudaStream_t stream, const LayerIO& io);

  MoeDeclarations decl_;
  MoeShapes shapes_;
  Reruns reruns_;
  GroupedLinearBias fc1_bias_, fc2_bias_;  // model/grouped_linear_bias.h (absent without add_bias_linear)
  int64_t microbatches_ = 1;  // the global batch's (every rank's): the auxiliary losses are their mean
  std::unique_ptr<Plans> plans_;
  std::unique_ptr<Buffers> buf_;
  int32_t* logged_counts_ = nullptr;
};

class MoeLayerCpu final : public CpuLayer {
 public:
  using CpuLayer::CpuLayer;
  static CpuLayerFootprint host_footprint(const ModelSpec& model, const BatchSpec& batch);  // model/layer.h

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(const ModelSpec& model, const BatchSpec& batch) override;
  void forward(const CpuLayerIO& io) override;
  void backward(const CpuLayerIO& io) override;
  void recompute(const CpuLayerIO& io) override;
  void step_begin() override;
  void step_end(const ModelLayout& layout, float* weights) override;

  const MoeShapes& shapes() const { return shapes_; }
  // The kept tokens per expert of the microbatches since step_begin (what step_end balances).
  const std::vector<int32_t>& step_token_counts() const { return step_counts_; }
  // Those of the last finished step (step_end keeps them; logged).
  const std::vector<int32_t>& last_step_token_counts() const { return logged_counts_; }
  // The last forward's routing (tests).
  const std::vector<int32_t>& routing_map() const { return routing_map_; }
  const std::vector<int32_t>& kept_counts() const { return perm_.kept_counts; }
  const std::vector<int32_t>& slot_to_row() const { return perm_.slot_to_row; }

 private:
  // `step_state`: add the auxiliary losses and the step's token counts (not in a recompute).
  void run_forward(const CpuLayerIO& io, bool step_state);

  MoeDeclarations decl_;
  MoeShapes shapes_;
  // saved by forward for backward
  std::vector<float> logits_, probs_, permuted_, fc1_out_, act_, expert_out_, shared_fc1_, shared_act_;
  std::vector<float> shared_out_, shared_gate_;  // moe_shared_expert_gate: the ungated output [T, H], the gate [T]
  std::vector<int32_t> routing_map_, aux_counts_;
  ref::MoePermutation perm_;
  // scratch
  std::vector<float> d_expert_out_, dprobs_, d_act_, d_fc1_, d_permuted_, dlogits_, d_shared_act_, d_shared_fc1_,
      d_input_part_, d_shared_gate_logit_;
  std::vector<int32_t> step_counts_, logged_counts_;
};

// The decoding twin (model/decode_layer.h): each row alone through the router and its top-k experts (no
// capacity: nothing is dropped), plus the shared expert; no state, no auxiliary loss.
class MoeDecodeCpu final : public CpuDecodeLayer {
 public:
  using CpuDecodeLayer::CpuDecodeLayer;

  void declare(LayerDeclarations& d) override { decl_.declare(d); }
  void plan(const ModelSpec& model, const DecodeSpec& decode) override;
  void forward(const CpuDecodeIO& io) override;

 private:
  MoeDeclarations decl_;
  MoeShapes shapes_;  // for the most rows a call has
  std::vector<float> logits_, probs_, fc1_out_, act_, expert_out_, shared_fc1_, shared_act_, shared_out_;  // scratch
  std::vector<float> shared_gate_;  // scratch: moe_shared_expert_gate's gate [rows]
  std::vector<int32_t> routing_map_;
};

// The GPU decoding twin (model/gpu_decode_layer.h): the training forward's kernels on a call's rows, every
// token to its top-k experts (no capacity), plus the shared expert; no state, no auxiliary loss.
class MoeDecodeGpu final : public GpuDecodeLayer {
 public:
  explicit MoeDecodeGpu(LayerPlace place);
  ~MoeDecodeGpu() override;

  void declare(LayerDeclarations& d) override;
  std::vector<ParamRef> fp32_params() const override;  // the expert bias, when it routes
  void plan(const ModelSpec& model, const DecodeSpec& decode, cuda::MemoryPlan& memory) override;
  void take_scratch(DecodeScratch& scratch) override;
  void bind(const cuda::Arena& arena, kernels::Blas& blas) override;
  void forward(cudaStream_t stream, const GpuDecodeIO& io) override;

 private:
  MoeDeclarations decl_;
  bool bias_routes_ = false;  // model.moe_router_enable_expert_bias: the bias chooses experts
  ModelSpec model_;
  int64_t batch_ = 0;
  MoeShapes most_;  // for the most rows a call has
  std::unique_ptr<kernels::GroupedLinearForward> fc1_, fc2_;
  DecodeLinear shared_fc1_proj_;  // the shared expert's fc1 and activation
  cuda::MemorySlot fc1_ws_, fc2_ws_;
  size_t preprocess_bytes_ = 0;
  // scratch
  float *logits_ = nullptr, *probs_ = nullptr;
  int32_t *routing_map_ = nullptr, *expert_counts_ = nullptr, *kept_counts_ = nullptr, *expert_rows_ = nullptr,
          *offsets_ = nullptr, *slot_to_row_ = nullptr, *row_to_slot_ = nullptr;
  void* preprocess_ws_ = nullptr;
  bf16 *permuted_ = nullptr, *fc1_out_ = nullptr, *act_ = nullptr, *expert_out_ = nullptr, *shared_fc1_ = nullptr,
       *shared_act_ = nullptr;
  bf16* shared_out_ = nullptr;    // moe_shared_expert_gate: the ungated shared output
  float* shared_gate_ = nullptr;  // and its gate
};

}  // namespace sg::model
