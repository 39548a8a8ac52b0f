#include "train/earlier_run.h"

#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/strings.h"

namespace sg::train {

namespace fs = std::filesystem;

std::optional<std::string> keep_earlier_run(const std::string& run_dir) {
  const fs::path dir(run_dir);
  std::error_code ec;
  const auto metrics_size = fs::file_size(dir / "metrics.jsonl", ec);
  if (ec || metrics_size == 0) return std::nullopt;

  fs::path archive;
  for (int k = 1;; ++k) {
    archive = dir / "previous" / strprintf("run-%d", k);
    if (!fs::exists(archive, ec)) break;
  }
  fs::create_directories(archive, ec);
  if (ec) {
    throw Error(strprintf("%s holds an earlier run's metrics.jsonl, which this run keeps by moving it to %s, but "
                          "that folder cannot be created: %s. Free the disk or fix the permissions, or choose "
                          "another --run-dir",
                          run_dir.c_str(), archive.string().c_str(), ec.message().c_str()));
  }
  for (const char* name : kRunFolderFiles) {
    const fs::path from = dir / name;
    if (!fs::exists(from, ec)) continue;
    fs::rename(from, archive / name, ec);
    if (ec) {
      throw Error(strprintf("cannot move the earlier run's %s to %s: %s. Fix the permissions, or choose another "
                            "--run-dir",
                            from.string().c_str(), archive.string().c_str(), ec.message().c_str()));
    }
  }
  return archive.string();
}

}  // namespace sg::train
