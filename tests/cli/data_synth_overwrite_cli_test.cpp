// `stepgraph data synth` never replaces a dataset by accident, and `data inspect` of a missing prefix says what
// train says (data::check_dataset_exists):
//   * --out PREFIX whose PREFIX.bin or PREFIX.idx exists is refused (status 1) naming the file(s) and --force,
//     which is in --help; the files are left as they were; --force replaces them;
//   * a synth killed while writing leaves no PREFIX.bin/PREFIX.idx (only PREFIX.bin.tmp);
//   * `data inspect MISSING` names both files and how to make a dataset; `data inspect PREFIX.bin` (or .idx) of an
//     existing dataset says to drop the suffix.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "process_util.h"

namespace {

namespace fs = std::filesystem;
using sg::test::shell_quote;

struct Result {
  int rc = -1;
  std::string out;
};
Result run(const std::string& args) {
  const auto r = sg::test::run_command(shell_quote(sg::test::stepgraph_binary()) + " " + args + " 2>&1");
  return {r.exit_code, r.output};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class DataSynthOverwrite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sg_data_synth_overwrite_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DataSynthOverwrite, AnExistingDatasetIsReplacedOnlyWithForce) {
  const std::string prefix = (dir_ / "corpus").string();
  ASSERT_EQ(run("data synth --out " + shell_quote(prefix) + " --tokens 3000 --seed 1").rc, 0);
  const std::string bin = read_file(prefix + ".bin"), idx = read_file(prefix + ".idx");

  Result r = run("data synth --out " + shell_quote(prefix) + " --tokens 9000 --seed 2");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(prefix + ".bin and " + prefix + ".idx already exist"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--force"), std::string::npos) << r.out;
  EXPECT_EQ(read_file(prefix + ".bin"), bin) << "left as it was";
  EXPECT_EQ(read_file(prefix + ".idx"), idx);
  EXPECT_FALSE(fs::exists(prefix + ".bin.tmp"));

  // One of the two is enough (a half-copied dataset is still someone's data).
  const std::string lone = (dir_ / "lone").string();
  std::ofstream(lone + ".idx") << "not mine to replace";
  r = run("data synth --out " + shell_quote(lone) + " --tokens 3000");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(lone + ".idx already exists"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(lone + ".bin"), std::string::npos) << r.out;
  EXPECT_EQ(read_file(lone + ".idx"), "not mine to replace");

  r = run("data synth --out " + shell_quote(prefix) + " --tokens 9000 --seed 2 --force --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto written = nlohmann::json::parse(r.out);
  r = run("data inspect " + shell_quote(prefix) + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["tokens"], written["tokens"]) << "the new corpus replaced the old";
  EXPECT_NE(read_file(prefix + ".bin"), bin);

  r = run("data synth --help");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("--force"), std::string::npos) << r.out;
}

TEST_F(DataSynthOverwrite, AKilledSynthLeavesNoDataset) {
  const std::string prefix = (dir_ / "big").string();
  // Far more tokens than a second writes: killed while writing PREFIX.bin.tmp.
  const auto r = sg::test::run_command(shell_quote(sg::test::stepgraph_binary()) + " data synth --out " +
                                       shell_quote(prefix) +
                                       " --tokens 2000000000 >/dev/null 2>&1 & pid=$!; sleep 0.5; kill -KILL $pid; "
                                       "wait $pid 2>/dev/null; echo rc=$?");
  EXPECT_NE(r.output.find("rc=137"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(prefix + ".bin"));
  EXPECT_FALSE(fs::exists(prefix + ".idx"));
}

TEST_F(DataSynthOverwrite, InspectOfAMissingPrefixSaysWhatTrainSays) {
  const std::string missing = (dir_ / "missing").string();
  Result r = run("data inspect " + shell_quote(missing));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(missing + ".idx and " + missing + ".bin not found"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stepgraph data synth --out " + missing), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tools/preprocess_data.py"), std::string::npos) << r.out;

  const std::string prefix = (dir_ / "corpus").string();
  ASSERT_EQ(run("data synth --out " + shell_quote(prefix) + " --tokens 3000").rc, 0);
  for (const std::string suffix : {".bin", ".idx"}) {
    r = run("data inspect " + shell_quote(prefix + suffix));
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("without " + suffix), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("stepgraph data inspect " + prefix + ")"), std::string::npos) << r.out;
  }
  // A prefix that is itself named *.bin is a dataset like any other.
  const std::string odd = (dir_ / "named.bin").string();
  ASSERT_EQ(run("data synth --out " + shell_quote(odd) + " --tokens 3000").rc, 0);
  r = run("data inspect " + shell_quote(odd));
  EXPECT_EQ(r.rc, 0) << r.out;
}

}  // namespace
