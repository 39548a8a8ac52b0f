// The GPU training step (model/train_step.h) against the CPU fp32 reference (model/cpu_model.h) from the
// same fp32 initialisation and batch, and against itself: two runs, whole-step capture and per-region
// graphs must all be bitwise identical to eager.
//
// Tolerances (bf16 compute vs the fp32 reference):
//   loss: relative 1e-2 (kBf16RelTol). One forward pass rounds every stored activation to bf16 (unit
//     roundoff 2^-9 ~ 2e-3); the loss, a mean of ~25-50 per-token log-softmax values, averages these.
//   gradients: per-tensor relative error (||g_gpu - g_cpu|| / ||g_cpu||) <= 5e-2. Each parameter
//     gradient is the product of a bf16 activation and a bf16 backward signal that went through 10-20
//     bf16 roundings (GEMM outputs, norm/dropout/SwiGLU/RoPE/attention backward); independent errors of
//     ~2e-3 add up to ~1e-2, with a tail up to a few 1e-2 for tensors whose gradient is a sum of nearly
//     cancelling terms (norm weights). A real bug (a missing term, a wrong mask or transpose) gives O(1).
//   optimizer: exact fp32 math, so the GPU update is compared with ref::adamw_step applied to the GPU's
//     own gradients at 1e-5 (kFp32RelTol); against the CPU's full step, AdamW's first update is
//     ~lr * sign(g), so only its sign can be compared where |g| is well above the bf16 error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cuda/arena.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "graph/region.h"
#include "graph/registry.h"
#include "graph/scope_plan.h"
#include "graph/scoped_runner.h"
#include "model/cpu_model.h"
#include "model/dropout_sites.h"
#include "model/init.h"
#include "model/layer_registry.h"
#include "model/train_step.h"
#include "reference/adamw.h"
#include "reference/grad_norm.h"
#include "reference/lr_schedule.h"
#include "step_modes.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

constexpr double kGradRelTol = 5e-2;
// Mamba's per-head dt_bias, A_log and D: each gradient element is a sum over every token (and, for
// A_log and D, every channel of the head) of products of bf16 signals that largely cancel, like the norm
// weights' tail above; a real bug is off by O(1).
constexpr double kMambaHeadGradRelTol = 1e-1;
bool is_mamba_head_vector(const std::string& name) {
  for (const char* leaf : {"mixer.dt_bias", "mixer.A_log", "mixer.D"}) {
    const std::string l = leaf;
    if (name.size() >= l.size() && name.compare(name.size() - l.size(), l.size(), l) == 0) return true;
  }
  return false;
}

// The tiny model (2 layers, GQA 4 heads / 2 groups) at head_dim 64, the head size cuDNN's flash attention
// is exercised with in the attention tests, and with a vocabulary that is not a multiple of 8 (the LM
// head pads its workspace rows) and an FFN size that is not a multiple of 64.
ModelSpec gpu_tiny_spec() {
  ModelSpec s = test::tiny_model_spec();
  s.vocab_size = 50;
  s.hidden_size = 256;  // 4 heads of 64, 2 KV groups
  s.ffn_hidden_size = 344;
  s.seq_length = 16;
  return s;
}

// Hybrid patterns with Mamba layers, in Nemotron-H's style (attention without RoPE, squared-ReLU MLP), at
// shapes the GPU kernels take but that are no tile multiples: S = 200 is one full SSD chunk of 128 and a
// partial one; 8 Mamba heads of 64 in 2 groups of state 32 (in_proj 2 x 512 + 128 + 8 = 1160 columns).
ModelSpec gpu_hybrid_spec(const std::string& pattern) {
  ModelSpec s = gpu_tiny_spec();
  s.hybrid_layer_pattern = pattern;
  s.num_layers = static_cast<int64_t>(pattern.size());
  s.seq_length = 200;
  s.position_embedding = PositionEmbedding::none;
  s.mlp_activation = MlpActivation::squared_relu;
  s.mamba.num_heads = 8;
  s.mamba.num_groups = 2;
  s.mamba.state_dim = 32;
  return s;
}

BatchSpec batch_spec(int64_t num_microbatches) {
  BatchSpec b;
  b.micro_batch_size = 2;
  b.num_microbatches = num_microbatches;
  return b;
}

OptimizerSpec test_optimizer() {
  OptimizerSpec o;
  o.lr = 1e-3;
  o.lr_warmup_iters = 2;
  o.weight_decay = 0.1;
  o.clip_grad = 1.0;
  return o;
}

std::vector<float> slice(const std::vector<float>& v, const ParamTensor& t) {
  return std::vector<float>(v.begin() + t.offset, v.begin() + t.offset + t.numel);
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- GPU vs CPU: loss, every gradient, one optimizer step ----

struct ParityCase {
  int64_t num_microbatches;
  bool tied;
  float hidden_dropout;  // our Philox masks: the CPU draws the same ones
  const char* pattern = "";  // hybrid_layer_pattern ("" = GPT blocks)
  bool fused_swiglu_backward = false;  // STEPGRAPH_SWIGLU_BACKWARD_GEMM=always: the MLP's fused backward GEMM
  bool bf16_grads = false;  // ddp.grad_reduce_in_fp32=false: both sides' gradients rounded to bf16 where stored
  bool qk_layernorm = false;  // Qwen3's query and key norms
  bool qkv_bias = false;      // Qwen2's bias on q, k and v (model.add_qkv_bias)
  bool bias_linear = false;   // every linear's bias (model.add_bias_linear)
  int64_t rotary_dim = 0;     // partial rotary (model.rotary_percent): RoPE on this many of each head's 64
  bool longrope = false;      // LongRoPE (model.longrope_*): a factor per rotated pair, cos and sin scaled
};

class TrainStepParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(TrainStepParity, LossGradientsAndUpdateMatchTheCpuReference) {
  const ParityCase c = GetParam();
  const bool mamba = std::string(c.pattern).find('M') != std::string::npos;
  ModelSpec spec = mamba ? gpu_hybrid_spec(c.pattern) : gpu_tiny_spec();
  spec.share_embeddings_and_output_weights = c.tied;
  spec.hidden_dropout = c.hidden_dropout;
  spec.hybrid_layer_pattern = c.pattern;
  spec.qk_layernorm = c.qk_layernorm;
  spec.add_qkv_bias = c.qkv_bias;
  spec.add_bias_linear = c.bias_linear;
  spec.rotary_dim = c.rotary_dim;
  if (c.longrope) {
    for (int64_t i = 0; i < spec.rope_rotated_dims() / 2; ++i) {
      spec.longrope.short_factor.push_back(1.0f + 0.05f * static_cast<float>(i));
      spec.longrope.long_factor.push_back(1.0f + 1.5f * static_cast<float>(i));
    }
    spec.longrope.original_max_position_embeddings = spec.seq_length - 1;  // the long list, as a step uses it
    spec.longrope.attention_factor = 1.1902380714238083;
    spec.rope_scaling = spec.longrope.scaling_for(spec.seq_length);
  }
  if (!spec.hybrid_layer_pattern.empty()) spec.num_layers = static_cast<int64_t>(spec.hybrid_layer_pattern.size());
  const BatchSpec bs = batch_spec(c.num_microbatches);
  OptimizerSpec opt = test_optimizer();
  if (c.bf16_grads) opt.main_grad_dtype = kernels::FloatDtype::bf16;
  const uint64_t seed = 1234;
  const HostBatch batch = test::random_batch(spec, bs, 77);

  cuda::Stream stream;
  const test::ScopedEnv fused("STEPGRAPH_SWIGLU_BACKWARD_GEMM", c.fused_swiglu_backward ? "always" : nullptr);
  TrainStep gpu(spec, bs, opt, seed);
  const ModelLayout& layout = gpu.layout();
  const std::vector<float> w0 = initial_parameters(layout, seed);
  gpu.upload_parameters(stream, w0);
  gpu.upload_batch(stream, batch);
  graph::EagerRegionRunner eager;
  {
    cuda::StepGuard guard("llama step test");  // any allocation or host sync inside the step throws
    gpu.enqueue_step(stream, eager);
  }
  const StepScalars scalars = gpu.download_scalars(stream);
  const std::vector<float> g_gpu = gpu.download_grads(stream);
  const std::vector<float> w1_gpu = gpu.download_main_weights(stream);

  CpuModel cpu(spec, bs, opt, rng::RngState{seed, 0});
  ASSERT_TRUE(bitwise_equal(cpu.weights(), w0));
  const float loss_cpu = cpu.compute_gradients(batch, 0);
  const std::vector<float> g_cpu = cpu.grads();

  std::printf("loss gpu %.6f cpu %.6f\n", scalars.loss, loss_cpu);
  EXPECT_NEAR(scalars.loss, loss_cpu, test::kBf16RelTol * loss_cpu);
  EXPECT_EQ(scalars.loss_nonfinite, 0);
  EXPECT_EQ(scalars.grad_nonfinite, 0);
  if (c.bf16_grads) {
    EXPECT_TRUE(bitwise_equal(g_gpu, test::round_bf16(g_gpu))) << "bf16 main gradients hold non-bf16 values";
  }
  std::vector<bool> covered(g_gpu.size(), false);
  const auto norm_of = [&](const std::vector<float>& g, const ParamTensor& t) {
    double sum = 0.0;
    for (const float x : slice(g, t)) sum += static_cast<double>(x) * x;
    return std::sqrt(sum);
  };
  for (const ParamTensor& t : layout.tensors()) {
    for (int64_t i = 0; i < t.numel; ++i) covered[static_cast<size_t>(t.offset + i)] = true;
    if (test::gradient_zero_by_symmetry(spec, t.name)) {
      // Rounding noise on both sides: small against the same layer's value-bias gradient (bf16 rounds d qkv to 2^-9).
      std::string v_bias = t.name;
      v_bias.replace(v_bias.find("k_proj.bias"), 1, "v");
      const ParamTensor& v = layout.find(v_bias);
      std::printf("  %-48s |grad| gpu %.3e cpu %.3e, the value bias's %.3e\n", t.name.c_str(), norm_of(g_gpu, t),
                  norm_of(g_cpu, t), norm_of(g_cpu, v));
      EXPECT_LE(norm_of(g_gpu, t), 0.05 * norm_of(g_cpu, v)) << t.name;
      EXPECT_LE(norm_of(g_cpu, t), 1e-4 * norm_of(g_cpu, v)) << t.name;
      continue;
    }
    const double err = test::relative_error(slice(g_gpu, t), slice(g_cpu, t));
    std::printf("  %-48s rel err %.3e\n", t.name.c_str(), err);
    EXPECT_LE(err, is_mamba_head_vector(t.name) ? kMambaHeadGradRelTol : kGradRelTol) << t.name;
  }
  for (size_t i = 0; i < g_gpu.size(); ++i) {
    if (!covered[i]) {
      ASSERT_EQ(g_gpu[i], 0.0f) << "alignment gap " << i;
    }
  }

  // The optimizer part of the step, exactly: ref::adamw_step on w0 with the GPU's own gradients.
  const double norm = ref::grad_global_norm(g_gpu.data(), layout.total());
  const float coef = ref::clip_coefficient(norm, static_cast<float>(opt.clip_grad));
  ref::LrSchedule schedule;
  schedule.lr = static_cast<float>(opt.lr);
  schedule.warmup_iters = opt.lr_warmup_iters;
  const float lr = ref::lr_at(schedule, 0);
  EXPECT_NEAR(scalars.grad_norm, norm, test::kFp32RelTol * norm);
  EXPECT_NEAR(scalars.clip_coef, coef, test::kFp32RelTol);
  EXPECT_EQ(scalars.lr, lr);
  EXPECT_EQ(scalars.steps_done, 1);
  std::vector<float> w1_expected = w0, m(w0.size(), 0.0f), v(w0.size(), 0.0f);
  ref::AdamWConfig adam{static_cast<float>(opt.adam_beta1), static_cast<float>(opt.adam_beta2),
                        static_cast<float>(opt.adam_eps), static_cast<float>(opt.weight_decay)};
  const int64_t nd = layout.num_decay(), n = layout.total();
  ref::adamw_step(w1_expected.data(), g_gpu.data(), m.data(), v.data(), nd, lr, coef, 1, adam, true);
  ref::adamw_step(w1_expected.data() + nd, g_gpu.data() + nd, m.data() + nd, v.data() + nd, n - nd, lr, coef, 1, adam,
                  false);
  EXPECT_LE(test::relative_error(w1_gpu, w1_expected), test::kFp32RelTol);
  EXPECT_TRUE(bitwise_equal(gpu.download_compute_weights(stream), test::round_bf16(w1_gpu)))
      << "the bf16 weights are not the rounded fp32 master weights";

  // Against the CPU's whole step: the update direction agrees wherever the gradient is clearly nonzero.
  cpu.train_step(batch);
  const std::vector<float>& w1_cpu = cpu.weights();
  for (const ParamTensor& t : layout.tensors()) {
    if (is_mamba_head_vector(t.name)) continue;  // 8 elements at 1e-1: their gradients are checked above
    if (test::gradient_zero_by_symmetry(spec, t.name)) continue;  // Adam makes the noise full-size steps
    const std::vector<float> gc = slice(g_cpu, t);
    double rms = 0.0;
    for (float g : gc) rms += static_cast<double>(g) * g;
    rms = std::sqrt(rms / static_cast<double>(gc.size()));
    int64_t compared = 0, agree = 0;
    for (int64_t i = 0; i < t.numel; ++i) {
      const size_t at = static_cast<size_t>(t.offset + i);
      if (std::abs(g_cpu[at]) < 0.2 * rms) continue;
      ++compared;
      const bool down_gpu = w1_gpu[at] < w0[at] * (t.weight_decay ? 1.0f - lr * adam.weight_decay : 1.0f);
      const bool down_cpu = w1_cpu[at] < w0[at] * (t.weight_decay ? 1.0f - lr * adam.weight_decay : 1.0f);
      agree += down_gpu == down_cpu;
    }
    EXPECT_GT(compared, 0) << t.name;
    EXPECT_GE(static_cast<double>(agree), 0.99 * static_cast<double>(compared)) << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, TrainStepParity,
    ::testing::Values(
        ParityCase{1, false, 0.0f}, ParityCase{2, false, 0.0f}, ParityCase{2, true, 0.0f}, ParityCase{2, false, 0.1f},
        ParityCase{2, false, 0.1f, "*--*"}, ParityCase{2, false, 0.1f, "M*-M"}, ParityCase{1, true, 0.0f, "MM-"},
        ParityCase{1, false, 0.0f, "", true}, ParityCase{2, false, 0.1f, "", true},
        ParityCase{2, false, 0.1f, "", false, true}, ParityCase{1, true, 0.0f, "", true, true},
        ParityCase{2, false, 0.1f, "M*-M", false, true}, ParityCase{2, false, 0.1f, "", false, false, true},
        ParityCase{1, true, 0.0f, "M*-M", false, true, true}, ParityCase{2, false, 0.1f, "", false, false, false, true},
        ParityCase{1, false, 0.0f, "*--*", false, true, true, true},
        ParityCase{2, false, 0.1f, "", false, false, false, false, true},
        ParityCase{1, false, 0.0f, "", true, true, false, false, true},
        ParityCase{2, false, 0.1f, "M*-M", false, false, false, false, true},
        ParityCase{2, false, 0.1f, "", false, false, true, false, false, 48},
        ParityCase{1, true, 0.0f, "", false, false, false, false, false, 24},
        ParityCase{2, false, 0.1f, "", false, false, false, false, false, 48, true}),
    [](const ::testing::TestParamInfo<ParityCase>& info) {
      return "mb" + std::to_string(info.param.num_microbatches) + (info.param.tied ? "_tied" : "") +
             (info.param.hidden_dropout > 0 ? "_dropout" : "") + (info.param.pattern[0] != 0 ? "_hybrid" : "") +
             (std::string(info.param.pattern).find('M') != std::string::npos ? "_mamba" : "") +
             (info.param.fused_swiglu_backward ? "_fused_swiglu_backward" : "") +
             (info.param.bf16_grads ? "_bf16_grads" : "") + (info.param.qk_layernorm ? "_qk_layernorm" : "") +
             (info.param.qkv_bias ? "_qkv_bias" : "") + (info.param.bias_linear ? "_bias_linear" : "") +
             (info.param.rotary_dim > 0 ? "_rotary" + std::to_string(info.param.rotary_dim) : "") +
             (info.param.longrope ? "_longrope" : "");
    });

// ---- determinism and graphs ----

using Mode = test::StepMode;

struct RunResult {
  std::vector<float> losses, master, compute, exp_avg, exp_avg_sq;
  rng::RngState rng{};
};

OptimizerSpec bf16_moments_optimizer() {
  OptimizerSpec o = test_optimizer();
  o.exp_avg_dtype = kernels::FloatDtype::bf16;
  o.exp_avg_sq_dtype = kernels::FloatDtype::bf16;
  return o;
}

// `steps` steps with a fresh batch each, dropout on, two microbatches.
RunResult run_steps(Mode mode, int steps, const OptimizerSpec& optimizer = test_optimizer()) {
  ModelSpec spec = gpu_tiny_spec();
  spec.attention_dropout = 0.1f;
  spec.hidden_dropout = 0.1f;
  const BatchSpec bs = batch_spec(2);
  const uint64_t seed = 99;
  cuda::Stream stream;
  TrainStep step(spec, bs, optimizer, seed);
  step.upload_parameters(stream, initial_parameters(step.layout(), seed));
  test::StepModeDriver driver(step, mode, {graph::GraphScope::attn, graph::GraphScope::mlp});
  RunResult r;
  for (int i = 0; i < steps; ++i) {
    step.upload_batch(stream, test::random_batch(spec, bs, 500 + static_cast<uint64_t>(i)));
    driver.run(stream);
    r.losses.push_back(step.download_scalars(stream).loss);
  }
  r.master = step.download_main_weights(stream);
  r.compute = step.download_compute_weights(stream);
  r.exp_avg = step.download_exp_avg(stream);
  r.exp_avg_sq = step.download_exp_avg_sq(stream);
  r.rng = step.download_rng_state(stream);
  if (mode == Mode::region_graphs) {
    EXPECT_EQ(driver.registry().size(), 12u);  // 4 layers (2 blocks) x {forward, backward, first microbatch's backward}
  }
  return r;
}

void expect_bitwise_equal(const RunResult& a, const RunResult& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.losses[i], &b.losses[i], sizeof(float)), 0)
        << "step " << i + 1 << ": loss " << a.losses[i] << " vs " << b.losses[i];
  }
  EXPECT_TRUE(bitwise_equal(a.master, b.master)) << "fp32 master weights differ";
  EXPECT_TRUE(bitwise_equal(a.compute, b.compute)) << "bf16 weights differ";
  EXPECT_TRUE(bitwise_equal(a.exp_avg, b.exp_avg)) << "exp_avg differs";
  EXPECT_TRUE(bitwise_equal(a.exp_avg_sq, b.exp_avg_sq)) << "exp_avg_sq differs";
  EXPECT_EQ(a.rng.seed, b.rng.seed);
  EXPECT_EQ(a.rng.offset, b.rng.offset);
}

TEST(TrainStepGpu, TwoEagerRunsAreBitwiseIdentical) {
  const RunResult a = run_steps(Mode::eager, 3);
  const RunResult b = run_steps(Mode::eager, 3);
  expect_bitwise_equal(a, b);
  EXPECT_EQ(a.rng.offset, 3u * 2u * kRngOffsetPerMicrobatch);
  for (float loss : a.losses) EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NE(a.losses[0], a.losses[1]);  // a different batch and updated weights: the step did something
}

TEST(TrainStepGpu, WholeStepCaptureReplaysBitwiseEqualToEager) {
  expect_bitwise_equal(run_steps(Mode::eager, 4), run_steps(Mode::whole_step_graph, 4));
}

TEST(TrainStepGpu, RegionGraphsReplayBitwiseEqualToEager) {
  expect_bitwise_equal(run_steps(Mode::eager, 4), run_steps(Mode::region_graphs, 4));
}

// The MLP's fused SwiGLU backward GEMM (forced: the tiny model is below its one-wave rule) in both graph modes.
TEST(TrainStepGpu, FusedSwiGluBackwardGraphsReplayBitwiseEqualToEager) {
  const test::ScopedEnv fused("STEPGRAPH_SWIGLU_BACKWARD_GEMM", "always");
  const RunResult eager = run_steps(Mode::eager, 4);
  expect_bitwise_equal(eager, run_steps(Mode::whole_step_graph, 4));
  expect_bitwise_equal(eager, run_steps(Mode::region_graphs, 4));
}

// Adam moments stored in bf16 (optimizer.exp_avg_dtype / exp_avg_sq_dtype = bf16): every graph mode
// bitwise equal to eager; the first step's update (from zero moments) is the fp32-moment step's, bit for
// bit, with the moments rounded; later steps read the rounded moments and so differ.
TEST(TrainStepGpu, Bf16MomentsGraphModesBitwiseEqualToEager) {
  const RunResult eager = run_steps(Mode::eager, 4, bf16_moments_optimizer());
  expect_bitwise_equal(eager, run_steps(Mode::whole_step_graph, 4, bf16_moments_optimizer()));
  expect_bitwise_equal(eager, run_steps(Mode::region_graphs, 4, bf16_moments_optimizer()));
  EXPECT_TRUE(bitwise_equal(eager.exp_avg, test::round_bf16(eager.exp_avg))) << "exp_avg holds non-bf16 values";
  EXPECT_TRUE(bitwise_equal(eager.exp_avg_sq, test::round_bf16(eager.exp_avg_sq)));

  const RunResult fp32_one = run_steps(Mode::eager, 1), bf16_one = run_steps(Mode::eager, 1, bf16_moments_optimizer());
  EXPECT_TRUE(bitwise_equal(fp32_one.master, bf16_one.master)) << "the update must use the fp32 moments";
  EXPECT_TRUE(bitwise_equal(test::round_bf16(fp32_one.exp_avg), bf16_one.exp_avg));
  EXPECT_TRUE(bitwise_equal(test::round_bf16(fp32_one.exp_avg_sq), bf16_one.exp_avg_sq));
  EXPECT_FALSE(bitwise_equal(fp32_one.exp_avg, bf16_one.exp_avg)) << "bf16 storage rounded nothing";
  EXPECT_FALSE(bitwise_equal(run_steps(Mode::eager, 2).master, run_steps(Mode::eager, 2, bf16_moments_optimizer()).master))
      << "the second step should read the rounded moments";
}

// Main gradients stored in bf16 (ddp.grad_reduce_in_fp32=false), with bf16 moments too (the 1b bench's
// precision-aware row): every graph mode bitwise equal to eager, and the run is not the fp32-gradient one.
TEST(TrainStepGpu, Bf16MainGradientsGraphModesBitwiseEqualToEager) {
  OptimizerSpec bf16_grads = bf16_moments_optimizer();
  bf16_grads.main_grad_dtype = kernels::FloatDtype::bf16;
  const RunResult eager = run_steps(Mode::eager, 4, bf16_grads);
  expect_bitwise_equal(eager, run_steps(Mode::whole_step_graph, 4, bf16_grads));
  expect_bitwise_equal(eager, run_steps(Mode::region_graphs, 4, bf16_grads));
  for (const float loss : eager.losses) EXPECT_TRUE(std::isfinite(loss));
  EXPECT_FALSE(bitwise_equal(eager.master, run_steps(Mode::eager, 4, bf16_moments_optimizer()).master))
      << "bf16 gradients rounded nothing";
}

class TrainStepResume : public ::testing::TestWithParam<bool> {};  // bf16 moments?

TEST_P(TrainStepResume, LoadStateResumesBitExactly) {
  const OptimizerSpec optimizer = GetParam() ? bf16_moments_optimizer() : test_optimizer();
  ModelSpec spec = gpu_tiny_spec();
  spec.attention_dropout = 0.1f;
  spec.hidden_dropout = 0.1f;
  const BatchSpec bs = batch_spec(2);
  const uint64_t seed = 99;
  const RunResult uninterrupted = run_steps(Mode::eager, 3, optimizer);  // same spec, seed and batches 500-502

  cuda::Stream stream;
  graph::EagerRegionRunner eager;
  std::vector<float> master, exp_avg, exp_avg_sq;
  int64_t steps_done = 0;
  rng::RngState rng{};
  {
    TrainStep first(spec, bs, optimizer, seed);
    first.upload_parameters(stream, initial_parameters(first.layout(), seed));
    for (uint64_t i = 0; i < 2; ++i) {
      first.upload_batch(stream, test::random_batch(spec, bs, 500 + i));
      first.enqueue_step(stream, eager);
    }
    master = first.download_main_weights(stream);
    exp_avg = first.download_exp_avg(stream);
    exp_avg_sq = first.download_exp_avg_sq(stream);
    steps_done = first.download_scalars(stream).steps_done;
    rng = first.download_rng_state(stream);
  }
  EXPECT_EQ(steps_done, 2);
  const auto resume = [&](const TrainStepOptions& options, const FlatView& w, const FlatView& m, const FlatView& v) {
    TrainStep resumed(spec, bs, optimizer, seed, options);
    resumed.load_state(stream, w, m, v, steps_done, rng);
    EXPECT_TRUE(bitwise_equal(resumed.download_main_weights(stream), master));
    resumed.upload_batch(stream, test::random_batch(spec, bs, 502));
    resumed.enqueue_step(stream, eager);
    const float loss = resumed.download_scalars(stream).loss;
    EXPECT_EQ(std::memcmp(&loss, &uninterrupted.losses[2], sizeof(float)), 0)
        << loss << " vs " << uninterrupted.losses[2];
    EXPECT_TRUE(bitwise_equal(resumed.download_main_weights(stream), uninterrupted.master));
    EXPECT_TRUE(bitwise_equal(resumed.download_compute_weights(stream), uninterrupted.compute));
    EXPECT_TRUE(bitwise_equal(resumed.download_exp_avg(stream), uninterrupted.exp_avg));
    EXPECT_TRUE(bitwise_equal(resumed.download_exp_avg_sq(stream), uninterrupted.exp_avg_sq));
  };
  {
    SCOPED_TRACE("host vectors, one chunk");
    resume({}, master, exp_avg, exp_avg_sq);
  }
  // As a resume reads a mapped checkpoint (train/checkpointing.h): one piece per tensor, in the file's order (here
  // reversed) and unaligned, read in chunks of 1000 elements that end inside tensors and alignment gaps.
  const ModelLayout layout = model_layout(spec);
  std::vector<std::vector<std::byte>> files;
  const auto mapped = [&](const std::vector<float>& values) {
    std::vector<std::byte>& bytes = files.emplace_back(2 + values.size() * 4);
    std::vector<FlatView::Piece> pieces;
    size_t at = 2;
    for (auto t = layout.tensors().rbegin(); t != layout.tensors().rend(); ++t) {
      std::memcpy(bytes.data() + at, values.data() + t->offset, static_cast<size_t>(t->numel) * 4);
      pieces.push_back({.offset = t->offset, .count = t->numel, .data = bytes.data() + at});
      at += static_cast<size_t>(t->numel) * 4;
    }
    return FlatView(layout.total(), std::move(pieces));
  };
  files.reserve(3);
  SCOPED_TRACE("mapped pieces, chunks of 1000");
  resume({.upload_chunk_elements = 1000}, mapped(master), mapped(exp_avg), mapped(exp_avg_sq));
}

INSTANTIATE_TEST_SUITE_P(Moments, TrainStepResume, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "bf16" : "fp32"; });

// ---- NaN flags, regions, memory plan ----

TEST(TrainStepGpu, NanFlagsDescribeTheLastStepOnly) {
  const ModelSpec spec = gpu_tiny_spec();
  const BatchSpec bs = batch_spec(2);
  cuda::Stream stream;
  TrainStep step(spec, bs, test_optimizer(), 5);
  std::vector<float> w = initial_parameters(step.layout(), 5);
  const std::vector<float> good = w;
  w[static_cast<size_t>(step.layout().offset(step.layout().lm_head))] = NAN;  // poisons every logit row -> loss and grads
  step.upload_parameters(stream, w);
  step.upload_batch(stream, test::random_batch(spec, bs, 1));
  graph::EagerRegionRunner eager;
  step.enqueue_step(stream, eager);
  StepScalars s = step.download_scalars(stream);
  EXPECT_EQ(s.loss_nonfinite, 1);
  EXPECT_EQ(s.grad_nonfinite, 1);
  EXPECT_FALSE(std::isfinite(s.loss));
  step.upload_parameters(stream, good);
  step.enqueue_step(stream, eager);
  s = step.download_scalars(stream);
  EXPECT_EQ(s.loss_nonfinite, 0);
  EXPECT_EQ(s.grad_nonfinite, 0);
  EXPECT_TRUE(std::isfinite(s.loss));
}

TEST(TrainStepGpu, RegionsAndMemoryPlan) {
  const ModelSpec spec = gpu_tiny_spec();
  TrainStep step(spec, batch_spec(2), test_optimizer(), 5);
  // One entry per layer of the stack: attention and MLP layers alternate (2 GPT blocks = 4 layers).
  const auto regions = step.layer_regions();
  ASSERT_EQ(regions.size(), static_cast<size_t>(2 * spec.num_layers));
  for (size_t l = 0; l < regions.size(); ++l) {
    EXPECT_EQ(regions[l].layer, static_cast<int>(l));
    EXPECT_EQ(regions[l].modules, std::vector<graph::Module>{l % 2 == 0 ? graph::Module::attn : graph::Module::mlp});
  }
  // Saved activations per (layer, module): what recompute could drop.
  ASSERT_EQ(step.saved_activations().size(), regions.size());
  for (const SavedActivationBytes& saved : step.saved_activations()) EXPECT_GT(saved.bytes, 0u);
  const cuda::MemoryLayout& layout = step.arena().layout();
  const size_t n = static_cast<size_t>(step.layout().total());
  EXPECT_GE(layout.range(cuda::MemoryCategory::parameters).bytes(), n * 2);
  EXPECT_GE(layout.range(cuda::MemoryCategory::main_weights).bytes(), n * 4);
  EXPECT_GE(layout.range(cuda::MemoryCategory::gradients).bytes(), n * 4);
  EXPECT_GE(layout.range(cuda::MemoryCategory::optimizer_state).bytes(), n * 8);
  EXPECT_GE(layout.range(cuda::MemoryCategory::workspaces).bytes(), kernels::Blas::kWorkspaceBytes);
  EXPECT_GE(layout.range(cuda::MemoryCategory::inputs).bytes(), static_cast<size_t>(step.tokens_per_step()) * 12);
  std::printf("%s\n", step.memory_breakdown().c_str());

  // The plan `validate` prints without a device is the arena's: every buffer it declares is in the
  // arena with the same size (the CUB sort scratch, sized by the device, aside), and the arena has only
  // device-sized workspaces besides.
  const cuda::MemoryPlan cpu = TrainStep::plan_memory(spec, batch_spec(2));
  size_t matched = 0;
  for (const auto& a : layout.allocations) {
    const cuda::MemorySlot slot = cpu.find(a.name);
    if (!slot.valid()) {
      EXPECT_EQ(a.category, cuda::MemoryCategory::workspaces) << a.name << " is missing from the CPU plan";
      continue;
    }
    ++matched;
    EXPECT_EQ(cpu.at(slot).category, a.category) << a.name;
    if (a.name != "workspace.embedding_backward") EXPECT_EQ(cpu.at(slot).bytes, a.bytes) << a.name;
  }
  EXPECT_EQ(matched, cpu.size());
  EXPECT_TRUE(step.arena().layout().allocations.size() > cpu.size());  // workspace.cudnn_attention
}

}  // namespace
}  // namespace sg::model
