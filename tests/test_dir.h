#pragma once
// A fresh folder for the running test: <base>/<prefix>_<pid>_<test name>, emptied if an earlier run left it
// behind. The pid keeps test programs that ctest runs in parallel apart. And a file's bytes, read back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

namespace sg::test {

inline std::filesystem::path fresh_test_dir(const std::string& prefix,
                                            const std::filesystem::path& base = std::filesystem::temp_directory_path()) {
  const std::filesystem::path dir =
      base / (prefix + "_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A scratch directory, <tmp>/sg_<tag>_<pid>, emptied at the start and removed at scope exit.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const std::string& tag)
      : path(std::filesystem::temp_directory_path() / ("sg_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string str() const { return path.string(); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The whole file ("" when it cannot be opened: the caller's assertion on the contents says what was missing).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace sg::test
