// A saved checkpoint folder read by the `safetensors` Python package (numpy backend) through
// tests/checkpoint/safetensors_read.py: Hugging Face Llama names, shapes, dtype, values. python3 with
// safetensors and numpy is a requirement (scripts/setup.sh installs them): if missing, this FAILS.
#include <gtest/gtest.h>

#include "process_util.h"
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "checkpoint_test_util.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/hf_config.h"

namespace sg::checkpoint {
namespace {

using RunResult = sg::test::CommandResult;

RunResult run_script(const std::string& folder, const std::string& args = "") {
  return sg::test::run_command(std::string("python3 ") + STEPGRAPH_SOURCE_DIR + "/tests/checkpoint/safetensors_read.py " +
                           sg::test::shell_quote(folder) + " " + args + " 2>&1");
}

// Saves a training checkpoint whose model tensors come from `tensor_spec` while
// config.json describes `config_spec` (equal unless a test wants a mismatch).
std::string save(const std::string& dir, const model::ModelSpec& config_spec,
                 const model::ModelSpec& tensor_spec, TensorDtype dtype, float salt,
                 bool corrupt_one_value = false) {
  auto model = test::tiny_llama_tensors(tensor_spec, dtype, salt);
  if (corrupt_one_value) model.bytes[3][0] ^= 0x40;
  const auto main = test::tiny_llama_tensors(tensor_spec, TensorDtype::F32, salt);
  const auto m1 = test::tiny_llama_tensors(tensor_spec, TensorDtype::F32, 0.5f);
  const auto m2 = test::tiny_llama_tensors(tensor_spec, TensorDtype::F32, 0.75f);
  TrainingCheckpoint c;
  c.model = model.refs();
  c.model_config =
      hf_llama_config(config_spec, dtype == TensorDtype::BF16 ? "bfloat16" : "float32");
  c.main_params = main.refs();
  c.exp_avg = m1.refs();
  c.exp_avg_sq = m2.refs();
  c.state.iteration = 3;
  return save_checkpoint(dir, 3, training_checkpoint_contents(c));
}

TEST(SafetensorsPython, ReadsF32CheckpointWithLlamaNames) {
  test::ScratchDir dir("py_f32");
  const auto spec = test::tiny_llama_spec(false);
  const std::string folder = save(dir.str(), spec, spec, TensorDtype::F32, 0.0f);
  const RunResult r = run_script(folder, "--pattern");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok: 21 tensors"), std::string::npos)
      << r.output;  // 1 + 2*9 + norm + lm_head
}

TEST(SafetensorsPython, ReadsBf16TiedCheckpoint) {
  test::ScratchDir dir("py_bf16");
  const auto spec = test::tiny_llama_spec(true);
  const std::string folder = save(dir.str(), spec, spec, TensorDtype::BF16, 2.0f);
  const RunResult r = run_script(folder, "--pattern --salt 2.0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok: 20 tensors"), std::string::npos) << r.output;
}

TEST(SafetensorsPython, ScriptCatchesWrongShapesNamesAndValues) {
  // Controls: the script must fail when the checkpoint is wrong, or its success above means
  // nothing.
  test::ScratchDir dir("py_bad");
  const auto spec = test::tiny_llama_spec(false);
  auto wide = spec;
  wide.ffn_hidden_size = 80;
  RunResult r = run_script(save(dir.str() + "/shape", spec, wide, TensorDtype::F32, 0.0f));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("shape model.layers.0.mlp.gate_proj.weight: file (80, 32)"),
            std::string::npos)
      << r.output;

  auto tied = spec;
  tied.share_embeddings_and_output_weights = true;
  r = run_script(save(dir.str() + "/names", spec, tied, TensorDtype::F32, 0.0f));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("missing lm_head.weight"), std::string::npos) << r.output;

  r = run_script(save(dir.str() + "/values", spec, spec, TensorDtype::F32, 0.0f, true),
                 "--pattern");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("values "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace sg::checkpoint
