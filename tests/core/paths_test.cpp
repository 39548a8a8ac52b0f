// core/paths.h: normalized_directory and same_directory, which decide whether checkpoint.save, checkpoint.load,
// the run folder and a pretrained checkpoint are one folder (a wrong "no" once let checkpoint.overwrite delete
// the checkpoint it was about to load). Every spelling of one folder — relative, `./`, absolute, a trailing
// separator, `..` detours, a symlink — must match, whether or not the folder (or its parents) exists yet;
// different folders, and a file below a folder, must not. And describe_path, the name errors give a path.
#include "core/paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_dir.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

// Runs the test inside a fresh folder (the relative spellings are relative to it), then goes back.
class Paths : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = fs::current_path();
    // Canonical: temp_directory_path() may itself be reached through a link (/tmp -> /private/tmp).
    root_ = fs::canonical(test::fresh_test_dir("sg_paths"));
    fs::current_path(root_);
  }
  void TearDown() override {
    fs::current_path(previous_);
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Every spelling of <root>/ck the checkpoint options may see.
  std::vector<std::string> spellings_of_ck() const {
    const std::string abs = (root_ / "ck").string();
    return {"ck",       "./ck",
            "ck/",      "./ck/",
            "ck//",     "ck/.",
            "ck/./",    "ck/../ck",
            "x/../ck/", "./x/y/../../ck",
            abs,        abs + "/",
            abs + "/.", (root_ / "sub" / ".." / "ck").string()};
  }

  void expect_all_match(const std::vector<std::string>& spellings, const fs::path& expected) {
    for (const std::string& a : spellings) {
      EXPECT_EQ(normalized_directory(a), expected) << "'" << a << "'";
      for (const std::string& b : spellings) EXPECT_TRUE(same_directory(a, b)) << "'" << a << "' vs '" << b << "'";
    }
  }

  fs::path previous_;
  fs::path root_;
};

TEST_F(Paths, SpellingsOfOneFolderMatchBeforeItExists) {
  ASSERT_FALSE(fs::exists("ck"));
  expect_all_match(spellings_of_ck(), root_ / "ck");
}

TEST_F(Paths, SpellingsOfOneFolderMatchOnceItExists) {
  fs::create_directory("ck");
  expect_all_match(spellings_of_ck(), root_ / "ck");
}

// One spelling seen before the folder was made and another after (validation runs before training creates
// checkpoint.save) name the same folder.
TEST_F(Paths, TheNormalizedPathDoesNotChangeWhenTheFolderIsCreated) {
  std::vector<fs::path> before;
  for (const std::string& s : spellings_of_ck()) before.push_back(normalized_directory(s));
  fs::create_directories("ck/iter_0000002");
  const std::vector<std::string> spellings = spellings_of_ck();
  for (size_t i = 0; i < spellings.size(); ++i)
    EXPECT_EQ(normalized_directory(spellings[i]), before[i]) << spellings[i];
}

// The result is absolute, without `.`/`..` parts or a trailing separator.
TEST_F(Paths, TheResultIsAbsoluteAndNormal) {
  const std::vector<std::string> spellings = {"ck", "./ck/", "a/b/../c//", "../" + root_.filename().string() + "/ck/.",
                                              "."};
  for (const std::string& s : spellings) {
    const fs::path p = normalized_directory(s);
    EXPECT_TRUE(p.is_absolute()) << s << " -> " << p;
    EXPECT_TRUE(p.has_filename()) << s << " -> " << p << " ends in a separator";
    for (const fs::path& part : p) EXPECT_TRUE(part != "." && part != "..") << s << " -> " << p;
  }
  EXPECT_EQ(normalized_directory("."), root_);
  EXPECT_EQ(normalized_directory("./"), root_);
  EXPECT_EQ(normalized_directory("/"), fs::path("/"));  // the root keeps its only separator
}

// The bug the header recalls: the parent of "x/iter_2/" must be "x", not "x/iter_2".
TEST_F(Paths, TheParentOfAFolderWithATrailingSeparatorIsItsParent) {
  for (const bool exists : {false, true}) {
    SCOPED_TRACE(exists ? "existing" : "not created yet");
    if (exists) fs::create_directories("x/iter_2");
    EXPECT_EQ(normalized_directory("x/iter_2/").parent_path(), normalized_directory("x"));
    EXPECT_EQ(normalized_directory("x/iter_2//").parent_path(), normalized_directory("x"));
    EXPECT_EQ(normalized_directory("x/iter_2/").filename(), "iter_2");
    EXPECT_FALSE(same_directory("x/iter_2/", "x"));
  }
}

TEST_F(Paths, DifferentFoldersDoNotMatch) {
  for (const bool exists : {false, true}) {
    SCOPED_TRACE(exists ? "existing" : "not created yet");
    if (exists) {
      for (const char* d : {"ck", "ck2", "other/ck", "ck/ck"}) fs::create_directories(d);
    }
    EXPECT_FALSE(same_directory("ck", "ck2"));
    EXPECT_FALSE(same_directory("ck", "c"));
    EXPECT_FALSE(same_directory("ck", "other/ck"));  // same name, other parent
    EXPECT_FALSE(same_directory("ck", "ck/ck"));     // a folder and one inside it
    EXPECT_FALSE(same_directory("ck", "."));         // a folder and its parent
    EXPECT_FALSE(same_directory("ck", "/ck"));       // relative is relative to the current folder, not /
    EXPECT_FALSE(same_directory("ck", "CK"));        // case matters (Linux)
  }
}

// A symlink to a folder (how clusters often reach shared storage) is the folder it points at, and so are
// folders below it that do not exist yet.
TEST_F(Paths, ASymlinkedFolderMatchesItsTarget) {
  fs::create_directories("storage/run/ck");
  fs::create_directory_symlink(root_ / "storage" / "run", "link");
  fs::create_directory_symlink("storage/run/ck", "relative_link");  // a relative link target
  EXPECT_EQ(normalized_directory("link/ck"), root_ / "storage" / "run" / "ck");
  EXPECT_TRUE(same_directory("link/ck", "storage/run/ck"));
  EXPECT_TRUE(same_directory("link/ck/", (root_ / "storage/run/ck").string()));
  EXPECT_TRUE(same_directory("link", "storage/run"));
  EXPECT_TRUE(same_directory("relative_link", "storage/run/ck/"));
  EXPECT_TRUE(same_directory("relative_link", "link/ck"));
  // Not created yet, below the link.
  EXPECT_TRUE(same_directory("link/new/iter_1", "storage/run/new/iter_1/"));
  EXPECT_EQ(normalized_directory("link/new/iter_1/").parent_path(), root_ / "storage" / "run" / "new");
  // The link is not its own parent's other children.
  EXPECT_FALSE(same_directory("link", "storage"));
  EXPECT_FALSE(same_directory("link/ck", "storage/ck"));
}

// A chain of links resolves to the last target.
TEST_F(Paths, AChainOfSymlinksResolves) {
  fs::create_directories("real");
  fs::create_directory_symlink("real", "a");
  fs::create_directory_symlink("a", "b");
  EXPECT_TRUE(same_directory("b", "real"));
  EXPECT_TRUE(same_directory("b/x/", "a/x"));
  EXPECT_EQ(normalized_directory("b/x"), root_ / "real" / "x");
}

// Parents that do not exist are normalized lexically: deep missing paths still match their other spellings.
TEST_F(Paths, MissingParentsAreNormalizedLexically) {
  ASSERT_FALSE(fs::exists("missing"));
  EXPECT_EQ(normalized_directory("missing/deeper/ck/"), root_ / "missing" / "deeper" / "ck");
  EXPECT_TRUE(same_directory("missing/deeper/ck", "./missing/x/../deeper//ck/"));
  EXPECT_TRUE(same_directory("missing/deeper/ck", (root_ / "missing/deeper/./ck").string()));
  EXPECT_FALSE(same_directory("missing/deeper/ck", "missing/ck"));
  // Half of it existing changes nothing.
  fs::create_directories("missing/deeper");
  EXPECT_EQ(normalized_directory("missing/deeper/ck/"), root_ / "missing" / "deeper" / "ck");
  EXPECT_TRUE(same_directory("missing/deeper/ck", "./missing/x/../deeper//ck/"));
}

// A regular file is compared by its path like a folder: it matches its own spellings, never the folder
// that holds it or a sibling.
TEST_F(Paths, AFileIsNotTheFolderThatHoldsIt) {
  fs::create_directory("ck");
  std::ofstream("ck/latest_checkpointed_iteration.txt") << "2\n";
  EXPECT_FALSE(same_directory("ck/latest_checkpointed_iteration.txt", "ck"));
  EXPECT_FALSE(same_directory("ck/latest_checkpointed_iteration.txt", "ck/iter_0000002"));
  EXPECT_TRUE(same_directory("ck/latest_checkpointed_iteration.txt", "./ck/../ck/latest_checkpointed_iteration.txt"));
  EXPECT_EQ(normalized_directory("ck/latest_checkpointed_iteration.txt").parent_path(), root_ / "ck");
}

// The header promises nothing for "" (unset folders reach the callers as std::nullopt). What it does now:
// "" names no folder — it is not taken for the current folder (which holds the run folder and the
// checkpoints), nor for the root. Pinned so that a change is deliberate.
TEST_F(Paths, AnEmptyPathIsNotTheCurrentFolder) {
  EXPECT_TRUE(normalized_directory("").empty());
  EXPECT_FALSE(same_directory("", "."));
  EXPECT_FALSE(same_directory("", root_.string()));
  EXPECT_FALSE(same_directory("", "/"));
  EXPECT_TRUE(same_directory("", ""));
}

// A relative config path is read from the working directory (not the YAML file's folder): an error naming one
// says which directory that was; an absolute path is named as it is.
TEST_F(Paths, DescribePathNamesTheWorkingDirectoryOfARelativePath) {
  const std::string cwd = fs::current_path().string();
  for (const std::string relative : {"data/corpus", "./tok", "../x"}) {
    EXPECT_EQ(describe_path(relative), relative + " (relative to the working directory " + cwd + ")");
  }
  const std::string absolute = (root_ / "data" / "corpus").string();
  EXPECT_EQ(describe_path(absolute), absolute);
  EXPECT_EQ(describe_path(""), "");
  // The directory is the one current when the message is made.
  fs::create_directory("sub");
  fs::current_path("sub");
  EXPECT_EQ(describe_path("x"), "x (relative to the working directory " + (root_ / "sub").string() + ")");
}

}  // namespace
}  // namespace sg
