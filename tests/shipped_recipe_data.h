#pragma once
// The datasets the shipped recipes read, as stand-ins: llama/demo reads data/synth/corpus relative to the
// working directory, and validation refuses a dataset that is not there (train would stop at once). Tests that
// validate every shipped recipe run where these exist: one folder per test program, removed at its exit.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "config/config.h"
#include "data/blended_dataset.h"
#include "data/indexed_dataset.h"

namespace sg::test {

class ShippedRecipeData {
 public:
  ShippedRecipeData()
      : dir_(std::filesystem::temp_directory_path() / ("sg_shipped_recipe_data_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir_);
    for (const std::string& name : config::shipped_recipe_names()) {
      const config::Config c = config::load_config(name);
      if (c.dataset.mock) continue;
      for (const data::WeightedPrefix& p : data::parse_data_path(c.dataset.data_path)) {
        const std::filesystem::path path = dir_ / p.prefix;
        std::filesystem::create_directories(path.parent_path());
        data::IndexedDatasetWriter writer(path.string(), data::TokenDtype::uint16);
        writer.add_document(std::vector<int32_t>{1, 2, 3});
        writer.finalize();
      }
    }
  }
  ~ShippedRecipeData() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ShippedRecipeData(const ShippedRecipeData&) = delete;
  ShippedRecipeData& operator=(const ShippedRecipeData&) = delete;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// Made on first use.
inline const std::filesystem::path& shipped_recipe_data_dir() {
  static const ShippedRecipeData data;
  return data.dir();
}

// The working directory is shipped_recipe_data_dir() while this lives (config validation reads relative
// dataset prefixes from it).
class InShippedRecipeDataDir {
 public:
  InShippedRecipeDataDir() : previous_(std::filesystem::current_path()) {
    std::filesystem::current_path(shipped_recipe_data_dir());
  }
  ~InShippedRecipeDataDir() {
    std::error_code ec;
    std::filesystem::current_path(previous_, ec);
  }
  InShippedRecipeDataDir(const InShippedRecipeDataDir&) = delete;
  InShippedRecipeDataDir& operator=(const InShippedRecipeDataDir&) = delete;

 private:
  std::filesystem::path previous_;
};

}  // namespace sg::test
