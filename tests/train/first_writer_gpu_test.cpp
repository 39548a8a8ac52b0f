// Issue 13: the first writer of each GEMM-written gradient overwrites it in the step's first microbatch,
// and the step zeroes only the rest of the gradient buffer (model/gradient_zeroing.h). The buffer is
// POISONED with NaN before every step, so anything neither zeroed nor overwritten shows up. With two
// microbatches and dropout, in eager mode, as one whole-step graph (local) and with every module's
// regions graphed (transformer_engine: the first microbatch's backward regions are graphs of their own),
// for a dense Llama (untied and tied), an MoE model with a shared expert and a hybrid Mamba model: every
// step's loss and gradients, and the final weights and Adam moments, equal those of a reference run that
// zeroes the whole buffer and only adds (TrainStepOptions::zero_all_gradients, eager) — bit for bit but
// for the sign of zero (A B + 1 * 0 against A B with beta 0). Every model also with bf16 main gradients
// (ddp.grad_reduce_in_fp32=false; a bf16 NaN poison is the same 0xFFFF bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "graph/scope_plan.h"
#include "model/init.h"
#include "model/step_modes.h"
#include "model/tiny_model.h"
#include "model/train_step.h"

namespace sg::train {
namespace {

constexpr int kSteps = 3;
constexpr uint64_t kSeed = 4242;

using Mode = test::StepMode;
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::eager: return "eager";
    case Mode::whole_step_graph: return "local (whole step)";
    case Mode::region_graphs: return "transformer_engine (regions)";
  }
  return "?";
}

struct Case {
  const char* name;
  const char* recipe;
  std::vector<std::string> overrides;
  std::vector<graph::GraphScope> scopes;  // the regions graphed in Mode::region_graphs
  bool bf16_grads = false;                // ddp.grad_reduce_in_fp32=false: the main gradients in bf16
};

model::ModelSpec model_of(const Case& c) {
  std::vector<std::string> overrides = {"model.attention_dropout=0.1", "model.hidden_dropout=0.1"};
  overrides.insert(overrides.end(), c.overrides.begin(), c.overrides.end());
  const config::ValidationReport report = config::validate(config::load_config(c.recipe, overrides));
  EXPECT_TRUE(report.ok()) << (report.violations.empty() ? "" : config::format_violation(report.violations[0]));
  return config::model_spec(report.config);
}

model::BatchSpec two_microbatches() {
  model::BatchSpec b;
  b.micro_batch_size = 2;
  b.num_microbatches = 2;
  return b;
}

model::OptimizerSpec optimizer(const Case& c) {
  model::OptimizerSpec o;
  o.main_grad_dtype = c.bf16_grads ? kernels::FloatDtype::bf16 : kernels::FloatDtype::fp32;
  o.lr = 1e-3;
  o.lr_warmup_iters = 1;
  o.weight_decay = 0.1;
  o.clip_grad = 1.0;
  return o;
}

struct StepRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> grads;  // after each step
  std::vector<float> master, exp_avg, exp_avg_sq;
};

StepRun run(const Case& c, Mode mode, bool zero_all) {
  const model::ModelSpec spec = model_of(c);
  const model::BatchSpec batch = two_microbatches();
  model::TrainStepOptions options;
  options.zero_all_gradients = zero_all;
  cuda::Stream stream;
  model::TrainStep step(spec, batch, optimizer(c), kSeed, options);
  step.upload_parameters(stream, model::initial_parameters(step.layout(), kSeed));
  test::StepModeDriver driver(step, mode, c.scopes);
  const size_t grad_bytes = static_cast<size_t>(step.data_parallel().padded_params) * step.gradients().element_bytes();
  StepRun r;
  for (int i = 0; i < kSteps; ++i) {
    step.upload_batch(stream, test::random_batch(spec, batch, 900 + static_cast<uint64_t>(i)));
    SG_CUDA_CHECK(cudaMemsetAsync(step.gradients().data, 0xFF, grad_bytes, stream));  // NaN everywhere
    driver.run(stream);
    r.losses.push_back(step.download_scalars(stream).loss);
    r.grads.push_back(step.download_grads(stream));
  }
  r.master = step.download_main_weights(stream);
  r.exp_avg = step.download_exp_avg(stream);
  r.exp_avg_sq = step.download_exp_avg_sq(stream);
  if (mode == Mode::region_graphs) {
    // The graphed backward regions twice (first microbatch, the other one), the forward ones once.
    const graph::ScopePlan& plan = driver.scope_plan();
    EXPECT_EQ(plan.num_microbatches, batch.num_microbatches);
    EXPECT_EQ(driver.registry().size(), static_cast<size_t>(plan.num_graphs()));
    EXPECT_GT(plan.num_graphs(), static_cast<int>(plan.graphed_regions.size()));
  }
  return r;
}

// Equal as numbers (+0 == -0), every one finite: NaN from the poison never compares equal.
void expect_same_values(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::isfinite(got[i]) && got[i] == want[i])) {
      if (bad++ == 0) first_bad = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ, first at " << first_bad << " ("
                     << got[first_bad] << " vs " << want[first_bad] << ")";
}

class FirstWriterGpu : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_P(FirstWriterGpu, PoisonedGradientsTrainLikeZeroingTheWholeBufferInEveryMode) {
  const Case& c = GetParam();
  const StepRun reference = run(c, Mode::eager, /*zero_all=*/true);
  for (const float loss : reference.losses) ASSERT_TRUE(std::isfinite(loss)) << loss;
  for (const auto& g : reference.grads) {
    for (const float x : g) ASSERT_TRUE(std::isfinite(x)) << "the reference zeroes the whole buffer";
  }
  for (const Mode mode : {Mode::eager, Mode::whole_step_graph, Mode::region_graphs}) {
    SCOPED_TRACE(mode_name(mode));
    const StepRun r = run(c, mode, /*zero_all=*/false);
    ASSERT_EQ(r.losses.size(), reference.losses.size());
    for (size_t i = 0; i < r.losses.size(); ++i) {
      EXPECT_EQ(std::memcmp(&r.losses[i], &reference.losses[i], sizeof(float)), 0)
          << "step " << i + 1 << ": loss " << r.losses[i] << " vs " << reference.losses[i];
      expect_same_values(r.grads[i], reference.grads[i], "gradients after step " + std::to_string(i + 1));
    }
    expect_same_values(r.master, reference.master, "final fp32 weights");
    expect_same_values(r.exp_avg, reference.exp_avg, "final exp_avg");
    expect_same_values(r.exp_avg_sq, reference.exp_avg_sq, "final exp_avg_sq");
    std::printf("%-16s %-30s equal to zeroing everything; loss %.5f -> %.5f\n", c.name, mode_name(mode),
                r.losses.front(), r.losses.back());
  }
}

using graph::GraphScope;
INSTANTIATE_TEST_SUITE_P(
    Models, FirstWriterGpu,
    ::testing::Values(Case{"llama", "llama/tiny", {}, {GraphScope::attn, GraphScope::mlp}},
                      Case{"llama_tied",
                           "llama/tiny",
                           {"model.share_embeddings_and_output_weights=true"},
                           {GraphScope::attn, GraphScope::mlp}},
                      Case{"llama_bf16_grads", "llama/tiny", {}, {GraphScope::attn, GraphScope::mlp}, true},
                      Case{"llama_tied_bf16_grads",
                           "llama/tiny",
                           {"model.share_embeddings_and_output_weights=true"},
                           {GraphScope::attn, GraphScope::mlp},
                           true},
                      Case{"moe_shared",
                           "moe/tiny_moe",
                           {"model.moe_shared_expert_intermediate_size=256"},
                           {GraphScope::attn, GraphScope::moe}},
                      Case{"moe_shared_bf16_grads",
                           "moe/tiny_moe",
                           {"model.moe_shared_expert_intermediate_size=256"},
                           {GraphScope::attn, GraphScope::moe},
                           true},
                      Case{"hybrid", "hybrid/tiny_hybrid", {}, {GraphScope::attn, GraphScope::mamba, GraphScope::mlp}},
                      Case{"hybrid_bf16_grads",
                           "hybrid/tiny_hybrid",
                           {},
                           {GraphScope::attn, GraphScope::mamba, GraphScope::mlp},
                           true}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace sg::train
