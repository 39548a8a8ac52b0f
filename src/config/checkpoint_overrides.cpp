#include "config/checkpoint_overrides.h"

namespace sg::config {

std::vector<std::string> start_over_overrides(const CheckpointConfig& checkpoint) {
  std::vector<std::string> keys = {"checkpoint.overwrite=true"};
  if (checkpoint.auto_resume) keys.push_back("checkpoint.auto_resume=false");
  if (checkpoint.load) keys.push_back("checkpoint.load=null");
  return keys;
}

std::vector<std::string> continue_overrides(const CheckpointConfig& checkpoint) {
  if (checkpoint.auto_resume) return {};
  std::vector<std::string> keys = {"checkpoint.auto_resume=true"};
  if (checkpoint.load) keys.push_back("checkpoint.load=null");
  return keys;
}

}  // namespace sg::config
