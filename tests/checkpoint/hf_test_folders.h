#pragma once
// Hugging Face folders for the import tests: one written by tests/checkpoint/make_hf_llama.py (numpy + safetensors;
// scripts/setup.sh installs both), or a config.json alone written from JSON.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

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

}  // namespace sg::test
