// `stepgraph data synth` and `stepgraph data inspect` through the real binary: output, JSON, exit
// codes.
#include <gtest/gtest.h>

#include "process_util.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/synth_corpus.h"

namespace {

namespace fs = std::filesystem;

struct RunResult {
  int rc = -1;
  std::string out;  // stdout and stderr
};

// `args` is a shell fragment (the tests pass paths they made themselves).
RunResult run(const std::string& args) {
  const sg::test::CommandResult r = sg::test::run_command(sg::test::shell_quote(sg::test::stepgraph_binary()) + " " + args + " 2>&1");
  return {r.exit_code, r.output};
}

class DataCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sg_data_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DataCliTest, SynthThenInspect) {
  const std::string prefix = (dir_ / "nested" / "dir" / "synth").string();  // parents are created
  RunResult r = run("data synth --out " + prefix + " --tokens 20000 --seed 7");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("unigram entropy:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nats/token"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(prefix + ".bin") && fs::exists(prefix + ".idx"));

  // The JSON summary matches the library's summary for the same seed.
  r = run("data synth --out " + prefix + "2 --tokens 20000 --seed 7 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto synth = nlohmann::json::parse(r.out);
  sg::data::SynthOptions o;
  o.num_tokens = 20000;
  o.seed = 7;
  const auto expected = sg::data::generate_synth_corpus(o, [](std::span<const int32_t>) {});
  EXPECT_EQ(synth["tokens"], expected.num_tokens);
  EXPECT_EQ(synth["documents"], expected.num_documents);
  EXPECT_NEAR(synth["unigram_entropy_nats"].get<double>(), expected.unigram_entropy_nats, 1e-12);

  r = run("data inspect " + prefix + " --json --vocab-size 256");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto info = nlohmann::json::parse(r.out);
  EXPECT_EQ(info["dtype"], "uint16");
  EXPECT_EQ(info["tokens"], expected.num_tokens);
  EXPECT_EQ(info["documents"], expected.num_documents);
  EXPECT_EQ(info["sequences"], expected.num_documents);
  EXPECT_EQ(info["min_token"], 0);
  EXPECT_LE(info["max_token"].get<int>(), 255);
  ASSERT_EQ(info["first_documents"].size(), 3u);
  const auto& first = info["first_documents"][0]["first_tokens"];
  ASSERT_FALSE(first.empty());
  EXPECT_GE(first[0].get<int>(), sg::data::kSynthTaskCount)
      << "documents start with a task marker";
  EXPECT_LE(first[0].get<int>(), sg::data::kSynthTaskAdd);

  r = run("data inspect " + prefix);
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* field :
       {"dtype:", "sequences:", "documents:", "tokens:", "token ids:", "document 0"}) {
    EXPECT_NE(r.out.find(field), std::string::npos) << field << " in:\n" << r.out;
  }
}

TEST_F(DataCliTest, BadDataAndUsageErrors) {
  const std::string prefix = (dir_ / "synth").string();
  ASSERT_EQ(run("data synth --out " + prefix + " --tokens 5000").rc, 0);
  // Token ids up to 255 against a vocabulary of 100: request failed (1), the file is named.
  RunResult r = run("data inspect " + prefix + " --vocab-size 100");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(prefix + ".bin"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vocab_size=100"), std::string::npos) << r.out;
  // A corrupt index.
  {
    std::ofstream(prefix + ".idx", std::ios::binary | std::ios::trunc)
        << "NOTANIDXFILE-------------------------------";
  }
  r = run("data inspect " + prefix);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("wrong magic"), std::string::npos) << r.out;
  // Missing files, missing arguments.
  r = run("data inspect " + (dir_ / "nope").string());
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("nope.idx"), std::string::npos) << r.out;
  EXPECT_EQ(run("data synth").rc, 2);
  r = run("data synth --out x --tokens 0");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("must be positive (got 0)"), std::string::npos) << r.out;  // not a 300-digit range
  EXPECT_EQ(run("data inspect " + prefix + " --documents -1").rc, 2);
  // A seed is read exactly: CLI11 alone wrapped -5 and saturated 2^64 and more into the same valid seed.
  for (const std::string seed : {"-5", "18446744073709551616", "99999999999999999999999", "1e3"}) {
    r = run("data synth --out " + (dir_ / "seeded").string() + " --tokens 1000 --seed " + seed);
    EXPECT_EQ(r.rc, 2) << seed << ": " << r.out;
    EXPECT_NE(r.out.find("give a whole number from 0 to 18446744073709551615"), std::string::npos) << r.out;
  }
  EXPECT_EQ(run("data synth --out " + (dir_ / "seeded").string() + " --tokens 1000 --seed 18446744073709551615").rc, 0);
  EXPECT_EQ(run("data").rc, 2);
  // A prefix that names a folder would write hidden ".bin"/".idx" files: refused, naming a prefix to use.
  for (const std::string& folder : {dir_.string(), dir_.string() + "/"}) {
    r = run("data synth --out " + folder);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("names a folder"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir_ / ".bin")) << r.out;
  }
}

}  // namespace
