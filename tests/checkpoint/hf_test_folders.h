#pragma once
// Hugging Face folders for the import tests: one written by tests/checkpoint/make_hf_llama.py (numpy + safetensors;
// scripts/setup.sh installs both), or a config.json alone written from JSON; and the check of what a folder loads.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/hf_import.h"
#include "checkpoint/safetensors.h"
#include "process_util.h"
#include "test_dir.h"

namespace sg::test {

// DIR written by make_hf_llama.py with `args`; the script's failure fails the test with its output.
inline std::string make_hf_llama_folder(const std::string& dir, const std::string& args) {
  const auto r = run_command("python3 " + std::string(STEPGRAPH_SOURCE_DIR) +
                             "/tests/checkpoint/make_hf_llama.py --out " + shell_quote(dir) + " " + args + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir;
}

// DIR/NAME holding `config` as its config.json.
inline std::string write_hf_config(const ScratchDir& dir, const std::string& name, const nlohmann::json& config) {
  const std::string folder = dir.str() + "/" + name;
  std::filesystem::create_directories(folder);
  std::ofstream(folder + "/config.json") << config.dump(2);
  return folder;
}

// FOLDER's weights (WeightSource::model) read into `layout`: every tensor equals make_hf_llama.py's
// expected.safetensors (the model's names, whatever the files hold), bit for bit.
inline void expect_loaded_weights_equal_expected(const std::string& folder, const model::ModelLayout& layout) {
  std::vector<float> weights;
  checkpoint::load_hf_weights(folder, layout, weights, checkpoint::WeightSource::model, "test");
  const checkpoint::SafetensorsFile expected(folder + "/expected.safetensors");
  for (const auto& t : layout.tensors()) {
    const auto* e = expected.find(t.name);
    ASSERT_NE(e, nullptr) << t.name;
    ASSERT_EQ(std::memcmp(weights.data() + t.offset, e->data, static_cast<size_t>(t.numel) * 4), 0) << t.name;
  }
}

}  // namespace sg::test
