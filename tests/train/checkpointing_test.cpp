// train/checkpointing.h's resume_data_position, without a run: a data position that the loader refuses (counts
// that do not add up, as a damaged or hand-edited train_state.json of the self-checksum-less version 1 can hold)
// is an error naming that file and the way on, not the loader's bare message.
#include "train/checkpointing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "core/strings.h"
#include "data/blended_dataset.h"
#include "test_util.h"

namespace sg::train {
namespace {

TEST(ResumeDataPosition, ARefusedPositionNamesTheTrainStateFile) {
  data::DataLoader loader({.mock = true, .seq_length = 16, .vocab_size = 64});
  ASSERT_EQ(loader.num_sources(), 1u);
  LoadedCheckpoint loaded;
  loaded.path = "/runs/ckpt/iter_0000002";
  loaded.position = {.consumed_samples = 16, .per_source = {17}};
  const std::string message = test::thrown_message([&] { resume_data_position(loaded, loader); });
  EXPECT_NE(message.find("/runs/ckpt/iter_0000002/train_state.json: data position is inconsistent: per-source "
                         "counts sum to 17 but consumed_samples is 16"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("checkpoint.pretrained_checkpoint=/runs/ckpt/iter_0000002"), std::string::npos) << message;
  loaded.position = {.consumed_samples = 16, .per_source = {16}};
  resume_data_position(loaded, loader);  // a consistent one is taken
}

// The hash train_state.json records for a configuration is what it was before the validation section existed
// (eval_interval and eval_iters were train keys; a build of 360464d wrote these two), so checkpoints saved then resume
// as the same configuration, and it depends on no evaluation key.
TEST(CanonicalConfigHash, IsTheOneSavedBeforeTheValidationSectionAndIgnoresEvaluation) {
  const struct {
    const char* recipe;
    const char* hash;
  } saved[] = {{"llama/tiny", "fba5d025e3d9d565"}, {"hybrid/tiny_hybrid_moe", "faae870788f1a349"}};
  for (const auto& s : saved) {
    for (const std::vector<std::string>& evaluation :
         {std::vector<std::string>{},
          {"validation.eval_interval=1", "validation.eval_iters=3", "validation.start_eval_at_iter=2"},
          {"validation.skip_train=true"}}) {
      std::vector<std::string> overrides = {"train.train_iters=1", "scheduler.lr_decay_iters=100"};
      overrides.insert(overrides.end(), evaluation.begin(), evaluation.end());
      const config::ValidationReport report = config::validate(config::load_config(s.recipe, overrides));
      ASSERT_TRUE(report.ok()) << s.recipe;
      EXPECT_EQ(canonical_config_hash(report.config), s.hash) << s.recipe << " " << join(evaluation, " ");
    }
  }
  // The weight-decay schedule Bridge's recipes set is its decay: hashed as that optimizer.weight_decay (and at
  // optimizer.weight_decay's own value, as the configuration without the keys).
  const auto hash = [](std::vector<std::string> more) {
    more.insert(more.end(), {"train.train_iters=1", "scheduler.lr_decay_iters=100"});
    return canonical_config_hash(config::validate(config::load_config("llama/tiny", more)).config);
  };
  EXPECT_EQ(hash({"scheduler.start_weight_decay=0.1", "scheduler.end_weight_decay=0.1"}), "fba5d025e3d9d565");
  EXPECT_EQ(hash({"scheduler.start_weight_decay=0.033", "scheduler.end_weight_decay=0.033"}),
            hash({"optimizer.weight_decay=0.033"}));
  EXPECT_NE(hash({"optimizer.weight_decay=0.033"}), "fba5d025e3d9d565");
  EXPECT_EQ(hash({"tokenizer.use_tokenizer_vocab_size=true"}), "fba5d025e3d9d565");  // no tokenizer: no effect
  // Bridge's newer lengths hash as the schedule they make (llama/tiny: a 5-step warmup).
  EXPECT_EQ(hash({"scheduler.lr_warmup_iters=0", "scheduler.lr_warmup_fraction=0.05"}), "fba5d025e3d9d565");
  EXPECT_EQ(hash({"scheduler.lr_decay_iters=null", "scheduler.max_steps=100"}), "fba5d025e3d9d565");
  EXPECT_EQ(hash({"train.num_epochs=null"}), "fba5d025e3d9d565");
  // Bridge's mixed_precision section: bf16_mixed is what stepgraph trains.
  EXPECT_EQ(hash({"mixed_precision=bf16_mixed"}), "fba5d025e3d9d565");
  // Sample-based lengths hash as the steps they make (llama/tiny: global batch 4, a 5-step warmup).
  EXPECT_EQ(canonical_config_hash(
                config::validate(
                    config::load_config(
                        "llama/tiny", {"train.train_iters=null", "train.train_samples=4", "scheduler.lr_warmup_iters=0",
                                       "scheduler.lr_warmup_samples=20", "scheduler.lr_decay_samples=400"}))
                    .config),
            "fba5d025e3d9d565");
  // A setting the training depends on changes it.
  EXPECT_NE(canonical_config_hash(config::validate(config::load_config("llama/tiny", {"train.train_iters=1",
                                                                                      "scheduler.lr_decay_iters=100",
                                                                                      "optimizer.lr=0.5"}))
                                      .config),
            "fba5d025e3d9d565");
}

// llama/tiny with `overrides`, validated (it must be valid), hashed.
std::string validated_tiny_hash(const std::vector<std::string>& overrides) {
  const config::ValidationReport report = config::validate(config::load_config("llama/tiny", overrides));
  EXPECT_TRUE(report.ok()) << join(overrides, " ");
  return canonical_config_hash(report.config);
}

// Megatron-Bridge keys accepted without effect (config/bridge_inert_keys.h), in every section that has them, and
// Bridge's spellings of the moments' dtypes leave the hash as it is: a resume may add or drop them.
TEST(CanonicalConfigHash, IgnoresBridgeKeysWithoutEffectInEverySection) {
  const auto hash = [](std::vector<std::string> more) {
    more.insert(more.end(), {"train.train_iters=1", "scheduler.lr_decay_iters=100"});
    return validated_tiny_hash(more);
  };
  EXPECT_EQ(
      hash({"model.context_parallel_size=1", "train.manual_gc=true", "optimizer.bf16=true",
            "scheduler.override_opt_param_scheduler=true", "dataset.num_workers=8", "checkpoint.ckpt_format=torch_dist",
            "logger.log_throughput=true", "rng.data_parallel_random_init=false",
            "rerun_state_machine.rerun_mode=disabled", "ddp.average_in_collective=true"}),
      "fba5d025e3d9d565");
  EXPECT_EQ(hash({"optimizer.exp_avg_dtype=torch.float32", "optimizer.exp_avg_sq_dtype=float32"}), "fba5d025e3d9d565");
}

// A weight decay that changes during the run hashes as its resolved start and end (a null one is
// optimizer.weight_decay, which has no other effect then), its style and its length: train_iters, left out of the
// hash otherwise, changes every step's decay.
TEST(CanonicalConfigHash, AChangingWeightDecayHashesItsScheduleAndLength) {
  const auto hash = [](std::vector<std::string> more) {
    more.insert(more.begin(), {"train.train_iters=10", "scheduler.lr_decay_iters=100"});
    return validated_tiny_hash(more);
  };
  const std::string linear = hash({"scheduler.start_weight_decay=0.0", "scheduler.end_weight_decay=0.1",
                                   "scheduler.weight_decay_incr_style=linear"});
  EXPECT_NE(linear, "fba5d025e3d9d565");
  EXPECT_NE(linear, hash({"optimizer.weight_decay=0.0"}));
  EXPECT_EQ(linear, hash({"optimizer.weight_decay=0.1", "scheduler.start_weight_decay=0.0",
                          "scheduler.weight_decay_incr_style=linear"}));
  EXPECT_NE(linear, hash({"scheduler.start_weight_decay=0.0", "scheduler.end_weight_decay=0.1",
                          "scheduler.weight_decay_incr_style=cosine"}));
  EXPECT_NE(linear, hash({"scheduler.start_weight_decay=0.0", "scheduler.end_weight_decay=0.2",
                          "scheduler.weight_decay_incr_style=linear"}));
  EXPECT_NE(linear, hash({"train.train_iters=20", "scheduler.start_weight_decay=0.0", "scheduler.end_weight_decay=0.1",
                          "scheduler.weight_decay_incr_style=linear"}));
  // Constant: the run's length still makes no difference.
  EXPECT_EQ(hash({"train.train_iters=20"}), hash({}));
}

// The lr schedule's shape keys hash where they shape it, and as before them where they do not (a checkpoint saved
// before they existed resumes as the same configuration): the warmup's start under a warmup, WSD's annealing under
// WSD, by its steps (from samples too).
TEST(CanonicalConfigHash, TheLrScheduleHashesWhatShapesIt) {
  const auto hash = [](std::vector<std::string> more) {
    more.insert(more.begin(), {"train.train_iters=10", "scheduler.lr_decay_iters=100"});
    return validated_tiny_hash(more);
  };
  const std::string before = hash({});
  EXPECT_EQ(before, "fba5d025e3d9d565");
  EXPECT_EQ(hash({"scheduler.lr_wsd_decay_style=cosine", "scheduler.lr_wsd_decay_iters=20"}), before);
  EXPECT_EQ(hash({"scheduler.lr_warmup_iters=0", "scheduler.lr_warmup_init=1e-5"}),
            hash({"scheduler.lr_warmup_iters=0"}));
  EXPECT_NE(hash({"scheduler.lr_warmup_init=1e-5"}), before);  // llama/tiny warms up over 5 steps
  EXPECT_EQ(hash({"scheduler.lr_warmup_init=-0.0"}), before);
  const std::string wsd = hash({"scheduler.lr_decay_style=WSD", "scheduler.lr_wsd_decay_iters=20"});
  EXPECT_NE(wsd, before);
  EXPECT_NE(wsd, hash({"scheduler.lr_decay_style=WSD", "scheduler.lr_wsd_decay_iters=30"}));
  EXPECT_NE(wsd, hash({"scheduler.lr_decay_style=WSD", "scheduler.lr_wsd_decay_iters=20",
                       "scheduler.lr_wsd_decay_style=linear"}));
  EXPECT_NE(hash({"scheduler.lr_decay_style=inverse-square-root"}), before);
  // In samples (global batch 4): the steps they make.
  EXPECT_EQ(validated_tiny_hash({"train.train_iters=null", "train.train_samples=40", "scheduler.lr_warmup_iters=0",
                                 "scheduler.lr_warmup_samples=20", "scheduler.lr_decay_samples=400",
                                 "scheduler.lr_decay_style=WSD", "scheduler.lr_wsd_decay_samples=80"}),
            validated_tiny_hash({"train.train_iters=10", "scheduler.lr_decay_iters=100", "scheduler.lr_decay_style=WSD",
                                 "scheduler.lr_wsd_decay_iters=20"}));
}

// model.qk_layernorm was an inert Bridge key, accepted only false: false hashes as before it (a checkpoint saved then
// resumes), true as a different model.
TEST(CanonicalConfigHash, QkLayernormHashesOnlyWhenOn) {
  const std::string before = validated_tiny_hash({"train.train_iters=10", "scheduler.lr_decay_iters=100"});
  EXPECT_EQ(before, "fba5d025e3d9d565");
  EXPECT_EQ(validated_tiny_hash({"train.train_iters=10", "scheduler.lr_decay_iters=100", "model.qk_layernorm=false"}),
            before);
  EXPECT_NE(validated_tiny_hash({"train.train_iters=10", "scheduler.lr_decay_iters=100", "model.qk_layernorm=true"}),
            before);
}

// model.moe_shared_expert_gate was an inert Bridge key too: false hashes as before it, true (with a shared expert) as a
// different model.
TEST(CanonicalConfigHash, SharedExpertGateHashesOnlyWhenOn) {
  const auto moe_hash = [](const std::vector<std::string>& more) {
    std::vector<std::string> overrides = {"train.train_iters=1", "scheduler.lr_decay_iters=100"};
    overrides.insert(overrides.end(), more.begin(), more.end());
    return canonical_config_hash(config::validate(config::load_config("hybrid/tiny_hybrid_moe", overrides)).config);
  };
  EXPECT_EQ(moe_hash({}), "faae870788f1a349");  // saved before the key existed
  EXPECT_EQ(moe_hash({"model.moe_shared_expert_gate=false"}), moe_hash({}));
  EXPECT_NE(moe_hash({"model.moe_shared_expert_gate=true"}), moe_hash({}));
}

// model.rotary_percent was a Bridge key accepted at 1.0 without effect: the whole head hashes as before it.
TEST(CanonicalConfigHash, RotaryPercentHashesOnlyWherePartial) {
  const auto hash = [](const std::vector<std::string>& more) {
    std::vector<std::string> overrides = {"train.train_iters=1", "scheduler.lr_decay_iters=100"};
    overrides.insert(overrides.end(), more.begin(), more.end());
    return canonical_config_hash(config::validate(config::load_config("llama/tiny", overrides)).config);
  };
  EXPECT_EQ(hash({"model.rotary_percent=1"}), "fba5d025e3d9d565");  // saved before the key existed
  EXPECT_NE(hash({"model.rotary_percent=0.5"}), hash({}));
  EXPECT_NE(hash({"model.rotary_percent=0.5"}), hash({"model.rotary_percent=0.75"}));
}

// LongRoPE's keys hash as before they existed without its lists (its other two keys then shape nothing), and every
// one of them where the lists are set.
TEST(CanonicalConfigHash, LongRopeHashesOnlyWithItsLists) {
  const auto hash = [](const std::vector<std::string>& more) {
    std::vector<std::string> overrides = {"train.train_iters=1", "scheduler.lr_decay_iters=100"};
    overrides.insert(overrides.end(), more.begin(), more.end());
    return canonical_config_hash(config::validate(config::load_config("llama/tiny", overrides)).config);
  };
  EXPECT_EQ(hash({"model.longrope_original_max_position_embeddings=64", "model.longrope_attention_factor=1.5"}),
            "fba5d025e3d9d565");  // saved before the keys existed
  std::string ones = "1", twos = "2";
  for (int i = 1; i < 32; ++i) ones += ",1", twos += ",2";  // llama/tiny's heads of 64: 32 pairs
  const std::vector<std::string> lists = {"model.longrope_short_factor=" + ones, "model.longrope_long_factor=" + twos};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), lists.begin(), lists.end());
    return hash(more);
  };
  EXPECT_NE(with({}), hash({}));
  EXPECT_NE(with({"model.longrope_attention_factor=1.5"}), with({}));
  EXPECT_NE(with({"model.longrope_original_max_position_embeddings=64"}), with({}));
  EXPECT_NE(hash({"model.longrope_short_factor=" + twos, "model.longrope_long_factor=" + twos}), with({}));
}

}  // namespace
}  // namespace sg::train
