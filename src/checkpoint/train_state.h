#pragma once
// The non-tensor part of a checkpoint (train_state.json): where training stands, so a resumed run
// continues bit for bit — the step, the data position, the RNG state and a hash of the config the
// run was started with (a resume with a different config is refused or warned by the trainer).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "data/blended_dataset.h"

namespace sg::checkpoint {

struct TrainState {
  int64_t iteration = 0;             // steps completed
  data::DataPosition data_position;  // includes consumed_samples
  std::vector<uint8_t> rng_state;    // opaque bytes (e.g. the Philox RngState), stored as hex
  std::string config_hash;           // config_hash_hex() of the run's canonical config
  nlohmann::json extra = nlohmann::json::object();  // trainer-owned extras (scheduler, loss scale)

  nlohmann::json to_json() const;
  // `source` names the file in error messages.
  static TrainState from_json(const nlohmann::json& j, const std::string& source);
  bool operator==(const TrainState&) const = default;
};

// FNV-1a 64 of the canonical config text, as 16 hex digits.
std::string config_hash_hex(std::string_view canonical_config);

std::string bytes_to_hex(const std::vector<uint8_t>& bytes);
std::vector<uint8_t> hex_to_bytes(std::string_view hex);  // sg::Error on odd length / non-hex

}  // namespace sg::checkpoint
