// The writer of indexed datasets (data/indexed_dataset.h): PREFIX.bin and PREFIX.idx written as temporaries,
// fsynced and renamed into place.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/strings.h"
#include "data/indexed_dataset.h"

namespace sg::data {

namespace {

// Makes the folder's entries (a removal, a rename) durable; returns why not ("" when done).
std::string sync_folder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return strprintf("cannot open folder %s to sync it: %s", dir.c_str(), std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? std::string() : strprintf("cannot fsync folder %s: %s", dir.c_str(), std::strerror(err));
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, TokenDtype dtype)
    : prefix_(prefix), dtype_(dtype) {
  SG_CHECK(dtype != TokenDtype::float32 && dtype != TokenDtype::float64,
           "IndexedDatasetWriter: token dtype must be an integer type");
  // A prefix names files: "", "dir/" or an existing folder would write hidden ".bin"/".idx" files.
  std::error_code ec;
  if (prefix.empty() || prefix.back() == '/' || std::filesystem::is_directory(prefix, ec)) {
    throw Error(
        strprintf("dataset prefix '%s' names a folder, not files: give a prefix such as %s "
                  "(it writes PREFIX.bin and PREFIX.idx)",
                  prefix.c_str(), (std::filesystem::path(prefix) / "corpus").string().c_str()));
  }
  const std::filesystem::path parent = std::filesystem::path(prefix).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);  // fopen reports failures
  const std::string tmp = bin_path(prefix) + ".tmp";
  bin_ = std::fopen(tmp.c_str(), "wb");
  if (bin_ == nullptr) {
    throw Error(strprintf("cannot create data file %s: %s", tmp.c_str(), std::strerror(errno)));
  }
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (bin_ != nullptr) {
    std::fclose(bin_);
    std::remove((bin_path(prefix_) + ".tmp").c_str());
  }
}

void IndexedDatasetWriter::add_sequence(std::span<const int32_t> tokens) {
  SG_CHECK(!finalized_, "IndexedDatasetWriter: add after finalize()");
  // The .idx format stores each sequence's length as int32 (Megatron's layout), as the Python writer refuses too.
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    throw Error(
        strprintf("%s: a sequence of %zu tokens does not fit the .idx format's int32 sequence length (at most "
                  "%d tokens); split the document into smaller sequences",
                  prefix_.c_str(), tokens.size(), INT32_MAX));
  }
  int64_t lo = 0, hi = 0;
  switch (dtype_) {
    case TokenDtype::uint8:
      lo = 0;
      hi = UINT8_MAX;
      break;
    case TokenDtype::int8:
      lo = INT8_MIN;
      hi = INT8_MAX;
      break;
    case TokenDtype::int16:
      lo = INT16_MIN;
      hi = INT16_MAX;
      break;
    case TokenDtype::uint16:
      lo = 0;
      hi = UINT16_MAX;
      break;
    default:
      lo = INT32_MIN;
      hi = INT32_MAX;
      break;
  }
  const size_t item = token_dtype_size(dtype_);
  scratch_.resize(tokens.size() * item);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t t = tokens[i];
    if (t < lo || t > hi) {
      throw Error(strprintf("%s: token id %lld does not fit the dataset dtype %s", prefix_.c_str(),
                            static_cast<long long>(t), token_dtype_name(dtype_)));
    }
    uint8_t* dst = scratch_.data() + i * item;
    switch (dtype_) {
      case TokenDtype::uint8:
      case TokenDtype::int8: dst[0] = static_cast<uint8_t>(t); break;
      case TokenDtype::int16:
      case TokenDtype::uint16: {
        const uint16_t v = static_cast<uint16_t>(t);
        std::memcpy(dst, &v, 2);
        break;
      }
      case TokenDtype::int32: {
        const int32_t v = static_cast<int32_t>(t);
        std::memcpy(dst, &v, 4);
        break;
      }
      default: std::memcpy(dst, &t, 8); break;
    }
  }
  if (!scratch_.empty() && std::fwrite(scratch_.data(), 1, scratch_.size(), bin_) != scratch_.size()) {
    throw Error(strprintf("cannot write data file %s.tmp: %s", bin_path(prefix_).c_str(), std::strerror(errno)));
  }
  sequence_lengths_.push_back(static_cast<int32_t>(tokens.size()));
  num_tokens_ += tokens.size();
}

void IndexedDatasetWriter::end_document() {
  document_index_.push_back(static_cast<int64_t>(sequence_lengths_.size()));
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  add_sequence(tokens);
  end_document();
}

void IndexedDatasetWriter::finalize() {
  SG_CHECK(!finalized_, "IndexedDatasetWriter: finalize() called twice");
  finalized_ = true;
  const std::string bin_tmp = bin_path(prefix_) + ".tmp";
  const bool bin_synced = std::fflush(bin_) == 0 && ::fsync(::fileno(bin_)) == 0;
  const int sync_errno = errno;
  const bool bin_ok = std::fclose(bin_) == 0 && bin_synced;
  const int close_errno = errno;
  bin_ = nullptr;  // closed: from here on finalize() removes the temporaries itself on failure
  if (!bin_ok) {
    ::unlink(bin_tmp.c_str());
    throw Error(strprintf("cannot write data file %s: %s", bin_tmp.c_str(),
                          std::strerror(bin_synced ? close_errno : sync_errno)));
  }

  std::vector<uint8_t> idx;
  auto put = [&idx](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    idx.insert(idx.end(), b, b + n);
  };
  const uint64_t version = kIndexVersion;
  const uint8_t code = static_cast<uint8_t>(dtype_);
  const uint64_t seq_count = sequence_lengths_.size();
  const uint64_t doc_entries = document_index_.size();
  put(kIndexMagic, sizeof(kIndexMagic));
  put(&version, 8);
  put(&code, 1);
  put(&seq_count, 8);
  put(&doc_entries, 8);
  put(sequence_lengths_.data(), seq_count * 4);
  int64_t offset = 0;
  for (const int32_t length : sequence_lengths_) {
    put(&offset, 8);
    offset += static_cast<int64_t>(length) * static_cast<int64_t>(token_dtype_size(dtype_));
  }
  put(document_index_.data(), doc_entries * 8);

  const std::string idx_tmp = index_path(prefix_) + ".tmp";
  bool idx_created = false;
  try {
    std::FILE* f = std::fopen(idx_tmp.c_str(), "wb");
    if (f == nullptr) {
      throw Error(strprintf("cannot create index file %s: %s", idx_tmp.c_str(), std::strerror(errno)));
    }
    idx_created = true;
    const bool idx_written =
        std::fwrite(idx.data(), 1, idx.size(), f) == idx.size() && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
    const int write_errno = errno;
    if (std::fclose(f) != 0 || !idx_written) {
      throw Error(strprintf("cannot write index file %s: %s", idx_tmp.c_str(),
                            std::strerror(idx_written ? errno : write_errno)));
    }
    replace_pair(idx_tmp);
  } catch (...) {
    // Nothing of this writer stays behind: neither temporary (a failed replace_pair says what it
    // left under the final names). unlink, not remove: a folder in the way is not ours to delete.
    ::unlink(bin_tmp.c_str());
    if (idx_created) ::unlink(idx_tmp.c_str());
    throw;
  }
}

// Replacing the pair. Two renames cannot be one atomic step, and the .idx ties itself to its .bin
// only through the sequence lengths: the reader accepts an .idx whose sequences tile the .bin
// exactly, so a stale .idx beside a new .bin of the same size (data synth --force with the same
// --tokens and another --seed, or the same text under another tokenizer of the same dtype) would be
// read as valid, with wrong document boundaries and sequence lengths. So the old .idx is removed
// first (and that removal made durable), then the .bin and last the .idx are renamed into place: a
// crash at any point leaves either the old pair, or a .bin without its .idx (reported as a missing
// .idx, with the left-over PREFIX.idx.tmp named: check_dataset_exists), or the new pair; never a
// .bin beside an .idx written for other data. Both temporaries are fsynced before the renames and
// the folder after them, so the new pair survives a power loss once finalize() returns.
void IndexedDatasetWriter::replace_pair(const std::string& idx_tmp) {
  const std::string bin_tmp = bin_path(prefix_) + ".tmp";
  const std::filesystem::path parent = std::filesystem::path(prefix_).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const bool removed_old = ::unlink(index_path(prefix_).c_str()) == 0;
  if (removed_old) {
    if (const std::string why = sync_folder(dir); !why.empty()) {
      throw Error(
          strprintf("%s, after removing the old index file %s to replace it: %s holds the old data "
                    "without its index now; fix the cause and write %s again",
                    why.c_str(), index_path(prefix_).c_str(), bin_path(prefix_).c_str(), prefix_.c_str()));
    }
  } else if (errno != ENOENT) {
    throw Error(
        strprintf("cannot remove the old index file %s to replace it: %s (nothing was replaced; "
                  "remove or move it, then write %s again)",
                  index_path(prefix_).c_str(), std::strerror(errno), prefix_.c_str()));
  }
  if (std::rename(bin_tmp.c_str(), bin_path(prefix_).c_str()) != 0) {
    const int err = errno;
    throw Error(strprintf("cannot rename %s to %s: %s%s; fix the cause and write %s again", bin_tmp.c_str(),
                          bin_path(prefix_).c_str(), std::strerror(err),
                          removed_old ? strprintf(" (the old index file %s was removed already, so %s is no "
                                                  "dataset now)",
                                                  index_path(prefix_).c_str(), prefix_.c_str())
                                            .c_str()
                                      : "",
                          prefix_.c_str()));
  }
  if (std::rename(idx_tmp.c_str(), index_path(prefix_).c_str()) != 0) {
    throw Error(
        strprintf("cannot rename %s to %s: %s; %s holds the new data without its index: fix the "
                  "cause and write %s again",
                  idx_tmp.c_str(), index_path(prefix_).c_str(), std::strerror(errno), bin_path(prefix_).c_str(),
                  prefix_.c_str()));
  }
  if (const std::string why = sync_folder(dir); !why.empty()) {
    throw Error(
        strprintf("%s, after renaming %s and %s into place: a crash now could lose them; write %s "
                  "again",
                  why.c_str(), bin_path(prefix_).c_str(), index_path(prefix_).c_str(), prefix_.c_str()));
  }
}

}  // namespace sg::data
