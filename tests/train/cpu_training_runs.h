#pragma once
// Shared by the CPU trainer tests: a one-layer llama/tiny the CPU trains in milliseconds a step on mock data,
// train() run on the CPU with its stderr captured and its error kept, and a run's metrics.jsonl read back.
#include <gtest/gtest.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "graph/registry.h"
#include "train/trainer.h"

namespace sg::test {

// `extra` overrides (later ones win).
inline config::Config one_layer_cpu_config(const std::vector<std::string>& extra) {
  std::vector<std::string> o = {
      "model.num_layers=1",          "model.hidden_size=64",        "model.ffn_hidden_size=128",
      "model.num_attention_heads=2", "model.num_query_groups=2",    "model.seq_length=32",
      "dataset.seq_length=32",       "model.vocab_size=256",        "train.micro_batch_size=2",
      "train.global_batch_size=2",   "scheduler.lr_warmup_iters=1", "scheduler.lr_decay_iters=100",
      "logger.log_interval=1000"};
  o.insert(o.end(), extra.begin(), extra.end());
  return config::load_config("llama/tiny", o);
}

struct CpuRunOutcome {
  train::TrainSummary summary;
  std::string error;  // what train() threw, "" when it returned
  std::string log;    // its stderr
};

// Trains `c` on the CPU backend (options.force_cpu); a stop request is cleared before and after.
inline CpuRunOutcome train_on_cpu(const config::Config& c, train::TrainOptions options) {
  options.force_cpu = true;
  CpuRunOutcome r;
  graph::clear_stop_request();
  testing::internal::CaptureStderr();
  try {
    r.summary = train::train(c, options);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.log = testing::internal::GetCapturedStderr();
  graph::clear_stop_request();
  return r;
}

// A loss as metrics.jsonl prints it (%.9g): equal text, the same float.
inline std::string printed_as_metrics(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

// One JSON object per line of a JSON-lines file (metrics.jsonl).
inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

}  // namespace sg::test
