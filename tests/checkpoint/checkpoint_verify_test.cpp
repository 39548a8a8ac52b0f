// What a load verifies before it copies a byte (issue 17): per-file CRC-32 recorded in
// train_state.json at save, train_state.json's own CRC-32C, the iteration against the folder name, finite
// values; and what a save leaves behind when it fails (nothing), plus a `latest` that is not a file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/durable_io.h"
#include "checkpoint/file_checksum.h"
#include "checkpoint/finite_check.h"
#include "checkpoint/hf_config.h"
#include "checkpoint_test_util.h"
#include "core/error.h"

namespace sg::checkpoint {
namespace {

namespace fs = std::filesystem;

using test::Fixture;

// Loads `path` into fresh buffers filled with 0x11; returns the sg::Error message ("" when it loaded)
// and whether the buffers were left untouched.
struct LoadOutcome {
  std::string error;
  bool untouched = true;
};
LoadOutcome try_load(const std::string& path) {
  Fixture into(1);
  for (auto* t : {&into.model, &into.main_params, &into.exp_avg, &into.exp_avg_sq}) t->fill(0x11);
  LoadOutcome out;
  try {
    load_training_checkpoint(path, {into.model.dests(), into.main_params.dests(), into.exp_avg.dests(),
                                    into.exp_avg_sq.dests()});
  } catch (const Error& e) {
    out.error = e.what();
  }
  for (auto* t : {&into.model, &into.main_params, &into.exp_avg, &into.exp_avg_sq}) {
    for (const auto& b : t->bytes)
      for (const uint8_t v : b) out.untouched &= v == 0x11;
  }
  return out;
}

std::string read_all(const std::string& path) { return read_text_file(path); }

void write_all(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

TEST(FileChecksum, Crc32IsZlibsAndPythonsCrc32) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32_update(0, check.data(), check.size()), 0xcbf43926u);  // the CRC-32 check value
  EXPECT_EQ(crc32_hex(0xcbf43926u), "cbf43926");
  // Incremental equals one pass.
  EXPECT_EQ(crc32_update(crc32_update(0, check.data(), 4), check.data() + 4, 5), 0xcbf43926u);
  EXPECT_EQ(crc32_update(7, nullptr, 0), 7u);
}

TEST(CheckpointVerify, SaveRecordsEveryFilesSizeAndCrc) {
  test::ScratchDir dir("verify_record");
  const std::string folder = save_checkpoint(dir.str(), 5, Fixture(5).contents());
  const auto state = nlohmann::json::parse(read_all(folder + "/" + kTrainStateFile));
  ASSERT_TRUE(state.contains(kFileChecksumsKey)) << state.dump(2);
  const auto& sums = state[kFileChecksumsKey];
  for (const char* name : {kModelFile, kOptimizerMainParamsFile, kOptimizerExpAvgFile, kOptimizerExpAvgSqFile,
                           kConfigFile}) {
    ASSERT_TRUE(sums.contains(name)) << name;
    const FileDigest actual = file_digest(folder + "/" + name);
    EXPECT_EQ(sums[name]["bytes"].get<uint64_t>(), actual.bytes) << name;
    EXPECT_EQ(sums[name]["crc32"].get<std::string>(), crc32_hex(actual.crc32)) << name;
  }
  EXPECT_FALSE(sums.contains(kTrainStateFile));  // it holds them
  // ... and its own checksum, which covers them too: sealing the file as read changes nothing.
  ASSERT_TRUE(state.contains(kStateChecksumKey)) << state.dump(2);
  auto resealed = state;
  seal_train_state_json(resealed);
  EXPECT_EQ(resealed, state);
  EXPECT_EQ(try_load(dir.str()).error, "");
}

TEST(CheckpointVerify, ABitFlipIsRefusedNamingTheFile) {
  test::ScratchDir dir("verify_flip");
  const std::string folder = save_checkpoint(dir.str(), 5, Fixture(5).contents());
  const std::string victim = folder + "/" + kOptimizerExpAvgFile;
  std::string bytes = read_all(victim);
  bytes[bytes.size() - 100] ^= 0x04;  // one bit of a float in the last tensor: still finite, still valid
  write_all(victim, bytes);
  const LoadOutcome r = try_load(dir.str());
  EXPECT_NE(r.error.find(victim), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("is corrupt"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("CRC-32"), std::string::npos) << r.error;
  EXPECT_TRUE(r.untouched);
}

// config.json is not read to resume, but transformers reads it: its damage is refused like a tensor file's.
TEST(CheckpointVerify, EveryRecordedFileIsVerifiedNotOnlyTheTensors) {
  test::ScratchDir dir("verify_config");
  const std::string folder = save_checkpoint(dir.str(), 5, Fixture(5).contents());
  const std::string victim = folder + "/" + kConfigFile;
  std::string text = read_all(victim);
  text[text.size() / 2] = text[text.size() / 2] == 'x' ? 'y' : 'x';
  write_all(victim, text);
  const LoadOutcome r = try_load(dir.str());
  EXPECT_NE(r.error.find(victim), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("is corrupt"), std::string::npos) << r.error;
  EXPECT_TRUE(r.untouched);
}

TEST(CheckpointVerify, NonFiniteValuesAreRefusedNamingTheTensor) {
  test::ScratchDir dir("verify_nan");
  Fixture saved(5);
  // A NaN and an infinity in the second moment, saved with consistent checksums (another tool's
  // diverged run): the checksum passes, the finite check refuses.
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::memcpy(saved.exp_avg_sq.bytes[3].data() + 8, &nan, 4);
  std::memcpy(saved.exp_avg_sq.bytes[5].data(), &inf, 4);
  save_checkpoint(dir.str(), 5, saved.contents());
  const LoadOutcome r = try_load(dir.str());
  EXPECT_NE(r.error.find(kOptimizerExpAvgSqFile), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("non-finite"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("tensor " + saved.exp_avg_sq.names[3] + " element 2 is nan"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("2 non-finite values"), std::string::npos) << r.error;
  EXPECT_TRUE(r.untouched);
}

TEST(CheckpointVerify, IterationMustMatchTheFolderName) {
  // An intact checkpoint of iteration 3 in a folder renamed to iter_0000005.
  test::ScratchDir dir("verify_iteration");
  const std::string saved = save_checkpoint(dir.str(), 3, Fixture(3).contents());
  fs::rename(saved, dir.str() + "/" + iteration_dir_name(5));
  write_all(dir.str() + "/" + kLatestFile, "5\n");
  const LoadOutcome r = try_load(dir.str());
  EXPECT_NE(r.error.find("says iteration 3 but the folder is iter_0000005"), std::string::npos) << r.error;
  EXPECT_TRUE(r.untouched);
}

TEST(CheckpointVerify, ACheckpointWithoutChecksumsStillLoads) {
  // Saved by a stepgraph before checksums: loads (with a warning), still shape- and finite-checked.
  test::ScratchDir dir("verify_old");
  const std::string folder = save_checkpoint(dir.str(), 5, Fixture(5).contents());
  auto state = nlohmann::json::parse(read_all(folder + "/" + kTrainStateFile));
  state.erase(kFileChecksumsKey);
  state.erase(kStateChecksumKey);  // nor did the train state carry its own
  state["version"] = 1;             // the format version of those files
  write_all(folder + "/" + kTrainStateFile, state.dump(2));
  EXPECT_EQ(try_load(dir.str()).error, "");
  // A malformed checksum entry is refused, not ignored.
  state[kFileChecksumsKey] = {{kModelFile, {{"bytes", 1}, {"crc32", "xyz"}}}};
  write_all(folder + "/" + kTrainStateFile, state.dump(2));
  EXPECT_NE(try_load(dir.str()).error.find("malformed"), std::string::npos);
}

// train_state.json is not among the files it records: its own CRC-32C covers it. A flipped digit of the RNG
// state would otherwise resume with other dropout masks, and a changed iteration elsewhere in the data.
TEST(CheckpointVerify, AnEditedTrainStateIsRefusedNamingTheIterationBeforeIt) {
  test::ScratchDir dir("verify_state");
  save_checkpoint(dir.str(), 3, Fixture(3).contents());
  const std::string folder = save_checkpoint(dir.str(), 5, Fixture(5).contents());
  const std::string victim = folder + "/" + kTrainStateFile;
  const std::string good = read_all(victim);
  const std::string field = "\"rng_state\": \"";
  const size_t at = good.find(field);
  ASSERT_NE(at, std::string::npos) << good;
  std::string edited = good;
  char& digit = edited[at + field.size()];
  digit = digit == '0' ? '1' : '0';
  const std::string iteration = "\"iteration\": 5,";
  ASSERT_NE(good.find(iteration), std::string::npos) << good;
  std::string renumbered = good;
  renumbered.replace(good.find(iteration), iteration.size(), "\"iteration\": 6,");
  for (const std::string& text : {edited, renumbered}) {
    write_all(victim, text);
    const LoadOutcome r = try_load(dir.str());
    EXPECT_NE(r.error.find("train state " + victim + " is corrupt"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("CRC-32C"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("set checkpoint.load=" + dir.str() + "/" + iteration_dir_name(3)), std::string::npos)
        << r.error;
    EXPECT_TRUE(r.untouched);
  }
  write_all(victim, good);
  EXPECT_EQ(try_load(dir.str()).error, "");
}

// Removing the train state's own checksum used to turn its verification off: an edited field then loaded. A file
// this build saved (version 2) without it is refused as edited, with the way to continue from the iteration before.
TEST(CheckpointVerify, ATrainStateWithItsChecksumRemovedIsRefusedNamingTheIterationBeforeIt) {
  test::ScratchDir dir("verify_state_unsealed");
  save_checkpoint(dir.str(), 3, Fixture(3).contents());
  const std::string folder = save_checkpoint(dir.str(), 5, Fixture(5).contents());
  const std::string victim = folder + "/" + kTrainStateFile;
  const std::string good = read_all(victim);
  nlohmann::json state = nlohmann::json::parse(good);
  ASSERT_TRUE(state.contains(kFileChecksumsKey)) << good;
  state.erase(kStateChecksumKey);
  write_all(victim, state.dump(2));
  const LoadOutcome r = try_load(dir.str());
  EXPECT_NE(r.error.find("train state " + victim + " has no \"crc32c\" key"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("the file was edited after the save"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("set checkpoint.load=" + dir.str() + "/" + iteration_dir_name(3)), std::string::npos)
      << r.error;
  EXPECT_TRUE(r.untouched);
  write_all(victim, good);
  EXPECT_EQ(try_load(dir.str()).error, "");
}

// Found by tests/fuzz/checkpoint_folder_fuzz.cpp: a number past double's range made nlohmann::json::parse throw
// out_of_range, not parse_error, and it escaped the load as a foreign exception without the way to continue.
TEST(CheckpointVerify, ATrainStateNumberPastDoubleIsNotValidJson) {
  test::ScratchDir dir("verify_state_overflow");
  save_checkpoint(dir.str(), 3, Fixture(3).contents());
  const std::string folder = save_checkpoint(dir.str(), 5, Fixture(5).contents());
  const std::string victim = folder + "/" + kTrainStateFile;
  const std::string good = read_all(victim);
  const std::string iteration = "\"iteration\": 5,";
  ASSERT_NE(good.find(iteration), std::string::npos) << good;
  std::string overflowing = good;
  overflowing.replace(good.find(iteration), iteration.size(), "\"iteration\": 5e999,");
  write_all(victim, overflowing);
  const LoadOutcome r = try_load(dir.str());
  EXPECT_NE(r.error.find("train state " + victim + " is not valid JSON"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("5e999"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("set checkpoint.load=" + dir.str() + "/" + iteration_dir_name(3)), std::string::npos)
      << r.error;
  EXPECT_TRUE(r.untouched);
}

// A recorded name is a file inside the folder: "../x" or "/x" (an edit, resealed) would make the check read a file
// outside the checkpoint, and the load pass when that file happens to match.
TEST(CheckpointVerify, ARecordedNameOutsideTheFolderIsMalformed) {
  test::ScratchDir dir("verify_outside_name");
  const std::string folder = save_checkpoint(dir.str(), 5, Fixture(5).contents());
  const std::string outside = dir.str() + "/outside.bin";
  write_all(outside, "bytes outside the checkpoint");
  const FileDigest digest = file_digest(outside);
  const std::string victim = folder + "/" + kTrainStateFile;
  const std::string good = read_all(victim);
  for (const std::string& name : {std::string("../outside.bin"), outside, std::string("./") + kModelFile}) {
    nlohmann::json state = nlohmann::json::parse(good);
    state[kFileChecksumsKey][name] = {{"bytes", digest.bytes}, {"crc32", crc32_hex(digest.crc32)}};
    seal_train_state_json(state);
    write_all(victim, state.dump(2));
    const LoadOutcome r = try_load(dir.str());
    EXPECT_NE(r.error.find("is malformed (\"" + name + "\" is no file inside the checkpoint)"), std::string::npos)
        << name << ": " << r.error;
    EXPECT_TRUE(r.untouched) << name;
  }
  write_all(victim, good);
  EXPECT_EQ(try_load(dir.str()).error, "");
}

TEST(CheckpointVerify, AFailedSaveLeavesNoTemporaryFolder) {
  test::ScratchDir dir("verify_failed_save");
  save_checkpoint(dir.str(), 5, Fixture(5).contents());
  SaveHooks hooks;
  hooks.on_write = [](const std::string& path, uint64_t, uint64_t) {
    if (path.find(kOptimizerExpAvgFile) != std::string::npos) throw Error("cannot write: No space left on device");
  };
  EXPECT_THROW(save_checkpoint(dir.str(), 10, Fixture(10).contents(), hooks), Error);
  for (const auto& e : fs::directory_iterator(dir.path)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
  EXPECT_FALSE(fs::exists(dir.path / "iter_0000010"));
  EXPECT_EQ(read_latest_iteration(dir.str()), 5);
  EXPECT_EQ(try_load(dir.str()).error, "");
}

TEST(CheckpointVerify, ALatestThatIsADirectoryIsNamedAsSuch) {
  test::ScratchDir dir("verify_latest_dir");
  fs::create_directories(dir.path / kLatestFile);
  try {
    read_latest_iteration(dir.str());
    ADD_FAILURE() << "a directory was read as the latest file";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("holds \"\""), std::string::npos) << msg;
  }
}

TEST(CheckpointVerify, FindNonFiniteReadsF32AndBf16) {
  std::vector<float> f = {1.0f, 2.0f, -std::numeric_limits<float>::infinity()};
  std::vector<uint16_t> h = {0x3f80, 0x7fc0};  // 1.0, NaN in bf16
  std::vector<int32_t> ints = {-1, 0x7fc00000};  // never "non-finite"
  const std::vector<TensorRef> refs = {{"f", TensorDtype::F32, {3}, f.data()},
                                       {"h", TensorDtype::BF16, {2}, h.data()},
                                       {"i", TensorDtype::I32, {2}, ints.data()}};
  const auto bad = find_nonfinite(refs);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->tensor, "f");
  EXPECT_EQ(bad->index, 2);
  EXPECT_EQ(bad->count, 2);
  EXPECT_EQ(describe(*bad), "tensor f element 2 is -inf (2 non-finite values in all)");
  f[2] = 0.0f;
  h[1] = 0;
  EXPECT_FALSE(find_nonfinite(refs).has_value());
}

TEST(CheckpointDirContents, ListHoldAndRemoveCheckpoints) {
  test::ScratchDir dir("verify_contents");
  EXPECT_FALSE(holds_checkpoints(dir.str()));
  EXPECT_TRUE(list_iterations(dir.str() + "/missing").empty());
  save_checkpoint(dir.str(), 10, Fixture(10).contents());
  save_checkpoint(dir.str(), 5, Fixture(5).contents());
  fs::create_directories(dir.path / "iter_0000020.tmp-1");  // an interrupted save
  write_all(dir.str() + "/notes.txt", "keep me");
  EXPECT_EQ(list_iterations(dir.str()), (std::vector<int64_t>{5, 10}));
  EXPECT_TRUE(holds_checkpoints(dir.str()));
  EXPECT_EQ(remove_checkpoints(dir.str()), (std::vector<int64_t>{5, 10}));
  EXPECT_FALSE(holds_checkpoints(dir.str()));
  EXPECT_FALSE(fs::exists(dir.path / "iter_0000020.tmp-1"));
  EXPECT_TRUE(fs::exists(dir.path / "notes.txt"));
}

}  // namespace
}  // namespace sg::checkpoint
