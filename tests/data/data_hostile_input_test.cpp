// Data inputs that used to hang or be misread silently (issue 17): a FIFO (or any non-regular file)
// as .bin/.idx, an .idx whose token dtype does not describe its .bin (gaps or trailing bytes), and
// blend weights that underflow or whose sum overflows.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/blended_dataset.h"
#include "data/indexed_dataset.h"
#include "data/mapped_file.h"
#include "test_dir.h"

namespace sg::data {
namespace {

namespace fs = std::filesystem;

class HostileDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sg::test::fresh_test_dir("sg_hostile_data");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A small valid corpus written by stepgraph's writer (Megatron's layout) in `dtype`.
  std::string corpus(const std::string& name, TokenDtype dtype) {
    const std::string prefix = (dir_ / name).string();
    IndexedDatasetWriter w(prefix, dtype);
    w.add_document(std::vector<int32_t>{1, 2, 3, 4, 5});
    w.add_document(std::vector<int32_t>{6, 7, 8});
    w.finalize();
    return prefix;
  }

  fs::path dir_;
};

std::string open_error(const std::string& prefix) {
  try {
    IndexedDataset::open(prefix, 0);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(HostileDataTest, AFifoIsRefusedInsteadOfBlocking) {
  const std::string prefix = corpus("fifo", TokenDtype::uint16);
  fs::remove(bin_path(prefix));
  ASSERT_EQ(::mkfifo(bin_path(prefix).c_str(), 0644), 0);
  auto result = std::async(std::launch::async, [&] { return open_error(prefix); });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Unblock the stuck open (a writer appears) so the test can end, then fail.
    std::ofstream writer(bin_path(prefix));
    FAIL() << "opening a FIFO as the .bin blocked";
  }
  const std::string msg = result.get();
  EXPECT_NE(msg.find(bin_path(prefix) + " is a FIFO (named pipe); it must be a regular file"), std::string::npos)
      << msg;
}

TEST_F(HostileDataTest, ADirectoryIsNamedAsSuch) {
  fs::create_directories(dir_ / "folder");
  try {
    MappedFile f((dir_ / "folder").string(), "data file");
    ADD_FAILURE() << "a directory was mapped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

// Rewrites byte 17 of PREFIX.idx (the token dtype code).
void set_dtype_code(const std::string& prefix, TokenDtype dtype) {
  std::fstream idx(index_path(prefix), std::ios::in | std::ios::out | std::ios::binary);
  idx.seekp(17);
  const char code = static_cast<char>(dtype);
  idx.write(&code, 1);
}

TEST_F(HostileDataTest, AnIndexWhoseDtypeDoesNotDescribeTheBinIsRefused) {
  // The .bin holds int32 tokens; the .idx claims uint16. Each int32 token reads as two uint16 ids
  // (the high half is 0, inside any vocabulary), and sequence 1 starts where the int32 data put it,
  // leaving a gap after the uint16 reading of sequence 0.
  const std::string prefix = corpus("uint16_over_int32", TokenDtype::int32);
  set_dtype_code(prefix, TokenDtype::uint16);
  const std::string msg = open_error(prefix);
  EXPECT_NE(msg.find(bin_path(prefix) + " does not match its index"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sequence 1 starts at byte 20, but the previous data ends at byte 10"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("token dtype uint16"), std::string::npos) << msg;
  // Control: the same corpus with its own dtype opens.
  EXPECT_EQ(open_error(corpus("int32", TokenDtype::int32)), "");
}

TEST_F(HostileDataTest, TrailingBytesAfterTheLastSequenceAreRefused) {
  const std::string prefix = corpus("trailing", TokenDtype::uint16);
  std::ofstream(bin_path(prefix), std::ios::app | std::ios::binary) << "xy";
  const std::string msg = open_error(prefix);
  EXPECT_NE(msg.find("the sequences end at byte 16 but the file has 18 bytes"), std::string::npos) << msg;
}

std::string blend_error(const std::vector<std::string>& data_path) {
  try {
    parse_data_path(data_path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HostileBlendWeights, AnOverflowingSumIsRefused) {
  const std::string msg = blend_error({"1.5e308", "a", "1e308", "b"});
  EXPECT_NE(msg.find("sum to more than the largest double"), std::string::npos) << msg;
  EXPECT_NE(blend_error({"1e400", "a", "1", "b"}).find("\"1e400\" is too large"), std::string::npos);
  EXPECT_EQ(blend_error({"1e300", "a", "3e300", "b"}), "");  // large but summable: only ratios matter
}

TEST(HostileBlendWeights, AnUnderflowingWeightIsNamedAsAWeight) {
  const std::string msg = blend_error({"1e-320", "a", "0.5", "b"});
  EXPECT_EQ(msg.find("mixes prefixes and weights"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dataset.data_path[0] = \"1e-320\" is too small"), std::string::npos) << msg;
  EXPECT_NE(blend_error({"0.5", "a", "1e-400", "b"}).find("\"1e-400\" is too small"), std::string::npos);
  // A written zero is a zero weight, as before.
  EXPECT_EQ(blend_error({"0.0", "a", "1", "b"}), "");
  EXPECT_EQ(blend_error({"0e10", "a", "1", "b"}), "");
}

}  // namespace
}  // namespace sg::data
