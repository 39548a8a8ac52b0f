#pragma once
// A configuration as text of one line a key ("optimizer.lr = 0.0003", every key of config_keys() in emission
// order), and the keys two such texts differ in: how data-parallel ranks check that they run one configuration
// (train/distributed_run.h) without sending each other a Config.
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace sg::config {

// "KEY = VALUE\n" for every key, VALUE as format_value prints it.
std::string key_value_lines(const Config& config);

struct KeyDifference {
  std::string key;
  std::string a, b;  // the values; "(no such key)" where a text lacks the key (another stepgraph version)
};

// The keys whose values differ between two key_value_lines texts, in a's order, then b's keys a lacks.
std::vector<KeyDifference> key_differences(std::string_view a, std::string_view b);

}  // namespace sg::config
