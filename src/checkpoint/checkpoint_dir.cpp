#include "checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc >= 2.28)
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "checkpoint/durable_io.h"

namespace sg::checkpoint {

namespace fs = std::filesystem;

namespace {

void stage(const SaveHooks& hooks, const char* name) {
  if (hooks.on_stage) hooks.on_stage(name);
}

// Temporaries of interrupted saves: iter_NNNNNNN.tmp-<pid> folders and latest-file temporaries.
bool is_stale_tmp(const std::string& name) {
  const bool iter_tmp = name.rfind("iter_", 0) == 0 && name.find(".tmp-") != std::string::npos;
  const bool latest_tmp = name.rfind(std::string(kLatestFile) + ".tmp-", 0) == 0;
  return iter_tmp || latest_tmp;
}

// Puts `tmp` at `final_path`. When final_path exists (re-saving an iteration), the two are swapped
// atomically with renameat2(RENAME_EXCHANGE) so there is no moment without a whole iter folder.
void move_into_place(const std::string& tmp, const std::string& final_path) {
  std::error_code ec;
  if (!fs::exists(final_path, ec)) {
    if (std::rename(tmp.c_str(), final_path.c_str()) != 0) {
      throw Error(strprintf("cannot rename %s to %s: %s", tmp.c_str(), final_path.c_str(),
                            std::strerror(errno)));
    }
    return;
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp, ec);  // now holds the previous contents
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
    throw Error(strprintf("cannot swap %s into %s: %s", tmp.c_str(), final_path.c_str(),
                          std::strerror(errno)));
  }
  // The filesystem cannot exchange: move the old folder aside first (a crash in between leaves the
  // old folder under the .old name and `latest` may name a missing folder; rare, and logged).
  const std::string old = strprintf("%s.old-%d", final_path.c_str(), static_cast<int>(::getpid()));
  log::warn("checkpoint: the filesystem cannot swap folders atomically; replacing " + final_path +
            " in two renames");
  if (std::rename(final_path.c_str(), old.c_str()) != 0 ||
      std::rename(tmp.c_str(), final_path.c_str()) != 0) {
    throw Error(strprintf("cannot replace %s: %s", final_path.c_str(), std::strerror(errno)));
  }
  fs::remove_all(old, ec);
}

}  // namespace

std::string iteration_dir_name(int64_t iteration) {
  return strprintf("iter_%07lld", static_cast<long long>(iteration));
}

std::string save_checkpoint(const std::string& dir, int64_t iteration,
                            const CheckpointContents& contents, const SaveHooks& hooks) {
  SG_CHECK(iteration >= 0, strprintf("save_checkpoint: negative iteration %lld",
                                     static_cast<long long>(iteration)));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error(
        strprintf("cannot create checkpoint directory %s: %s", dir.c_str(), ec.message().c_str()));
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (is_stale_tmp(name)) {
      log::info("checkpoint: removing " + entry.path().string() + " left by an interrupted save");
      fs::remove_all(entry.path(), ec);
    }
  }
  const std::string final_path = dir + "/" + iteration_dir_name(iteration);
  const std::string tmp = strprintf("%s.tmp-%d", final_path.c_str(), static_cast<int>(::getpid()));
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec) || ec) {
    throw Error(
        strprintf("cannot create %s: %s", tmp.c_str(), ec ? ec.message().c_str() : "exists"));
  }

  for (const TensorFile& f : contents.tensor_files) {
    write_safetensors(tmp + "/" + f.filename, f.tensors, f.metadata, hooks.on_write);
  }
  for (const JsonFile& f : contents.json_files) {
    const std::string text = f.content.dump(2) + "\n";
    DurableFileWriter writer(tmp + "/" + f.filename, text.size(), hooks.on_write);
    writer.write(text.data(), text.size());
    writer.close();
  }
  for (const CopiedFile& f : contents.copied_files) {
    const std::string text = read_text_file(f.source);
    DurableFileWriter writer(tmp + "/" + f.filename, text.size(), hooks.on_write);
    writer.write(text.data(), text.size());
    writer.close();
  }
  fsync_directory(tmp);
  stage(hooks, "files_written");

  move_into_place(tmp, final_path);
  fsync_directory(dir);
  stage(hooks, "renamed");

  write_file_atomically(dir + "/" + kLatestFile, std::to_string(iteration) + "\n");
  stage(hooks, "latest_written");
  return final_path;
}

std::optional<int64_t> read_latest_iteration(const std::string& dir) {
  const std::string path = dir + "/" + kLatestFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  const std::string text = trim(read_text_file(path));
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || end != text.c_str() + text.size() || value < 0) {
    throw Error(strprintf("%s holds \"%s\"; expected an iteration number (e.g. 100)", path.c_str(),
                          text.c_str()));
  }
  return value;
}

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    throw Error(strprintf("checkpoint.load %s: no such directory", path.c_str()));
  }
  if (const auto latest = read_latest_iteration(path)) {
    const std::string iter_dir = path + "/" + iteration_dir_name(*latest);
    if (!fs::is_directory(iter_dir, ec)) {
      throw Error(strprintf("checkpoint.load %s: %s names iteration %lld but %s is missing",
                            path.c_str(), kLatestFile, static_cast<long long>(*latest),
                            iter_dir.c_str()));
    }
    return iter_dir;
  }
  if (fs::exists(path + "/" + kTrainStateFile, ec) || fs::exists(path + "/" + kModelFile, ec))
    return path;
  throw Error(strprintf("checkpoint.load %s: not a checkpoint (no %s, and no %s or %s inside)",
                        path.c_str(), kLatestFile, kTrainStateFile, kModelFile));
}

CheckpointContents training_checkpoint_contents(const TrainingCheckpoint& checkpoint) {
  CheckpointContents c;
  c.tensor_files.push_back({kModelFile, checkpoint.model, {}});
  c.tensor_files.push_back({kOptimizerMainParamsFile, checkpoint.main_params, {}});
  c.tensor_files.push_back({kOptimizerExpAvgFile, checkpoint.exp_avg, {}});
  c.tensor_files.push_back({kOptimizerExpAvgSqFile, checkpoint.exp_avg_sq, {}});
  c.json_files.push_back({kConfigFile, checkpoint.model_config});
  c.json_files.push_back({kTrainStateFile, checkpoint.state.to_json()});
  for (const std::string& path : checkpoint.extra_files) {
    c.copied_files.push_back({path, fs::path(path).filename().string()});
  }
  return c;
}

TrainState load_training_checkpoint(const std::string& path, const TrainingCheckpointDest& dest) {
  const std::string dir = resolve_checkpoint(path);
  struct Part {
    const char* filename;
    const std::vector<TensorDest>* dest;
  };
  const Part parts[] = {{kModelFile, &dest.model},
                        {kOptimizerMainParamsFile, &dest.main_params},
                        {kOptimizerExpAvgFile, &dest.exp_avg},
                        {kOptimizerExpAvgSqFile, &dest.exp_avg_sq}};
  std::vector<std::pair<SafetensorsFile, const std::vector<TensorDest>*>> files;
  std::string errors;
  for (const Part& part : parts) {
    if (part.dest->empty()) continue;
    SafetensorsFile file(dir + "/" + part.filename);
    const auto diffs = file.differences(*part.dest);
    if (!diffs.empty()) {
      if (!errors.empty()) errors += '\n';
      errors += format_differences(file.path(), diffs);
    }
    files.emplace_back(std::move(file), part.dest);
  }
  if (!errors.empty()) throw Error(errors);

  const std::string state_path = dir + "/" + kTrainStateFile;
  nlohmann::json state_json;
  try {
    state_json = nlohmann::json::parse(read_text_file(state_path));
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(strprintf("train state %s is not valid JSON: %s", state_path.c_str(), e.what()));
  }
  TrainState state = TrainState::from_json(state_json, state_path);
  for (const auto& [file, tensors] : files) file.copy_into(*tensors);
  return state;
}

}  // namespace sg::checkpoint
