#pragma once
// The non-tensor part of a checkpoint (train_state.json): where training stands, so a resumed run
// continues bit for bit — the step, the data position, the RNG state and a hash of the config the
// run was started with (a resume with a different config is refused or warned by the trainer).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/blended_dataset.h"

namespace sg::checkpoint {

// train_state.json carries the CRC-32C of its own content under this key: the CRC of the canonical compact
// serialisation (keys sorted, as nlohmann::json orders them) of every other key, file_checksums included. The
// per-file CRCs cannot cover the file that records them, and a changed iteration, data position, RNG state or
// extra would otherwise load and silently break the bit-for-bit resume.
inline constexpr const char* kStateChecksumKey = "crc32c";

// Sets j[kStateChecksumKey] to the checksum of the rest of `j` (call again after any change to `j`).
void seal_train_state_json(nlohmann::json& j);

// Thrown by TrainState::from_json when the recorded checksum does not match the content. what() ends with
// generic advice; `finding` is the message without it, for a caller that knows better advice (the folder's).
class CorruptTrainState : public Error {
 public:
  CorruptTrainState(const std::string& finding, const std::string& advice)
      : Error(finding + " " + advice), finding(finding) {}
  std::string finding;
};

struct TrainState {
  int64_t iteration = 0;             // steps completed
  data::DataPosition data_position;  // includes consumed_samples
  std::vector<uint8_t> rng_state;    // opaque bytes (e.g. the Philox RngState), stored as hex
  std::string config_hash;           // config_hash_hex() of the run's canonical config
  nlohmann::json extra = nlohmann::json::object();  // trainer-owned extras (scheduler, loss scale)

  nlohmann::json to_json() const;  // version 2, sealed (seal_train_state_json)
  // `source` names the file in error messages. A file whose checksum does not match is refused
  // (CorruptTrainState), and so is a version-2 file without the key (it was removed: an edit). A version-1 file
  // without it (written before train states carried it) is read unverified, with a warning when it has
  // file_checksums (it may also be a later version-1 file with the key removed).
  static TrainState from_json(const nlohmann::json& j, const std::string& source);
  bool operator==(const TrainState&) const = default;
};

// FNV-1a 64 of the canonical config text, as 16 hex digits.
std::string config_hash_hex(std::string_view canonical_config);

std::string bytes_to_hex(const std::vector<uint8_t>& bytes);
std::vector<uint8_t> hex_to_bytes(std::string_view hex);  // sg::Error on odd length / non-hex

}  // namespace sg::checkpoint
