// The files of a dataset and of a tokenizer as users name them, and how a dataset's pair is replaced:
//   * check_dataset_exists (train, validate, `data inspect`): PREFIX.bin or PREFIX.idx given instead of PREFIX
//     says to drop the suffix; a missing dataset's advice is for the name the user will write (a prefix spelled
//     DATA.bin or DATA_text_document); a *.tmp left by an unfinished write is named;
//   * an .idx of another, larger dataset beside a .bin: "truncated, or the index of another dataset", with the
//     size the .idx expects and how to get a matching pair;
//   * IndexedDatasetWriter: a failed finalize leaves no *.tmp; an existing .idx is removed before the .bin is
//     replaced (a stale .idx of the same size would be read as valid: shown), so a failure between leaves no
//     mixed pair;
//   * tokenizer.tokenizer_model naming tokenizer.json (or another file of the folder) says to give the folder.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/blended_dataset.h"
#include "data/hf_tokenizer.h"
#include "data/indexed_dataset.h"
#include "test_dir.h"
#include "test_util.h"

namespace sg::data {
namespace {

namespace fs = std::filesystem;

using test::thrown_message;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_dataset(const std::string& prefix, const std::vector<std::vector<int32_t>>& documents) {
  IndexedDatasetWriter w(prefix, TokenDtype::uint16);
  for (const auto& d : documents) w.add_document(d);
  w.finalize();
}

class DatasetFilesTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = sg::test::fresh_test_dir("sg_dataset_files"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// ---- check_dataset_exists ----

TEST_F(DatasetFilesTest, AFileOfThePairGivenInsteadOfThePrefixSaysToDropTheSuffix) {
  const std::string prefix = path("sample_text_document");
  write_dataset(prefix, {{1, 2, 3}});
  EXPECT_EQ(thrown_message([&] { check_dataset_exists(prefix); }), "");
  for (const std::string suffix : {".bin", ".idx"}) {
    const std::string message = thrown_message([&] { check_dataset_exists(prefix + suffix); });
    EXPECT_NE(message.find(prefix + suffix + " is a file of the dataset " + prefix), std::string::npos) << message;
    EXPECT_NE(message.find("without " + suffix), std::string::npos) << message;
    EXPECT_NE(message.find("dataset.data_path=[" + prefix + "]"), std::string::npos) << message;
    EXPECT_NE(message.find("stepgraph data inspect " + prefix + ")"), std::string::npos) << message;
    // Not the advice to make a dataset named after the file (PREFIX.bin_text_document).
    EXPECT_EQ(message.find(suffix + "_text_document"), std::string::npos) << message;
    EXPECT_EQ(message.find("--output-prefix"), std::string::npos) << message;
  }
  // The file given, but its dataset lacks the other file: drop the suffix and make the dataset again.
  fs::remove(index_path(prefix));
  const std::string message = thrown_message([&] { check_dataset_exists(prefix + ".bin"); });
  EXPECT_NE(message.find("but " + index_path(prefix) + " is missing"), std::string::npos) << message;
  EXPECT_NE(message.find("without .bin"), std::string::npos) << message;
  EXPECT_NE(message.find("--output-prefix " + path("sample") + " "), std::string::npos) << message;
  EXPECT_NE(message.find("dataset.data_path=[" + prefix + "]"), std::string::npos) << message;
}

TEST_F(DatasetFilesTest, TheTrainPathSaysItToo) {
  const std::string prefix = path("corpus");
  write_dataset(prefix, {{1, 2, 3}});
  DataLoaderOptions o;
  o.data_path = {prefix + ".bin"};
  o.seq_length = 2;
  o.vocab_size = 256;
  const std::string message = thrown_message([&] { DataLoader loader(o); });
  EXPECT_NE(message.find("without .bin"), std::string::npos) << message;
  EXPECT_NE(message.find("dataset.data_path=[" + prefix + "]"), std::string::npos) << message;
}

TEST_F(DatasetFilesTest, AMissingDatasetsAdviceIsForTheNameTheUserWrites) {
  // Spelled like a file, nothing there: the advice makes DATA (what data_path should say), not DATA.bin.
  const std::string spelled_as_file = path("sample_text_document.bin");
  std::string message = thrown_message([&] { check_dataset_exists(spelled_as_file); });
  EXPECT_NE(message.find(spelled_as_file + ".idx and " + spelled_as_file + ".bin not found"), std::string::npos)
      << message;
  EXPECT_NE(message.find("without .bin"), std::string::npos) << message;
  EXPECT_NE(message.find("--output-prefix " + path("sample") + " "), std::string::npos) << message;
  EXPECT_NE(message.find("dataset.data_path=[" + path("sample_text_document") + "]"), std::string::npos) << message;
  EXPECT_EQ(message.find("bin_text_document"), std::string::npos) << message;
  // A PREFIX_text_document is what preprocess_data.py --output-prefix PREFIX writes.
  message = thrown_message([&] { check_dataset_exists(path("web_text_document")); });
  EXPECT_NE(message.find("--output-prefix " + path("web") + " "), std::string::npos) << message;
  EXPECT_NE(message.find("dataset.data_path=[" + path("web_text_document") + "]"), std::string::npos) << message;
  EXPECT_NE(message.find("stepgraph data synth --out " + path("web_text_document")), std::string::npos) << message;
  // Any other prefix: preprocess_data.py's output is PREFIX_text_document.
  message = thrown_message([&] { check_dataset_exists(path("plain")); });
  EXPECT_NE(message.find("--output-prefix " + path("plain") + " "), std::string::npos) << message;
  EXPECT_NE(message.find("dataset.data_path=[" + path("plain") + "_text_document]"), std::string::npos) << message;
}

TEST_F(DatasetFilesTest, ATemporaryLeftByAnUnfinishedWriteIsNamed) {
  // What a writer killed between its renames leaves: the new .bin, PREFIX.idx.tmp, no .idx.
  const std::string prefix = path("killed");
  write_dataset(prefix, {{1, 2, 3}});
  fs::rename(index_path(prefix), index_path(prefix) + ".tmp");
  const std::string message = thrown_message([&] { check_dataset_exists(prefix); });
  EXPECT_NE(message.find(index_path(prefix) + " not found"), std::string::npos) << message;
  EXPECT_NE(message.find(index_path(prefix) + ".tmp is left from a write of " + prefix + " that did not finish"),
            std::string::npos)
      << message;
}

// ---- an .idx of another dataset ----

TEST_F(DatasetFilesTest, AnIndexOfALargerDatasetIsNotOnlyTruncation) {
  const std::string big = path("big"), small = path("small");
  write_dataset(big, {{1, 2, 3, 4}, {5, 6, 7}, {8, 9}});  // 9 tokens, 18 bytes
  write_dataset(small, {{1, 2}, {3}});                    // 3 tokens, 6 bytes
  fs::copy_file(index_path(big), index_path(small), fs::copy_options::overwrite_existing);
  const std::string message = thrown_message([&] { IndexedDataset::open(small); });
  EXPECT_NE(message.find(bin_path(small) + " is truncated, or " + index_path(small) +
                         " is the index of another dataset"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("the file has 6 bytes; the index describes 3 sequences in 18 bytes of uint16 tokens"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("Both files must come from one run: write " + small + " again"), std::string::npos)
      << message;
  // The opposite case (bytes left over) gives the same fix.
  write_dataset(small, {{1, 2}, {3}});
  fs::copy_file(index_path(small), index_path(big), fs::copy_options::overwrite_existing);
  const std::string leftover = thrown_message([&] { IndexedDataset::open(big); });
  EXPECT_NE(leftover.find("does not match its index"), std::string::npos) << leftover;
  EXPECT_NE(leftover.find("Both files must come from one run: write " + big + " again"), std::string::npos)
      << leftover;
}

// ---- replacing a dataset ----

TEST_F(DatasetFilesTest, AStaleIndexOfTheSameSizeReadsAsValid) {
  // Why the writer removes the old .idx before replacing the .bin: nothing in an .idx but its sequence lengths
  // ties it to its .bin, so one written for other data of the same size is accepted.
  const std::string a = path("a"), b = path("b");
  write_dataset(a, {{1, 2, 3}, {4, 5}});
  write_dataset(b, {{9}, {8, 7, 6, 5}});
  fs::copy_file(index_path(a), index_path(b), fs::copy_options::overwrite_existing);
  const IndexedDataset mixed = IndexedDataset::open(b);
  EXPECT_EQ(mixed.sequence(0), (std::vector<int32_t>{9, 8, 7}));  // b's tokens cut at a's boundaries
}

TEST_F(DatasetFilesTest, AnOverwriteReplacesBothFilesAndLeavesNoTemporaries) {
  const std::string prefix = path("corpus");
  write_dataset(prefix, {{1, 2, 3}, {4, 5}});
  write_dataset(prefix, {{7}, {8, 9}, {10}});
  const IndexedDataset ds = IndexedDataset::open(prefix);
  EXPECT_EQ(ds.num_documents(), 3u);
  EXPECT_EQ(ds.sequence(1), (std::vector<int32_t>{8, 9}));
  EXPECT_FALSE(fs::exists(bin_path(prefix) + ".tmp"));
  EXPECT_FALSE(fs::exists(index_path(prefix) + ".tmp"));
}

TEST_F(DatasetFilesTest, AFailureToCreateTheIndexLeavesNoTemporaryData) {
  const std::string prefix = path("corpus");
  fs::create_directories(index_path(prefix) + ".tmp");  // fopen of the .idx temporary fails (EISDIR), even as root
  IndexedDatasetWriter w(prefix, TokenDtype::uint16);
  w.add_document(std::vector<int32_t>{1, 2, 3});
  EXPECT_TRUE(fs::exists(bin_path(prefix) + ".tmp"));
  const std::string message = thrown_message([&] { w.finalize(); });
  EXPECT_NE(message.find("cannot create index file " + index_path(prefix) + ".tmp"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(bin_path(prefix) + ".tmp")) << "the .bin temporary was left behind";
  EXPECT_FALSE(fs::exists(bin_path(prefix)));
  EXPECT_FALSE(fs::exists(index_path(prefix)));
  EXPECT_TRUE(fs::is_directory(index_path(prefix) + ".tmp")) << "a folder in the way is not the writer's to delete";
}

TEST_F(DatasetFilesTest, ASequencePastTheIndexsInt32LengthIsRefusedBeforeAnyTokenIsWritten) {
  // 2^31 tokens of address space that is never touched (no memory is committed): the length check comes first.
  const size_t count = static_cast<size_t>(INT32_MAX) + 1;
  void* tokens = mmap(nullptr, count * sizeof(int32_t), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(tokens, MAP_FAILED);
  const std::string prefix = path("corpus");
  IndexedDatasetWriter w(prefix, TokenDtype::int32);
  const std::string message =
      thrown_message([&] { w.add_sequence(std::span<const int32_t>(static_cast<const int32_t*>(tokens), count)); });
  munmap(tokens, count * sizeof(int32_t));
  EXPECT_NE(message.find("a sequence of 2147483648 tokens does not fit the .idx format's int32 sequence length"),
            std::string::npos)
      << message;
  w.add_document(std::vector<int32_t>{1, 2, 3});  // the writer is still usable: nothing of the refused one was written
  w.finalize();
  EXPECT_EQ(fs::file_size(bin_path(prefix)), 3 * sizeof(int32_t));
}

TEST_F(DatasetFilesTest, TheOldIndexIsGoneBeforeTheBinIsReplaced) {
  // The .bin's rename is made to fail (a non-empty folder has its name). With the .idx removed first, what is
  // left is no dataset (a missing .bin and .idx), never the old .idx beside other data.
  const std::string prefix = path("corpus");
  write_dataset(prefix, {{1, 2, 3}, {4, 5}});
  fs::remove(bin_path(prefix));
  fs::create_directories(fs::path(bin_path(prefix)) / "in_the_way");
  IndexedDatasetWriter w(prefix, TokenDtype::uint16);
  w.add_document(std::vector<int32_t>{7, 8});
  const std::string message = thrown_message([&] { w.finalize(); });
  EXPECT_NE(message.find("cannot rename " + bin_path(prefix) + ".tmp to " + bin_path(prefix)), std::string::npos)
      << message;
  EXPECT_NE(message.find("the old index file " + index_path(prefix) + " was removed already"), std::string::npos)
      << message;
  EXPECT_FALSE(fs::exists(index_path(prefix))) << "the old .idx stayed while the .bin was being replaced";
  EXPECT_FALSE(fs::exists(bin_path(prefix) + ".tmp"));
  EXPECT_FALSE(fs::exists(index_path(prefix) + ".tmp"));
}

TEST_F(DatasetFilesTest, AnOldIndexThatCannotBeRemovedReplacesNothing) {
  const std::string prefix = path("corpus");
  write_dataset(prefix, {{1, 2, 3}, {4, 5}});
  const std::string old_bin = read_file(bin_path(prefix));
  fs::remove(index_path(prefix));
  fs::create_directories(fs::path(index_path(prefix)) / "in_the_way");  // unlink fails (EISDIR)
  IndexedDatasetWriter w(prefix, TokenDtype::uint16);
  w.add_document(std::vector<int32_t>{7, 8});
  const std::string message = thrown_message([&] { w.finalize(); });
  EXPECT_NE(message.find("cannot remove the old index file " + index_path(prefix)), std::string::npos) << message;
  EXPECT_NE(message.find("nothing was replaced"), std::string::npos) << message;
  EXPECT_EQ(read_file(bin_path(prefix)), old_bin);
  EXPECT_FALSE(fs::exists(bin_path(prefix) + ".tmp"));
  EXPECT_FALSE(fs::exists(index_path(prefix) + ".tmp"));
}

// ---- the tokenizer folder ----

TEST_F(DatasetFilesTest, ATokenizerFileNamedInsteadOfItsFolderSaysToGiveTheFolder) {
  const fs::path tok = dir_ / "tok";
  fs::create_directories(tok);
  std::ofstream(tok / "tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0}}})";
  std::ofstream(tok / "tokenizer_config.json") << "{}";
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    const std::string file = (tok / name).string();
    const std::string message = thrown_message([&] { read_hf_tokenizer(file); });
    EXPECT_NE(message.find(file + " is a file; give its folder"), std::string::npos) << message;
    EXPECT_NE(message.find("tokenizer.tokenizer_model=" + tok.string()), std::string::npos) << message;
    EXPECT_EQ(message.find("--output " + file), std::string::npos) << message;
  }
  EXPECT_EQ(thrown_message([&] { read_hf_tokenizer(tok.string()); }), "");
  // A file in a folder without a tokenizer: not a place to train one into either.
  const std::string stray = path("notes.txt");
  std::ofstream(stray) << "x";
  std::string message = thrown_message([&] { read_hf_tokenizer(stray); });
  EXPECT_NE(message.find(stray + " is a file, not a folder"), std::string::npos) << message;
  EXPECT_NE(message.find("--output TOKENIZER_DIR"), std::string::npos) << message;
  EXPECT_EQ(message.find("--output " + stray), std::string::npos) << message;
  // Nothing there: train one into it.
  message = thrown_message([&] { read_hf_tokenizer(path("new_tok")); });
  EXPECT_NE(message.find("--output " + path("new_tok")), std::string::npos) << message;
}

}  // namespace
}  // namespace sg::data
