// The CPU training step: the loss falls on a repeated batch, and the step's bookkeeping (lr schedule,
// clipping, step counter, RNG offset, weight decay boundary) is what the GPU step must reproduce.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/bf16_bits.h"
#include "core/error.h"
#include "model/cpu_model.h"
#include "model/dropout_sites.h"
#include "reference/grad_norm.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

TEST(CpuTrainStep, LossFallsOnARepeatedBatch) {
  ModelSpec spec = test::tiny_model_spec();
  spec.hidden_dropout = 0.1f;
  spec.attention_dropout = 0.1f;
  BatchSpec batch_spec;
  batch_spec.micro_batch_size = 2;
  batch_spec.num_microbatches = 2;
  OptimizerSpec opt;
  opt.lr = 1e-2;
  opt.lr_warmup_iters = 3;
  opt.weight_decay = 0.01;
  opt.clip_grad = 1.0;
  CpuModel model(spec, batch_spec, opt, rng::RngState{1234, 0});
  const HostBatch batch = test::random_batch(spec, batch_spec, 3);
  std::vector<float> losses;
  for (int step = 0; step < 30; ++step) {
    const CpuStepResult r = model.train_step(batch);
    ASSERT_TRUE(r.loss_finite && r.grads_finite) << "step " << step;
    losses.push_back(r.loss);
    std::printf("step %2d loss %.4f grad_norm %.4f clip %.4f lr %.5f\n", step + 1, r.loss, r.grad_norm, r.clip_coef,
                r.lr);
  }
  // Random targets over 32 tokens start at ~ln 32 = 3.47; memorising 32 counted tokens drives it well down.
  EXPECT_NEAR(losses.front(), std::log(32.0), 0.2);
  EXPECT_LT(losses.back(), 0.6 * losses.front());
  EXPECT_LT(losses[29], losses[19]);
  EXPECT_LT(losses[19], losses[9]);
  EXPECT_EQ(model.steps_done(), 30);
  EXPECT_EQ(model.rng_state().offset, 30u * 2u * kRngOffsetPerMicrobatch);
}

TEST(CpuTrainStep, ScheduleClippingAndDecayBoundary) {
  const ModelSpec spec = test::tiny_model_spec();
  BatchSpec batch_spec;
  batch_spec.micro_batch_size = 2;
  OptimizerSpec opt;
  opt.lr = 1e-3;
  opt.lr_warmup_iters = 4;
  opt.clip_grad = 1e-3;  // far below the gradient norm: clipping is active
  opt.weight_decay = 0.5;
  CpuModel model(spec, batch_spec, opt, rng::RngState{5, 0});
  const HostBatch batch = test::random_batch(spec, batch_spec, 9);
  const std::vector<float> w0 = model.weights();

  const CpuStepResult r = model.train_step(batch);
  EXPECT_FLOAT_EQ(r.lr, 1e-3f * 1.0f / 4.0f);  // warmup: lr * (step + 1) / warmup_iters
  EXPECT_GT(r.grad_norm, 1e-3f);
  EXPECT_FLOAT_EQ(r.clip_coef, 1e-3f / (r.grad_norm + 1e-6f));
  EXPECT_NEAR(ref::grad_global_norm(model.grads().data(), static_cast<int64_t>(model.grads().size())), r.grad_norm,
              1e-6 * r.grad_norm);
  // First Adam step (t = 1): the bias-corrected moments are g' and g'^2 (g' = clip_coef * g), so the
  // update is lr * g' / (|g'| + eps), plus decoupled decay lr * wd * w on matrices only; gaps stay 0.
  const auto& layout = model.layout();
  const auto& w1 = model.weights();
  int64_t moved = 0;
  for (const auto& t : layout.tensors()) {
    for (int64_t i = 0; i < t.numel; ++i) {
      const size_t at = static_cast<size_t>(t.offset + i);
      const double g = static_cast<double>(model.grads()[at]) * r.clip_coef;
      const double decayed = t.weight_decay ? w0[at] * (1.0 - r.lr * 0.5) : w0[at];
      const double expected = decayed - r.lr * g / (std::abs(g) + opt.adam_eps);
      // 1e-4 lr for the fp32 arithmetic of the update plus 2 ulp of the weight for its rounding; a missing
      // or misplaced weight decay (lr * wd * w = 1.25e-4 w) would be far outside.
      ASSERT_NEAR(w1[at], expected, 1e-4 * r.lr + 2.4e-7 * std::abs(expected)) << t.name << "[" << i << "]";
      if (g != 0.0) ++moved;
    }
  }
  EXPECT_GT(moved, layout.num_parameters() / 2);
  const CpuStepResult r2 = model.train_step(batch);
  EXPECT_FLOAT_EQ(r2.lr, 1e-3f * 2.0f / 4.0f);
  EXPECT_EQ(model.steps_done(), 2);
}

TEST(CpuTrainStep, LoadStateResumesBitExactly) {
  ModelSpec spec = test::tiny_model_spec();
  spec.hidden_dropout = 0.1f;
  spec.attention_dropout = 0.1f;
  BatchSpec batch_spec;
  batch_spec.micro_batch_size = 2;
  batch_spec.num_microbatches = 2;
  const OptimizerSpec opt;
  CpuModel a(spec, batch_spec, opt, rng::RngState{8, 0});
  for (uint64_t i = 0; i < 2; ++i) a.train_step(test::random_batch(spec, batch_spec, 40 + i));
  CpuModel b(spec, batch_spec, opt, rng::RngState{8, 0});
  b.load_state(a.weights(), a.exp_avg(), a.exp_avg_sq(), a.steps_done(), a.rng_state());
  const HostBatch next = test::random_batch(spec, batch_spec, 42);
  const CpuStepResult ra = a.train_step(next);
  const CpuStepResult rb = b.train_step(next);
  EXPECT_EQ(ra.loss, rb.loss);
  EXPECT_EQ(ra.lr, rb.lr);
  EXPECT_EQ(a.weights(), b.weights());
  EXPECT_EQ(a.exp_avg_sq(), b.exp_avg_sq());
  EXPECT_EQ(b.steps_done(), 3);
  EXPECT_THROW(b.load_state(std::vector<float>(3), a.exp_avg(), a.exp_avg_sq(), 0, a.rng_state()), Error);
}

// One microbatch of two sequences, and an lr that moves the tiny model in a few steps: the storage-dtype tests.
BatchSpec two_sequences() {
  BatchSpec b;
  b.micro_batch_size = 2;
  return b;
}
OptimizerSpec fast_optimizer() {
  OptimizerSpec o;
  o.lr = 1e-2;
  return o;
}

// bf16 main gradients (ddp.grad_reduce_in_fp32=false): after a step's backward every gradient is the fp32
// model's rounded to bf16 (one microbatch: one rounding), the update reads those, and training still learns.
TEST(CpuTrainStep, Bf16MainGradientsAreTheFp32GradientsRounded) {
  OptimizerSpec bf16_opt = fast_optimizer();
  bf16_opt.main_grad_dtype = kernels::FloatDtype::bf16;
  const ModelSpec spec = test::tiny_model_spec();
  CpuModel fp32(spec, two_sequences(), fast_optimizer(), rng::RngState{3, 0});
  CpuModel bf16(spec, two_sequences(), bf16_opt, rng::RngState{3, 0});
  const HostBatch batch = test::random_batch(spec, two_sequences(), 12);
  const CpuStepResult r32 = fp32.train_step(batch);
  const CpuStepResult r16 = bf16.train_step(batch);
  EXPECT_EQ(r32.loss, r16.loss);  // the forward does not see the gradients' dtype
  int64_t rounded = 0;
  for (size_t i = 0; i < fp32.grads().size(); ++i) {
    ASSERT_EQ(bf16.grads()[i], round_to_bf16(fp32.grads()[i])) << i;
    rounded += bf16.grads()[i] != fp32.grads()[i];
  }
  EXPECT_GT(rounded, 0);
  EXPECT_NE(fp32.weights(), bf16.weights());
  EXPECT_NEAR(r16.grad_norm, r32.grad_norm, 1e-2 * r32.grad_norm);
  std::vector<float> losses;
  for (int step = 0; step < 20; ++step) losses.push_back(bf16.train_step(batch).loss);
  EXPECT_LT(losses.back(), 0.8f * losses.front());
}

// bf16 moments (optimizer.exp_avg_dtype / exp_avg_sq_dtype): the first update, from zero moments, is
// the fp32-moment model's bit for bit, with the moments rounded to bf16; the next reads the rounded moments.
// A checkpoint's fp32 moments load rounded, and training still learns.
TEST(CpuTrainStep, Bf16MomentsRoundTheStoredMomentsOnly) {
  const ModelSpec spec = test::tiny_model_spec();
  const BatchSpec batch_spec = two_sequences();
  OptimizerSpec bf16_opt = fast_optimizer();
  bf16_opt.exp_avg_dtype = kernels::FloatDtype::bf16;
  bf16_opt.exp_avg_sq_dtype = kernels::FloatDtype::bf16;
  CpuModel fp32(spec, batch_spec, fast_optimizer(), rng::RngState{3, 0});
  CpuModel bf16(spec, batch_spec, bf16_opt, rng::RngState{3, 0});
  const HostBatch batch = test::random_batch(spec, batch_spec, 11);
  fp32.train_step(batch);
  bf16.train_step(batch);
  EXPECT_EQ(fp32.weights(), bf16.weights());
  int64_t rounded = 0;
  for (size_t i = 0; i < fp32.exp_avg().size(); ++i) {
    ASSERT_EQ(bf16.exp_avg()[i], round_to_bf16(fp32.exp_avg()[i])) << i;
    ASSERT_EQ(bf16.exp_avg_sq()[i], round_to_bf16(fp32.exp_avg_sq()[i])) << i;
    rounded += bf16.exp_avg()[i] != fp32.exp_avg()[i];
  }
  EXPECT_GT(rounded, 0);
  fp32.train_step(batch);
  bf16.train_step(batch);
  EXPECT_NE(fp32.weights(), bf16.weights());

  CpuModel loaded(spec, batch_spec, bf16_opt, rng::RngState{3, 0});
  loaded.load_state(fp32.weights(), fp32.exp_avg(), fp32.exp_avg_sq(), fp32.steps_done(), fp32.rng_state());
  for (size_t i = 0; i < fp32.exp_avg().size(); ++i) {
    ASSERT_EQ(loaded.exp_avg()[i], round_to_bf16(fp32.exp_avg()[i])) << i;
  }
  std::vector<float> losses;
  for (int step = 0; step < 20; ++step) losses.push_back(bf16.train_step(batch).loss);
  EXPECT_LT(losses.back(), 0.8f * losses.front());
}

// "*-" repeated n times is the same model as n GPT blocks: from the same flat weights (their inits
// differ by Megatron's output-projection scaling, model/stack.h), with both dropouts on and two
// microbatches, they train to bitwise equal losses, gradients, weights and moments.
TEST(CpuTrainStep, HybridStarDashPatternTrainsBitwiseLikeGptBlocks) {
  ModelSpec gpt_spec = test::tiny_model_spec();
  gpt_spec.hidden_dropout = 0.1f;
  gpt_spec.attention_dropout = 0.1f;
  ModelSpec hybrid_spec = gpt_spec;
  hybrid_spec.hybrid_layer_pattern = "*-*-";
  hybrid_spec.num_layers = 4;
  BatchSpec batch_spec;
  batch_spec.micro_batch_size = 2;
  batch_spec.num_microbatches = 2;
  OptimizerSpec opt;
  opt.lr = 1e-2;
  CpuModel gpt(gpt_spec, batch_spec, opt, rng::RngState{77, 0});
  CpuModel hybrid(hybrid_spec, batch_spec, opt, rng::RngState{77, 0});
  ASSERT_EQ(gpt.weights().size(), hybrid.weights().size());
  EXPECT_NE(gpt.weights(), hybrid.weights());  // 1/sqrt(2 num_layers): num_layers 2 vs 4
  hybrid.weights() = gpt.weights();
  for (uint64_t step = 0; step < 5; ++step) {
    const HostBatch batch = test::random_batch(gpt_spec, batch_spec, 300 + step);
    const CpuStepResult a = gpt.train_step(batch);
    const CpuStepResult b = hybrid.train_step(batch);
    EXPECT_EQ(a.loss, b.loss) << "step " << step + 1;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << step + 1;
    EXPECT_EQ(gpt.grads(), hybrid.grads()) << "step " << step + 1;
  }
  EXPECT_EQ(gpt.weights(), hybrid.weights());
  EXPECT_EQ(gpt.exp_avg(), hybrid.exp_avg());
  EXPECT_EQ(gpt.exp_avg_sq(), hybrid.exp_avg_sq());
  // The same pattern as GPT blocks of one letter each would be another model: it is not accepted.
  ModelSpec mismatched = hybrid_spec;
  mismatched.num_layers = 2;
  EXPECT_THROW(CpuModel(mismatched, batch_spec, opt, rng::RngState{77, 0}), Error);
}

}  // namespace
}  // namespace sg::model
