// `stepgraph generate` on the GPU refuses a KV cache larger than the GPU before it reads the weights: the
// decoder is planned and allocated first (model/gpu_decoder.h), so a large model's minutes of reading are not
// spent on a request that cannot run. Checked through the real binary with a weights file cut in half: the
// error is the device-memory one, naming generate's flags, not the damaged file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cuda/device.h"
#include "process_util.h"

namespace {

namespace fs = std::filesystem;
using sg::test::run_command;
using sg::test::shell_quote;
using sg::test::stepgraph_source_dir;

TEST(GenerateDeviceMemoryGpu, ACacheTooLargeForTheGpuIsRefusedBeforeTheWeightsAreRead) {
  if (sg::cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  const fs::path dir = fs::temp_directory_path() / ("sg_generate_memory_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string folder = (dir / "hf").string();
  const auto made = run_command("python3 " + shell_quote(stepgraph_source_dir()) +
                                "/tests/checkpoint/make_hf_llama.py --vocab 320 --hidden 64 --heads 4 --kv-heads 2 "
                                "--ffn 96 --layers 2 --out " +
                                shell_quote(folder) + " 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string weights = folder + "/model.safetensors";
  fs::resize_file(weights, fs::file_size(weights) / 2);
  const std::string generate =
      shell_quote(sg::test::stepgraph_binary()) + " generate " + shell_quote(folder) + " --prompt-tokens 1,2,3";

  // 2e9 positions of 2 layers' K and V (2 groups of 16, bf16): 512 GB, more than any GPU has.
  auto r = run_command(generate + " --max-new-tokens 2000000000 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the GPU decoder needs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--max-new-tokens"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("model.safetensors"), std::string::npos) << "the weights were read first:\n" << r.output;

  // A request that fits reaches the weights, and their damage is named.
  r = run_command(generate + " --max-new-tokens 4 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

}  // namespace
