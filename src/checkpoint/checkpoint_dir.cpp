#include "checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc >= 2.28)
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>

#include "checkpoint/durable_io.h"
#include "checkpoint/file_checksum.h"
#include "checkpoint/finite_check.h"
#include "checkpoint/retention.h"
#include "core/error.h"
#include "core/log.h"
#include "core/paths.h"
#include "core/strings.h"

namespace sg::checkpoint {

namespace fs = std::filesystem;

namespace {

void stage(const SaveHooks& hooks, const char* name) {
  if (hooks.on_stage) hooks.on_stage(name);
}

// The iteration folder an "iter_NNNNNNN.old-<pid>" name was moved aside from ("" for any other name): a re-save on a
// filesystem that cannot swap folders moves the previous one there for a moment (move_into_place).
std::string moved_aside_from(const std::string& name) {
  const size_t old = name.find(".old-");
  return name.rfind("iter_", 0) == 0 && old != std::string::npos ? name.substr(0, old) : std::string();
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
  if (std::rename(final_path.c_str(), old.c_str()) != 0) {
    throw Error(strprintf("cannot replace %s: %s", final_path.c_str(), std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    // The previous folder goes back, so `latest` names a whole one.
    const bool restored = std::rename(old.c_str(), final_path.c_str()) == 0;
    throw Error(strprintf("cannot replace %s: %s (%s)", final_path.c_str(), std::strerror(err),
                          restored ? "the previous folder is back in place"
                                   : ("the previous folder is at " + old + "; rename it back").c_str()));
  }
  fs::remove_all(old, ec);
}

}  // namespace

std::string iteration_dir_name(int64_t iteration) {
  return strprintf("iter_%07lld", static_cast<long long>(iteration));
}

namespace {

// The iteration of an "iter_NNNNNNN" folder name, or -1 for any other name (temporaries included).
int64_t iteration_of_folder(const std::string& name) {
  if (name.size() < 6 || name.rfind("iter_", 0) != 0) return -1;
  int64_t value = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || value > (INT64_MAX - 9) / 10) return -1;
    value = value * 10 + (name[i] - '0');
  }
  return value;
}

// A file's name in the folder (a copied one, or one train_state.json records): a relative path that stays inside it
// (no "..", ".", or empty parts).
bool is_path_inside_folder(const std::string& filename) {
  const fs::path path(filename);
  bool inside = !filename.empty() && path.is_relative();
  for (const fs::path& part : path) inside = inside && !part.empty() && part != "." && part != "..";
  return inside;
}

fs::path checked_relative_path(const std::string& filename) {
  SG_CHECK(is_path_inside_folder(filename),
           "checkpoint: a copied file's name must be a relative path inside the folder, got \"" + filename + "\"");
  return fs::path(filename);
}

nlohmann::json digest_json(const FileDigest& d) {
  return nlohmann::json{{"bytes", d.bytes}, {"crc32", crc32_hex(d.crc32)}};
}

// Writes every file of `contents` into `tmp` (the checksums file last, with the digests of the
// others) and fsyncs the folder.
void write_contents(const std::string& tmp, const CheckpointContents& contents, const SaveHooks& hooks) {
  nlohmann::json digests = nlohmann::json::object();
  for (const TensorFile& f : contents.tensor_files) {
    digests[f.filename] = digest_json(write_safetensors(tmp + "/" + f.filename, f.tensors, f.metadata, hooks.on_write));
  }
  auto write_text = [&](const std::string& filename, const std::string& text) {
    DurableFileWriter writer(tmp + "/" + filename, text.size(), hooks.on_write);
    writer.write(text.data(), text.size());
    writer.close();
    digests[filename] = digest_json({writer.written(), writer.crc32()});
  };
  auto write_json = [&](const JsonFile& f, const nlohmann::json& content) {
    write_text(f.filename, content.dump(2) + "\n");
  };
  // A copied file's subfolders are made here and fsynced after their files, so the entries are durable before the
  // folder is renamed into place (fsync_directory(tmp) below covers the subfolders' own entries).
  std::vector<fs::path> subfolders;
  for (const CopiedFile& f : contents.copied_files) {
    const fs::path relative = checked_relative_path(f.filename);
    for (fs::path sub = relative.parent_path(); !sub.empty(); sub = sub.parent_path()) {
      if (std::find(subfolders.begin(), subfolders.end(), sub) == subfolders.end()) subfolders.push_back(sub);
    }
    if (relative.has_parent_path()) {
      std::error_code ec;
      fs::create_directories(fs::path(tmp) / relative.parent_path(), ec);
      if (ec) {
        throw Error(
            strprintf("cannot create %s/%s: %s", tmp.c_str(), relative.parent_path().c_str(), ec.message().c_str()));
      }
    }
    write_text(f.filename, read_text_file(f.source));
  }
  for (const TextFile& f : contents.text_files) {
    SG_CHECK(!checked_relative_path(f.filename).has_parent_path(),
             "checkpoint: a text file's name must be a name in the folder, got \"" + f.filename + "\"");
    write_text(f.filename, f.text);
  }
  // Deepest first: a subfolder's entry lies in its parent.
  std::sort(subfolders.begin(), subfolders.end(), [](const fs::path& a, const fs::path& b) {
    return std::distance(a.begin(), a.end()) > std::distance(b.begin(), b.end());
  });
  for (const fs::path& sub : subfolders) fsync_directory((fs::path(tmp) / sub).string());
  const JsonFile* checksums_file = nullptr;
  for (const JsonFile& f : contents.json_files) {
    if (f.filename == contents.checksums_into) {
      checksums_file = &f;
    } else {
      write_json(f, f.content);
    }
  }
  if (checksums_file != nullptr) {
    nlohmann::json content = checksums_file->content;
    content[kFileChecksumsKey] = digests;
    // A file that carries its own checksum (train_state.json) is sealed again, so that it covers the digests.
    if (content.is_object() && content.contains(kStateChecksumKey)) seal_train_state_json(content);
    write_json(*checksums_file, content);
  }
  fsync_directory(tmp);
}

}  // namespace

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
    // A re-save that stopped between its two renames: the folder moved aside is the only copy when its iteration
    // folder is missing, and goes back; otherwise it is a leftover.
    const std::string from = moved_aside_from(name);
    if (from.empty()) continue;
    const fs::path original = fs::path(dir) / from;
    if (fs::exists(original, ec)) {
      log::info("checkpoint: removing " + entry.path().string() + " left by an interrupted re-save");
      fs::remove_all(entry.path(), ec);
    } else if (std::rename(entry.path().c_str(), original.c_str()) == 0) {
      log::warn("checkpoint: " + entry.path().string() + " was moved aside by an interrupted re-save: restored as " +
                original.string());
    }
  }
  const std::string final_path = dir + "/" + iteration_dir_name(iteration);
  const std::string tmp = strprintf("%s.tmp-%d", final_path.c_str(), static_cast<int>(::getpid()));
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec) || ec) {
    throw Error(
        strprintf("cannot create %s: %s", tmp.c_str(), ec ? ec.message().c_str() : "exists"));
  }
  try {
    write_contents(tmp, contents, hooks);
  } catch (...) {
    // A failed save (disk full, I/O error) leaves nothing behind; `latest` still names the last
    // whole checkpoint.
    fs::remove_all(tmp, ec);
    throw;
  }
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
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  if (!fs::is_regular_file(path, ec)) {
    throw Error(strprintf("%s is %s, not the file naming the newest iteration; remove it (the "
                          "iteration folders iter_NNNNNNN beside it are the checkpoints)",
                          path.c_str(), fs::is_directory(path, ec) ? "a directory" : "not a regular file"));
  }
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

std::vector<int64_t> list_iterations(const std::string& dir) {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t it = iteration_of_folder(entry.path().filename().string());
    if (it >= 0 && entry.is_directory(ec)) out.push_back(it);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool holds_checkpoints(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(fs::path(dir) / kLatestFile, ec)) || !list_iterations(dir).empty();
}

std::vector<int64_t> remove_checkpoints(const std::string& dir) {
  const std::vector<int64_t> iterations = list_iterations(dir);
  std::error_code ec;
  // `latest` first: a crash in the middle leaves folders without a latest file, never a latest
  // file naming a removed folder.
  fs::remove_all(fs::path(dir) / kLatestFile, ec);
  if (ec) throw Error(strprintf("cannot remove %s/%s: %s", dir.c_str(), kLatestFile, ec.message().c_str()));
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (iteration_of_folder(name) >= 0 || is_stale_tmp(name) || !moved_aside_from(name).empty() ||
        is_removal_leftover(name)) {
      fs::remove_all(entry.path(), ec);
      if (ec) throw Error(strprintf("cannot remove %s: %s", entry.path().c_str(), ec.message().c_str()));
    }
  }
  fsync_directory(dir);
  return iterations;
}

namespace {
// "iter_0000001, ..., iter_0000009, iter_0000010": the first and the last two of many.
std::string iteration_list_text(const std::vector<int64_t>& iterations) {
  std::vector<std::string> names;
  for (size_t i = 0; i < iterations.size(); ++i) {
    if (iterations.size() > 4 && i == 1) names.push_back("...");
    if (iterations.size() > 4 && i >= 1 && i + 2 < iterations.size()) continue;
    names.push_back(iteration_dir_name(iterations[i]));
  }
  return join(names, ", ");
}
}  // namespace

std::string iteration_folders_hint(const std::string& dir) {
  const std::vector<int64_t> iterations = list_iterations(dir);
  if (iterations.empty()) return "";
  const long long newest = static_cast<long long>(iterations.back());
  return strprintf(
      "; it holds %s but no %s (the file a save writes last, naming the newest whole iteration): "
      "name an iteration folder, e.g. %s/%s, or write %lld into %s/%s if that iteration is whole",
      iteration_list_text(iterations).c_str(), kLatestFile, dir.c_str(), iteration_dir_name(newest).c_str(), newest,
      dir.c_str(), kLatestFile);
}

bool is_checkpoint_folder(const std::string& folder) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(folder) / kTrainStateFile, ec);
}

CheckpointFolder find_checkpoint_folder(const std::string& given, const std::string& what) {
  // "x/iter_N/" -> "x/iter_N": its filename is then the iteration the folder is checked against.
  std::string path = given;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    if (fs::exists(path, ec)) {
      throw Error(
          strprintf("%s %s is a file, not a checkpoint folder: name a save directory (with "
                    "%s) or one of its iter_NNNNNNN folders",
                    what.c_str(), path.c_str(), kLatestFile));
    }
    throw Error(strprintf("%s %s: no such directory", what.c_str(), describe_path(path).c_str()));
  }
  if (const auto latest = read_latest_iteration(path)) {
    const std::string iter_dir = path + "/" + iteration_dir_name(*latest);
    if (!fs::is_directory(iter_dir, ec)) {
      const std::vector<int64_t> iterations = list_iterations(path);
      const std::string there =
          iterations.empty()
              ? strprintf("; %s holds no iteration folder: restore them from a backup, or start over", path.c_str())
              : strprintf("; %s holds %s: name one (e.g. %s=%s/%s), or write %lld into %s/%s if that iteration is "
                          "whole",
                          path.c_str(), iteration_list_text(iterations).c_str(), what.c_str(), path.c_str(),
                          iteration_dir_name(iterations.back()).c_str(), static_cast<long long>(iterations.back()),
                          path.c_str(), kLatestFile);
      throw Error(strprintf("%s %s: %s names iteration %lld but %s is missing%s", what.c_str(), path.c_str(),
                            kLatestFile, static_cast<long long>(*latest), iter_dir.c_str(), there.c_str()));
    }
    return {iter_dir, false};
  }
  if (fs::exists(path + "/" + kTrainStateFile, ec) || fs::exists(path + "/" + kModelFile, ec)) return {path, false};
  // No latest file, but iteration folders: a save killed after renaming its folder into place (whole: it is
  // renamed only after every file and the folder are fsynced) and before writing `latest`.
  const std::vector<int64_t> iterations = list_iterations(path);
  if (!iterations.empty()) {
    const std::string newest = path + "/" + iteration_dir_name(iterations.back());
    if (is_checkpoint_folder(newest)) return {newest, true};
  }
  throw Error(strprintf("%s %s: not a checkpoint (no %s, and no %s or %s inside)%s", what.c_str(), path.c_str(),
                        kLatestFile, kTrainStateFile, kModelFile, iteration_folders_hint(path).c_str()));
}

std::string resolve_checkpoint(const std::string& given, const std::string& what) {
  return find_checkpoint_folder(given, what).path;
}

CheckpointContents training_checkpoint_contents(const TrainingCheckpoint& checkpoint) {
  CheckpointContents c;
  c.tensor_files.push_back({kModelFile, checkpoint.model, {}});
  c.tensor_files.push_back({kOptimizerMainParamsFile, checkpoint.main_params, {}});
  c.tensor_files.push_back({kOptimizerExpAvgFile, checkpoint.exp_avg, {}});
  c.tensor_files.push_back({kOptimizerExpAvgSqFile, checkpoint.exp_avg_sq, {}});
  if (!checkpoint.model_config.is_null()) c.json_files.push_back({kConfigFile, checkpoint.model_config});
  c.json_files.push_back({kTrainStateFile, checkpoint.state.to_json()});
  c.copied_files = checkpoint.extra_files;
  c.text_files = checkpoint.extra_texts;
  c.checksums_into = kTrainStateFile;
  return c;
}

namespace {

// train_state.json of `dir`, parsed.
nlohmann::json read_state_json(const std::string& state_path) {
  try {
    return nlohmann::json::parse(read_text_file(state_path));
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for a number past double (1e999)
    throw Error(strprintf("train state %s is not valid JSON: %s", state_path.c_str(), e.what()));
  }
}

}  // namespace

// For checkpoint.load the iteration before is older than its directory's `latest`, so a run saving into the same
// directory is refused (it would move `latest` back over the damaged folder): the advice names another
// checkpoint.save. A folder that is only read (pretrained_checkpoint, generate) can simply be swapped for it.
std::string damaged_checkpoint_advice(const std::string& dir, const std::string& what) {
  const fs::path folder = fs::path(dir);
  const fs::path parent = folder.has_parent_path() ? folder.parent_path() : fs::path(".");
  const int64_t iteration = iteration_of_folder(folder.filename().string());
  if (iteration < 0) return strprintf("Restore %s from a backup", dir.c_str());
  const std::vector<int64_t> iterations = list_iterations(parent.string());
  const auto earlier = std::lower_bound(iterations.begin(), iterations.end(), iteration);
  if (earlier == iterations.begin()) {
    return strprintf("%s holds no earlier iteration: restore %s from a backup, or start over", parent.c_str(),
                     dir.c_str());
  }
  const std::string previous = (parent / iteration_dir_name(*std::prev(earlier))).string();
  if (what != "checkpoint.load") {
    return strprintf("To use the iteration before it, set %s to %s; or restore %s from a backup", what.c_str(),
                     previous.c_str(), dir.c_str());
  }
  return strprintf(
      "To continue from the iteration before it, set checkpoint.load=%s and checkpoint.save to another "
      "directory (a run saving into %s may only resume its latest iteration, this damaged one), or move %s "
      "aside and write %lld into %s/%s; or restore %s from a backup",
      previous.c_str(), parent.c_str(), dir.c_str(), static_cast<long long>(*std::prev(earlier)), parent.c_str(),
      kLatestFile, dir.c_str());
}

namespace {

// The recorded digests, by file name; empty when the checkpoint predates checksums.
std::map<std::string, FileDigest> recorded_digests(const nlohmann::json& state, const std::string& state_path) {
  std::map<std::string, FileDigest> out;
  if (!state.is_object() || !state.contains(kFileChecksumsKey)) return out;
  const nlohmann::json& sums = state[kFileChecksumsKey];
  auto malformed = [&](const std::string& what) {
    return Error(strprintf("train state %s: \"%s\" is malformed (%s); the file was edited or damaged",
                           state_path.c_str(), kFileChecksumsKey, what.c_str()));
  };
  if (!sums.is_object()) throw malformed("not an object");
  for (auto it = sums.begin(); it != sums.end(); ++it) {
    // The save records only files inside the folder; any other name would make the check read outside it.
    if (!is_path_inside_folder(it.key())) throw malformed("\"" + it.key() + "\" is no file inside the checkpoint");
    const nlohmann::json& v = it.value();
    if (!v.is_object() || !v.contains("bytes") || !v["bytes"].is_number_unsigned() || !v.contains("crc32") ||
        !v["crc32"].is_string()) {
      throw malformed("entry " + it.key() + " = " + v.dump());
    }
    const std::string hex = v["crc32"].get<std::string>();
    char* end = nullptr;
    const unsigned long crc = std::strtoul(hex.c_str(), &end, 16);
    if (hex.size() != 8 || end != hex.c_str() + hex.size()) throw malformed("crc32 of " + it.key() + " = " + hex);
    out[it.key()] = FileDigest{v["bytes"].get<uint64_t>(), static_cast<uint32_t>(crc)};
  }
  return out;
}

// The file's size and CRC-32 must be the recorded ones.
void verify_digest(const std::string& dir, const std::string& filename,
                   const std::map<std::string, FileDigest>& recorded, const std::string& what) {
  const std::string path = dir + "/" + filename;
  const auto it = recorded.find(filename);
  if (it == recorded.end()) {
    throw Error(strprintf("checkpoint %s: %s/%s records no checksum for %s; the checkpoint is incomplete "
                          "or was assembled from several saves",
                          dir.c_str(), dir.c_str(), kTrainStateFile, filename.c_str()));
  }
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw Error(
        strprintf("checkpoint file %s is missing, but %s recorded it (%llu bytes, CRC-32 %s) when the "
                  "checkpoint was saved: the folder is incomplete (a partial copy, or a file removed). %s",
                  path.c_str(), kTrainStateFile, static_cast<unsigned long long>(it->second.bytes),
                  crc32_hex(it->second.crc32).c_str(), damaged_checkpoint_advice(dir, what).c_str()));
  }
  const FileDigest actual = file_digest(path);
  if (actual != it->second) {
    throw Error(
        strprintf("checkpoint file %s is corrupt: %llu bytes with CRC-32 %s, but %s recorded %llu bytes with CRC-32 %s "
                  "when it was saved (a bit flip, a truncated copy or an edit). %s",
                  path.c_str(), static_cast<unsigned long long>(actual.bytes), crc32_hex(actual.crc32).c_str(),
                  kTrainStateFile, static_cast<unsigned long long>(it->second.bytes),
                  crc32_hex(it->second.crc32).c_str(), damaged_checkpoint_advice(dir, what).c_str()));
  }
}

// An iter_NNNNNNN folder must hold iteration NNNNNNN.
void check_iteration_matches_folder(const std::string& dir, int64_t iteration) {
  const std::string name = fs::path(dir).filename().string();
  const int64_t folder_iteration = iteration_of_folder(name);
  if (folder_iteration >= 0 && folder_iteration != iteration) {
    throw Error(strprintf("checkpoint %s: %s says iteration %lld but the folder is %s; the folder was renamed "
                          "or holds another iteration's files. Load the folder named after its iteration",
                          dir.c_str(), kTrainStateFile, static_cast<long long>(iteration), name.c_str()));
  }
}

void check_all_finite(const SafetensorsFile& file) {
  if (const auto bad = find_nonfinite(file)) {
    throw Error(
        strprintf("checkpoint file %s holds non-finite values: %s. stepgraph never saves a "
                  "non-finite state, so the file is damaged or comes from a diverged run. %s",
                  file.path().c_str(), describe(*bad).c_str(),
                  damaged_checkpoint_advice(fs::path(file.path()).parent_path().string(), "checkpoint.load").c_str()));
  }
}

}  // namespace

TrainState verify_checkpoint_folder(const std::string& dir, const FolderVerification& options) {
  const std::string state_path = dir + "/" + kTrainStateFile;
  // A missing, unreadable or malformed train state is damage like any other: the folder's own way to continue.
  nlohmann::json state_json;
  TrainState state;
  try {
    state_json = read_state_json(state_path);
    state = TrainState::from_json(state_json, state_path);
  } catch (const CorruptTrainState& e) {
    throw Error(e.finding + " " + damaged_checkpoint_advice(dir, options.what));
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error(what + (what.empty() || what.back() == '.' ? " " : ". ") +
                damaged_checkpoint_advice(dir, options.what));
  }
  check_iteration_matches_folder(dir, state.iteration);
  const std::map<std::string, FileDigest> digests = recorded_digests(state_json, state_path);
  if (digests.empty()) {
    if (options.warn_without_checksums) {
      log::warn(
          strprintf("checkpoint %s has no file checksums (saved by an older stepgraph): its files "
                    "cannot be verified",
                    dir.c_str()));
    }
    return state;
  }
  // Every file the save recorded (config.json and the tokenizer's, which transformers reads, too), and
  // the tensor files the caller reads even when a checksum for them is missing.
  const auto read = [&](const std::string& name) {
    return std::find(options.tensor_files.begin(), options.tensor_files.end(), name) != options.tensor_files.end();
  };
  const auto tensor_file = [](const std::string& name) {
    const std::string ext = ".safetensors";
    return name.size() >= ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0;
  };
  for (const auto& entry : digests) {
    if (options.all_tensor_files || !tensor_file(entry.first) || read(entry.first)) {
      verify_digest(dir, entry.first, digests, options.what);
    }
  }
  for (const std::string& name : options.tensor_files) {
    if (digests.count(name) == 0) verify_digest(dir, name, digests, options.what);  // refused: not recorded
  }
  return state;
}

OpenedTrainingCheckpoint open_training_checkpoint(const std::string& path, const TrainingCheckpointDest& expected) {
  const std::string dir = resolve_checkpoint(path);
  OpenedTrainingCheckpoint out;
  struct Part {
    const char* filename;
    const std::vector<TensorDest>* expected;
    std::optional<SafetensorsFile>* file;
  };
  const Part parts[] = {{kModelFile, &expected.model, &out.model},
                        {kOptimizerMainParamsFile, &expected.main_params, &out.main_params},
                        {kOptimizerExpAvgFile, &expected.exp_avg, &out.exp_avg},
                        {kOptimizerExpAvgSqFile, &expected.exp_avg_sq, &out.exp_avg_sq}};
  FolderVerification verification{.what = "checkpoint.load"};
  for (const Part& part : parts) {
    if (!part.expected->empty()) verification.tensor_files.push_back(part.filename);
  }
  out.state = verify_checkpoint_folder(dir, verification);
  std::string errors;
  for (const Part& part : parts) {
    if (part.expected->empty()) continue;
    const SafetensorsFile& file = part.file->emplace(dir + "/" + part.filename);
    const auto diffs = file.differences(*part.expected);
    if (!diffs.empty()) {
      if (!errors.empty()) errors += '\n';
      errors += format_differences(file.path(), diffs);
    }
  }
  if (!errors.empty()) throw Error(errors);
  for (const Part& part : parts) {
    if (*part.file) check_all_finite(**part.file);
  }
  return out;
}

TrainState load_training_checkpoint(const std::string& path, const TrainingCheckpointDest& dest) {
  const OpenedTrainingCheckpoint opened = open_training_checkpoint(path, dest);
  const std::pair<const std::optional<SafetensorsFile>&, const std::vector<TensorDest>&> parts[] = {
      {opened.model, dest.model},
      {opened.main_params, dest.main_params},
      {opened.exp_avg, dest.exp_avg},
      {opened.exp_avg_sq, dest.exp_avg_sq}};
  for (const auto& [file, tensors] : parts) {
    if (file) file->copy_into(tensors);
  }
  return opened.state;
}

}  // namespace sg::checkpoint
