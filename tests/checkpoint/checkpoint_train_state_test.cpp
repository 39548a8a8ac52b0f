// train_state.json verifies itself: it carries the CRC-32C of its own content, so that a bit flip or a
// hand edit of any field (the RNG state, the iteration, the data position, an extra) is refused instead of
// resuming a run that no longer continues bit for bit. Files written before the checksum still load.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/train_state.h"
#include "core/error.h"

namespace sg::checkpoint {
namespace {

TrainState sample_state() {
  TrainState s;
  s.iteration = 1234;
  s.data_position = {4936, {1000, 3936}};
  s.rng_state = {0xd2, 0x04, 0x00, 0xab};
  s.config_hash = config_hash_hex("model:\n  hidden_size: 32\n");
  s.extra = {{"loss_scale", 1.0}, {"run_id", "run-1"}};
  return s;
}

// The file as saved: indented, with file_checksums added and sealed again, as checkpoint_dir.cpp writes it.
std::string saved_text(const TrainState& s) {
  nlohmann::json j = s.to_json();
  j["file_checksums"] = {{"model.safetensors", {{"bytes", 100}, {"crc32", "0badf00d"}}}};
  seal_train_state_json(j);
  return j.dump(2) + "\n";
}

// The message of the sg::Error that from_json throws on `text`, or "" when it loads.
std::string load_error(const std::string& text) {
  try {
    TrainState::from_json(nlohmann::json::parse(text), "ckpt/iter_0001234/train_state.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_refused_as_corrupt(const std::string& text) {
  const std::string e = load_error(text);
  EXPECT_NE(e.find("train state ckpt/iter_0001234/train_state.json is corrupt"), std::string::npos) << e;
  EXPECT_NE(e.find("CRC-32C"), std::string::npos) << e;
  EXPECT_NE(e.find("Load an earlier iteration's folder"), std::string::npos) << e;
}

TEST(TrainStateChecksum, RoundTripIsEqualAndIndentationDoesNotMatter) {
  const TrainState s = sample_state();
  const nlohmann::json j = s.to_json();
  ASSERT_TRUE(j.contains(kStateChecksumKey)) << j.dump(2);
  EXPECT_EQ(j[kStateChecksumKey].get<std::string>().size(), 8u);
  EXPECT_EQ(TrainState::from_json(nlohmann::json::parse(j.dump()), "x"), s);
  EXPECT_EQ(TrainState::from_json(nlohmann::json::parse(j.dump(4)), "x"), s);
  EXPECT_EQ(load_error(saved_text(s)), "");
  // Sealing is deterministic: resealing a sealed file changes nothing.
  nlohmann::json again = j;
  seal_train_state_json(again);
  EXPECT_EQ(again, j);
}

TEST(TrainStateChecksum, AFlippedRngStateDigitIsRefusedNamingTheFile) {
  const std::string text = saved_text(sample_state());
  const std::string field = "\"rng_state\": \"d204";
  const size_t at = text.find(field);
  ASSERT_NE(at, std::string::npos) << text;
  std::string edited = text;
  edited[at + field.size() - 4] = '1';  // d2 -> 12: still valid hex of the right length
  expect_refused_as_corrupt(edited);
  // The message gives both checksums: the recorded one first.
  const nlohmann::json recorded = nlohmann::json::parse(text);
  const std::string e = load_error(edited);
  EXPECT_NE(e.find("records the CRC-32C " + recorded[kStateChecksumKey].get<std::string>()), std::string::npos) << e;
  EXPECT_THROW(TrainState::from_json(nlohmann::json::parse(edited), "x"), CorruptTrainState);
}

TEST(TrainStateChecksum, EveryEditedFieldIsRefused) {
  const std::string text = saved_text(sample_state());
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> edits = {
      {"iteration", [](nlohmann::json& j) { j["iteration"] = 1235; }},
      {"consumed_samples", [](nlohmann::json& j) { j["consumed_samples"] = 4937; }},
      {"data_position.consumed_samples", [](nlohmann::json& j) { j["data_position"]["consumed_samples"] = 4937; }},
      {"data_position.per_source", [](nlohmann::json& j) { j["data_position"]["per_source"][1] = 3937; }},
      {"config_hash", [](nlohmann::json& j) { j["config_hash"] = config_hash_hex("other"); }},
      {"extra.loss_scale", [](nlohmann::json& j) { j["extra"]["loss_scale"] = 2.0; }},
      {"extra.run_id", [](nlohmann::json& j) { j["extra"]["run_id"] = "run-2"; }},
      {"extra, a key added", [](nlohmann::json& j) { j["extra"]["scheduler"] = 1; }},
      {"file_checksums", [](nlohmann::json& j) { j["file_checksums"]["model.safetensors"]["bytes"] = 101; }},
      {"a key added", [](nlohmann::json& j) { j["note"] = "hand edit"; }},
      {"iteration as a float", [](nlohmann::json& j) { j["iteration"] = 1234.0; }},
      {"the checksum itself", [](nlohmann::json& j) { j[kStateChecksumKey] = "00000000"; }},
      {"the checksum not a string", [](nlohmann::json& j) { j[kStateChecksumKey] = 0; }},
  };
  for (const auto& [what, edit] : edits) {
    SCOPED_TRACE(what);
    nlohmann::json j = nlohmann::json::parse(text);
    edit(j);
    expect_refused_as_corrupt(j.dump(2));
  }
}

// Checkpoints saved before train states carried their checksum (format version 1) must still load (unverified).
TEST(TrainStateChecksum, AVersion1FileWithoutTheChecksumKeyLoads) {
  const TrainState s = sample_state();
  nlohmann::json j = nlohmann::json::parse(saved_text(s));
  j.erase(kStateChecksumKey);
  j["version"] = 1;
  EXPECT_EQ(load_error(j.dump(2)), "");
  EXPECT_EQ(TrainState::from_json(j, "x"), s);
  // A version-1 file with the key is verified as ever (saved from 2026-12-04 until version 2).
  nlohmann::json sealed_v1 = nlohmann::json::parse(saved_text(s));
  sealed_v1["version"] = 1;
  seal_train_state_json(sealed_v1);
  EXPECT_EQ(load_error(sealed_v1.dump(2)), "");
  sealed_v1["iteration"] = 1235;
  expect_refused_as_corrupt(sealed_v1.dump(2));
}

// Without the key, a version-1 file with file_checksums may be one from 2026-12-01..04 or a later one with the key
// removed: it loads, saying its own fields are unverified. One from before file checksums says nothing here
// (checkpoint_dir.cpp warns that its files cannot be verified).
TEST(TrainStateChecksum, AVersion1FileWithFileChecksumsButNoChecksumLoadsWithAWarning) {
  nlohmann::json j = nlohmann::json::parse(saved_text(sample_state()));
  j.erase(kStateChecksumKey);
  j["version"] = 1;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(load_error(j.dump(2)), "");
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("warning: train state ckpt/iter_0001234/train_state.json has no \"crc32c\""),
            std::string::npos)
      << warned;
  EXPECT_NE(warned.find("load unverified"), std::string::npos) << warned;
  j.erase("file_checksums");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(load_error(j.dump(2)), "");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

// Every file this build saves is version 2 and sealed: without the key, it was removed, and with it every field's
// check, so the file is refused as edited (it loaded unverified, silently).
TEST(TrainStateChecksum, AVersion2FileWithoutTheChecksumKeyIsRefusedAsEdited) {
  const TrainState s = sample_state();
  EXPECT_EQ(s.to_json()["version"], 2);
  for (const bool with_file_checksums : {true, false}) {
    SCOPED_TRACE(with_file_checksums ? "with file_checksums" : "without file_checksums");
    nlohmann::json j = nlohmann::json::parse(saved_text(s));
    j.erase(kStateChecksumKey);
    if (!with_file_checksums) j.erase("file_checksums");
    const std::string e = load_error(j.dump(2));
    EXPECT_NE(e.find("train state ckpt/iter_0001234/train_state.json has no \"crc32c\" key"), std::string::npos)
        << e;
    EXPECT_NE(e.find("the file was edited after the save"), std::string::npos) << e;
    EXPECT_NE(e.find("Load the previous iteration's folder"), std::string::npos) << e;
    EXPECT_THROW(TrainState::from_json(j, "x"), CorruptTrainState);
    // Also with another field edited, which the key would have caught.
    j["iteration"] = 1235;
    EXPECT_THROW(TrainState::from_json(j, "x"), CorruptTrainState);
  }
}

TEST(TrainStateChecksum, OtherVersionsAreRefusedNamingTheOnesThisBuildReads) {
  for (const int version : {0, 3}) {
    nlohmann::json j = nlohmann::json::parse(saved_text(sample_state()));
    j["version"] = version;
    const std::string e = load_error(j.dump(2));
    EXPECT_NE(e.find("unsupported \"version\" " + std::to_string(version) + " (this build reads versions 1 to 2)"),
              std::string::npos)
        << e;
  }
}

// Found with tests/fuzz/checkpoint_folder_fuzz.cpp's harness: a "format" that is no string made j.value("format", "")
// throw nlohmann's type_error, which escaped checkpoint.load instead of the error naming the file.
TEST(TrainStateChecksum, AFormatThatIsNoStringIsNotAStepgraphTrainState) {
  for (const char* format : {"1", "null", "[\"stepgraph-train-state\"]", "{}"}) {
    nlohmann::json j = nlohmann::json::parse(saved_text(sample_state()));
    j["format"] = nlohmann::json::parse(format);
    const std::string e = load_error(j.dump(2));
    EXPECT_NE(e.find("train state ckpt/iter_0001234/train_state.json: \"format\" is not \"stepgraph-train-state\""),
              std::string::npos)
        << format << ": " << e;
  }
}

// The field checks still name what is wrong in a file that is sealed but wrong (another tool wrote it).
TEST(TrainStateChecksum, ASealedFileIsStillCheckedFieldByField) {
  nlohmann::json j = sample_state().to_json();
  j["rng_state"] = "abc";
  seal_train_state_json(j);
  const std::string e = load_error(j.dump());
  EXPECT_NE(e.find("odd length"), std::string::npos) << e;
  EXPECT_EQ(e.find("is corrupt"), std::string::npos) << e;
}

}  // namespace
}  // namespace sg::checkpoint
