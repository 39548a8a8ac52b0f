#pragma once
// Paths compared as directories: what the checkpoint folders, the save-directory policy and validation's
// rules need to tell that two spellings name one folder. And a path as messages name it.
#include <filesystem>
#include <string>

namespace sg {

// `path` absolute, without `.`, `..`, symlinks or trailing separators: the parent of "x/iter_2/" must be
// "x", not "x/iter_2" (which once let checkpoint.overwrite delete the checkpoint to load). Missing parts
// are normalized lexically, so it also serves before the folders exist.
std::filesystem::path normalized_directory(const std::string& path);

// Whether two paths name the same directory (both normalized_directory: links, relative parts and trailing
// separators resolved; a missing one is compared by its normalized path).
bool same_directory(const std::string& a, const std::string& b);

// `path` as an error names it: as written, plus what a relative path was resolved against, "data/corpus
// (relative to the working directory /tmp/x)"; an absolute (or empty) path as it is. A path in a YAML config or
// an override is relative to the working directory, not to the YAML file's folder, so a missing one says where
// it was looked for.
std::string describe_path(const std::string& path);

}  // namespace sg
