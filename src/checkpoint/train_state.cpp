#include "checkpoint/train_state.h"

#include "checkpoint/file_checksum.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"

namespace sg::checkpoint {

namespace {
constexpr const char* kFormat = "stepgraph-train-state";
// Version 2 (this build writes it): the file must carry its own checksum (kStateChecksumKey). Version 1 files
// were written before that rule: the ones from before the checksum existed have none and still load.
constexpr int kVersion = 2;
constexpr int kOldestVersion = 1;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The checksum of everything in `j` but the checksum itself, as eight hex digits. The compact dump of the
// parsed object is canonical (sorted keys, shortest round-trip numbers), so indentation does not matter
// but any change of a value, a key or a number's type does.
std::string content_checksum(const nlohmann::json& j) {
  nlohmann::json rest = j;
  rest.erase(kStateChecksumKey);
  const std::string text = rest.dump();
  return crc32_hex(crc32c(text.data(), text.size()));
}
}  // namespace

void seal_train_state_json(nlohmann::json& j) {
  j[kStateChecksumKey] = content_checksum(j);
}

std::string bytes_to_hex(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::vector<uint8_t> hex_to_bytes(std::string_view hex) {
  if (hex.size() % 2 != 0) throw Error(strprintf("hex string has odd length %zu", hex.size()));
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      throw Error(strprintf("hex string has a non-hex character near offset %zu", 2 * i));
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return out;
}

std::string config_hash_hex(std::string_view canonical_config) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : canonical_config) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return strprintf("%016llx", static_cast<unsigned long long>(h));
}

nlohmann::json TrainState::to_json() const {
  nlohmann::json j{
      {"format", kFormat},
      {"version", kVersion},
      {"iteration", iteration},
      {"consumed_samples", data_position.consumed_samples},
      {"data_position", data_position.to_json()},
      {"rng_state", bytes_to_hex(rng_state)},
      {"config_hash", config_hash},
      {"extra", extra},
  };
  seal_train_state_json(j);
  return j;
}

TrainState TrainState::from_json(const nlohmann::json& j, const std::string& source) {
  auto fail = [&](const std::string& what) -> Error {
    return Error(strprintf("train state %s: %s", source.c_str(), what.c_str()));
  };
  if (!j.is_object()) throw fail("not a JSON object");
  // Compared as JSON: j.value("format", "") would throw nlohmann's type_error for a "format" that is no string.
  if (!j.contains("format") || j["format"] != kFormat) {
    throw fail(strprintf("\"format\" is not \"%s\"; not a stepgraph train state", kFormat));
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() < kOldestVersion ||
      j["version"].get<int64_t>() > kVersion) {
    throw fail(strprintf("unsupported \"version\" %s (this build reads versions %d to %d)",
                         j.contains("version") ? j["version"].dump().c_str() : "(missing)", kOldestVersion,
                         kVersion));
  }
  // Before any field is read, so that a damaged field is reported as damage, not as a strange value.
  if (!j.contains(kStateChecksumKey)) {
    if (j["version"].get<int64_t>() >= 2) {
      // Every version-2 file was written with the key: without it, someone removed it, and with it the check of
      // every field below (an edited iteration, data position or RNG state would load as if saved).
      throw CorruptTrainState(
          strprintf("train state %s has no \"%s\" key, the CRC-32C of its own content that every train state of "
                    "version 2 is saved with: the file was edited after the save (the key removed), so its iteration, "
                    "data position and RNG state cannot be trusted to continue the run bit for bit.",
                    source.c_str(), kStateChecksumKey),
          "Load the previous iteration's folder (iter_NNNNNNN), or restore the file from a backup");
    }
    // Version 1: written before train states carried the key (from 2026-12-01 to 2026-12-04 with file_checksums,
    // before that without), or one of the later version-1 files with the key removed; the two cannot be told
    // apart, and old checkpoints must still load: read unverified (file_checksums still cover the other files),
    // and said so when the file is of the kind that might have had it.
    if (j.contains("file_checksums")) {
      log::warn(strprintf("train state %s has no \"%s\" (the CRC-32C of its own content): saved by a stepgraph "
                          "from before train states carried it, or edited with the key removed; its iteration, data "
                          "position and RNG state load unverified",
                          source.c_str(), kStateChecksumKey));
    }
  } else {
    const nlohmann::json& recorded_json = j[kStateChecksumKey];
    const std::string recorded = recorded_json.is_string() ? recorded_json.get<std::string>() : recorded_json.dump();
    const std::string actual = content_checksum(j);
    if (recorded != actual) {
      throw CorruptTrainState(
          strprintf("train state %s is corrupt: it records the CRC-32C %s of its content (\"%s\", written at save) "
                    "but its content has CRC-32C %s (a bit flip or an edit: a resume from a changed iteration, data "
                    "position, RNG state or extra would not continue the run bit for bit).",
                    source.c_str(), recorded.c_str(), kStateChecksumKey, actual.c_str()),
          "Load an earlier iteration's folder (iter_NNNNNNN), or restore the file from a backup");
    }
  }
  for (const char* key : {"iteration", "data_position", "rng_state", "config_hash"}) {
    if (!j.contains(key)) throw fail(strprintf("missing key \"%s\"", key));
  }
  if (!j["iteration"].is_number_integer() || j["iteration"].get<int64_t>() < 0) {
    throw fail("\"iteration\" must be a non-negative integer, got " + j["iteration"].dump());
  }
  if (!j["rng_state"].is_string() || !j["config_hash"].is_string()) {
    throw fail("\"rng_state\" and \"config_hash\" must be strings");
  }
  TrainState s;
  s.iteration = j["iteration"].get<int64_t>();
  try {
    s.data_position = data::DataPosition::from_json(j["data_position"]);
    s.rng_state = hex_to_bytes(j["rng_state"].get<std::string>());
  } catch (const Error& e) {
    throw fail(e.what());
  }
  s.config_hash = j["config_hash"].get<std::string>();
  if (j.contains("extra")) s.extra = j["extra"];
  return s;
}

}  // namespace sg::checkpoint
