// CpuModel::evaluate, the CPU twin of TrainStep::enqueue_eval: forward only with dropout off (Megatron's
// model.eval()), and nothing the training reads changes — weights, moments, step counter, RNG offset —
// so interleaving evaluations leaves a training run's losses bit for bit unchanged.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "model/cpu_model.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }
bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}
bool same_bits(const TokenLossSums& a, const TokenLossSums& b) {
  return same_bits(a.loss, b.loss) && same_bits(a.tokens, b.tokens);
}

struct EvalSetup {
  ModelSpec spec = test::tiny_model_spec();
  BatchSpec batch;
  OptimizerSpec opt;
  EvalSetup() {
    spec.hidden_dropout = 0.2f;
    spec.attention_dropout = 0.2f;
    batch.micro_batch_size = 2;
    batch.num_microbatches = 2;
    opt.lr = 1e-2;
  }
};

TEST(CpuEval, IsTheLossWithDropoutOffAndChangesNothing) {
  const EvalSetup s;
  CpuModel model(s.spec, s.batch, s.opt, rng::RngState{77, 0});
  const HostBatch train = test::random_batch(s.spec, s.batch, 1);
  const HostBatch valid = test::random_batch(s.spec, s.batch, 2);
  model.train_step(train);

  const std::vector<float> weights = model.weights(), m = model.exp_avg(), v = model.exp_avg_sq();
  const rng::RngState rng = model.rng_state();
  const int64_t steps = model.steps_done();
  const TokenLossSums eval = model.evaluate(valid);
  EXPECT_EQ(model.weights(), weights);
  EXPECT_EQ(model.exp_avg(), m);
  EXPECT_EQ(model.exp_avg_sq(), v);
  EXPECT_EQ(model.rng_state().offset, rng.offset);
  EXPECT_EQ(model.steps_done(), steps);
  EXPECT_TRUE(same_bits(model.evaluate(valid), eval));  // deterministic
  // The token count is the loss mask's sum, and the loss sum a positive sum of cross-entropies.
  double mask_sum = 0.0;
  for (const float w : valid.loss_mask) mask_sum += static_cast<double>(w);
  EXPECT_EQ(eval.tokens, mask_sum);
  EXPECT_GT(eval.loss, 0.0);

  // The same weights in a model without dropout give the same sums: dropout was off.
  ModelSpec no_dropout = s.spec;
  no_dropout.hidden_dropout = no_dropout.attention_dropout = 0.0f;
  CpuModel plain(no_dropout, s.batch, s.opt, rng);
  plain.load_state(weights, m, v, steps, rng);
  TokenLossSums plain_sums;
  plain.compute_loss(valid, rng.offset, &plain_sums);
  EXPECT_TRUE(same_bits(plain_sums, eval));
  // ... and dropout does change the loss of this model, so the comparison above means something.
  TokenLossSums dropout_sums;
  model.compute_loss(valid, rng.offset, &dropout_sums);
  EXPECT_FALSE(same_bits(dropout_sums.loss, eval.loss));
}

TEST(CpuEval, InterleavedEvaluationsLeaveTrainingLossesBitwiseEqual) {
  const EvalSetup s;
  CpuModel a(s.spec, s.batch, s.opt, rng::RngState{5, 0});
  CpuModel b(s.spec, s.batch, s.opt, rng::RngState{5, 0});
  const HostBatch valid = test::random_batch(s.spec, s.batch, 99);
  for (int step = 0; step < 6; ++step) {
    const HostBatch batch = test::random_batch(s.spec, s.batch, 10 + static_cast<uint64_t>(step));
    const CpuStepResult ra = a.train_step(batch);
    const CpuStepResult rb = b.train_step(batch);
    ASSERT_TRUE(same_bits(ra.loss, rb.loss)) << "step " << step;
    ASSERT_TRUE(same_bits(ra.grad_norm, rb.grad_norm)) << "step " << step;
    b.evaluate(valid);
  }
  EXPECT_EQ(a.weights(), b.weights());
}

}  // namespace
}  // namespace sg::model
