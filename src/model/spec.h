#pragma once
// The model's shapes and options, independent of how the config was written (train/ builds it from
// the Megatron-Bridge style config). Everything the model plans memory from is here.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/float_buffer.h"
#include "model/longrope.h"
#include "model/moe_spec.h"
#include "model/recompute_spec.h"
#include "reference/rope_frequencies.h"

namespace sg::model {

// How attention layers encode positions (Megatron's position_embedding_type): rope, or none (Megatron's
// hybrid default, Nemotron-H: its attention layers see no positions, the Mamba layers order the tokens).
enum class PositionEmbedding : uint8_t { rope, none };

// The dense MLP's activation (Megatron's activation_func + gated_linear_unit pair): SwiGLU (silu, gated;
// Llama) or squared ReLU (not gated; Nemotron-H).
enum class MlpActivation : uint8_t { swiglu, squared_relu };

// The Mamba2 mixer's shapes and init (Megatron's MambaMixer; model/layers/mamba_layer.h).
struct MambaSpec {
  int64_t state_dim = 128;  // mamba_state_dim (d_state)
  int64_t head_dim = 64;    // mamba_head_dim
  int64_t num_groups = 8;   // mamba_num_groups (of B and C)
  int64_t num_heads = 0;    // mamba_num_heads; 0: expand * hidden_size / head_dim
  int64_t expand = 2;
  int64_t conv_kernel = 4;  // d_conv (the kernels are built for 4)
  int64_t chunk_size = 128;  // SSD chunk (the kernels are built for 128)
  double dt_min = 0.001, dt_max = 0.1, dt_init_floor = 1e-4;  // dt_bias init
  double dt_limit_min = 0.0, dt_limit_max = std::numeric_limits<double>::infinity();  // clamp of dt
  double A_init_min = 1.0, A_init_max = 16.0;  // A_init_range
};

struct ModelSpec {
  int64_t vocab_size = 8192;
  // Megatron's num_layers: GPT blocks (each an attention layer and an MLP layer) when
  // hybrid_layer_pattern is empty, else the pattern's length (one layer per letter). model/stack.h.
  int64_t num_layers = 4;
  // Megatron's hybrid_override_pattern (* attention, - MLP, E MoE, M Mamba); empty: the GPT layout.
  std::string hybrid_layer_pattern;
  // Megatron's is_hybrid_model: output projections start with std init_method_std / sqrt(num_layers), not
  // / sqrt(2 num_layers) (model/init.h). Only the initial values depend on it.
  bool is_hybrid_model = false;
  int64_t hidden_size = 256;
  int64_t ffn_hidden_size = 704;
  int64_t num_attention_heads = 4;
  int64_t num_query_groups = 4;  // KV heads (GQA)
  int64_t seq_length = 256;
  double rotary_base = 10000.0;
  ref::RopeScaling rope_scaling;  // Llama 3 or LongRoPE scaling (reference/rope_frequencies.h); default none
  // LongRoPE's two lists (model/longrope.h); rope_scaling holds the one for seq_length (a decoder's: for its context).
  LongRope longrope;
  // Partial rotary (Megatron's rotary_percent, HF Phi3's partial_rotary_factor): RoPE rotates the first rotary_dim
  // dimensions of each query and key head (even, <= head_dim) and passes the rest through; 0: the whole head.
  int64_t rotary_dim = 0;
  double layernorm_epsilon = 1e-5;
  // Megatron's qk_layernorm (Qwen3's q_norm and k_norm): each query head and each key head of the QKV
  // projection is RMS-normalized over head_dim (one [head_dim] weight for q, one for k) before RoPE.
  bool qk_layernorm = false;
  // Megatron's add_qkv_bias (Qwen2): a bias on the query, key and value projections (zeros, no weight decay).
  bool add_qkv_bias = false;
  // Megatron's add_bias_linear (Llama's attention_bias + mlp_bias): a bias on every linear of the attention
  // (q, k, v and o_proj) and the dense MLP (fc1 and fc2); Mamba's projections have none, as in Megatron.
  bool add_bias_linear = false;
  // Whether q, k and v have a bias (either key, as Megatron's add_qkv_bias or add_bias_linear).
  bool has_qkv_bias() const { return add_qkv_bias || add_bias_linear; }
  bool share_embeddings_and_output_weights = false;
  double init_method_std = 0.02;
  float attention_dropout = 0.0f;
  float hidden_dropout = 0.0f;
  // MoE (tiny_moe): 0 experts means dense.
  int64_t num_moe_experts = 0;
  int64_t moe_router_topk = 2;
  int64_t moe_ffn_hidden_size = 0;
  MoeSpec moe;  // the rest of Megatron's moe_* keys (model/moe_spec.h)
  // Hybrid models (Mamba layers, Nemotron-H's attention and MLP).
  PositionEmbedding position_embedding = PositionEmbedding::rope;
  MlpActivation mlp_activation = MlpActivation::swiglu;
  MambaSpec mamba;
  // Activation recompute (model/recompute_spec.h): changes the memory plan and the backward's work,
  // never the numbers.
  RecomputeSpec recompute;

  // Megatron's kv_channels: the attention head dim; 0 = hidden_size / num_attention_heads. Real MoE
  // shapes (Qwen3-30B-A3B: hidden 2048, 32 heads of 128) have query width != hidden_size.
  int64_t kv_channels = 0;

  int64_t head_dim() const { return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads; }
  int64_t q_dim() const { return head_dim() * num_attention_heads; }
  int64_t kv_dim() const { return head_dim() * num_query_groups; }
  int64_t qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  int64_t rope_rotated_dims() const { return ref::rope_rotated_dims(head_dim(), rotary_dim); }
  // The share of each head RoPE rotates, as Megatron's rotary_percent and HF's partial_rotary_factor: the smallest
  // double whose int(head_dim x share) (how both count the rotated dimensions) gives back rope_rotated_dims().
  double rotary_share() const {
    double share = static_cast<double>(rope_rotated_dims()) / static_cast<double>(head_dim());
    while (rotary_dims_of_share(head_dim(), share) < rope_rotated_dims()) share = std::nextafter(share, 2.0);
    return share;
  }
  // The dimensions a share of a head rotates, as Megatron's RotaryEmbedding and transformers count them: Python's
  // int(head_dim x share), toward zero.
  static int64_t rotary_dims_of_share(int64_t head_dim, double share) {
    return static_cast<int64_t>(static_cast<double>(head_dim) * share);
  }
  // The Mamba mixer's widths: heads, d_inner = heads * head_dim, the conv channels xBC = d_inner +
  // 2 groups * state, and the in_proj output [z | xBC | dt].
  int64_t mamba_heads() const {
    return mamba.num_heads > 0 ? mamba.num_heads
                               : (mamba.head_dim > 0 ? mamba.expand * hidden_size / mamba.head_dim : 0);
  }
  int64_t mamba_inner() const { return mamba_heads() * mamba.head_dim; }
  int64_t mamba_conv_dim() const { return mamba_inner() + 2 * mamba.num_groups * mamba.state_dim; }
  int64_t mamba_in_proj_dim() const { return mamba_inner() + mamba_conv_dim() + mamba_heads(); }
};

// Batch shapes of one step, as ONE rank runs it: global batch = micro_batch_size x num_microbatches x
// data_parallel_size (Megatron's rule). The loss of every microbatch counts 1 / (num_microbatches x
// data_parallel_size), so the sum over ranks is the global mean.
struct BatchSpec {
  int64_t micro_batch_size = 4;
  int64_t num_microbatches = 1;    // this rank's: global_batch_size / (micro_batch_size x data_parallel_size)
  int64_t data_parallel_size = 1;  // ranks that each run num_microbatches microbatches of the global batch
  int64_t tokens_per_microbatch(const ModelSpec& m) const { return micro_batch_size * m.seq_length; }
  int64_t global_microbatches() const { return num_microbatches * data_parallel_size; }
};

// Optimizer and LR schedule of the training step (Megatron-Bridge optimizer.* / scheduler.* keys).
// Plan-time constants of the step: only the lr and the weight decay (from the device step counter) change
// between steps.
// Megatron's --lr-decay-style and, for WSD, --lr-wsd-decay-style (kernels/lr_schedule.h has the formulas).
enum class LrDecayStyle : uint8_t { constant, linear, cosine, inverse_square_root, wsd };
enum class LrWsdDecayStyle : uint8_t { exponential, linear, cosine, minus_sqrt };
enum class WeightDecayIncrStyle : uint8_t { constant, linear, cosine };

struct OptimizerSpec {
  double lr = 3e-4;         // optimizer.lr: peak, after warmup
  double min_lr = 0.0;      // optimizer.min_lr: reached at lr_decay_iters (linear, cosine)
  int64_t lr_warmup_iters = 0;  // scheduler.lr_warmup_iters
  int64_t lr_decay_iters = 0;   // scheduler.lr_decay_iters: absolute step where the decay ends
  LrDecayStyle lr_decay_style = LrDecayStyle::constant;  // scheduler.lr_decay_style
  double lr_warmup_init = 0.0;                           // scheduler.lr_warmup_init: the lr the warmup rises from
  // WSD: the last lr_wsd_decay_iters steps before lr_decay_iters anneal from lr to min_lr in this style.
  int64_t lr_wsd_decay_iters = 0;                                     // scheduler.lr_wsd_decay_iters
  LrWsdDecayStyle lr_wsd_decay_style = LrWsdDecayStyle::exponential;  // scheduler.lr_wsd_decay_style
  // AdamW's decay (matrices only, see model/param_builder.h): Megatron's schedule (scheduler.start_weight_decay,
  // end_weight_decay, weight_decay_incr_style; kernels/weight_decay_schedule.h). constant: weight_decay at every
  // step; linear, cosine: from weight_decay to end_weight_decay over weight_decay_incr_samples samples, each step
  // counting the global batch.
  double weight_decay = 0.01;  // the first step's: scheduler.start_weight_decay, null = optimizer.weight_decay
  WeightDecayIncrStyle weight_decay_incr_style = WeightDecayIncrStyle::constant;
  double end_weight_decay = 0.0;          // linear, cosine
  int64_t weight_decay_incr_samples = 0;  // linear, cosine: Megatron's wd_incr_steps (> 0)
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  double clip_grad = 1.0;  // optimizer.clip_grad: max global grad norm; <= 0 turns clipping off
  // optimizer.exp_avg_dtype / exp_avg_sq_dtype: how the Adam moments are stored (kernels/adamw.h)
  kernels::FloatDtype exp_avg_dtype = kernels::FloatDtype::fp32;
  kernels::FloatDtype exp_avg_sq_dtype = kernels::FloatDtype::fp32;
  // ddp.grad_reduce_in_fp32: the main gradients' storage, fp32 (true) or bf16 (false, as Megatron's buffer holds
  // them in the parameters' dtype). The weight-gradient GEMMs and the other writers sum in fp32 and round where
  // they store; the norm, the clip and AdamW read them widened.
  kernels::FloatDtype main_grad_dtype = kernels::FloatDtype::fp32;
};

}  // namespace sg::model
