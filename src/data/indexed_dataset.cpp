#include "data/indexed_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/strings.h"
#include "data/token_scan.h"
#include "data/token_scan_share.h"

namespace sg::data {

size_t token_dtype_size(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::uint8:
    case TokenDtype::int8:
      return 1;
    case TokenDtype::int16:
    case TokenDtype::uint16:
      return 2;
    case TokenDtype::int32:
    case TokenDtype::float32:
      return 4;
    case TokenDtype::int64:
    case TokenDtype::float64:
      return 8;
  }
  return 0;
}

const char* token_dtype_name(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::uint8:
      return "uint8";
    case TokenDtype::int8:
      return "int8";
    case TokenDtype::int16:
      return "int16";
    case TokenDtype::int32:
      return "int32";
    case TokenDtype::int64:
      return "int64";
    case TokenDtype::float64:
      return "float64";
    case TokenDtype::float32:
      return "float32";
    case TokenDtype::uint16:
      return "uint16";
  }
  return "unknown";
}

TokenDtype token_dtype_for_vocab(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDtype::uint16 : TokenDtype::int32;
}

std::string index_path(const std::string& prefix) { return prefix + ".idx"; }
std::string bin_path(const std::string& prefix) { return prefix + ".bin"; }

namespace {

template <typename T>
T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Calls fn(token) for `count` tokens of `dtype` starting at `p` (integer dtypes only).
template <typename Fn>
void for_each_token(TokenDtype dtype, const uint8_t* p, uint64_t count, Fn&& fn) {
  switch (dtype) {
    case TokenDtype::uint8:
      for (uint64_t i = 0; i < count; ++i) fn(int64_t{p[i]});
      break;
    case TokenDtype::int8:
      for (uint64_t i = 0; i < count; ++i) fn(int64_t{load_le<int8_t>(p + i)});
      break;
    case TokenDtype::int16:
      for (uint64_t i = 0; i < count; ++i) fn(int64_t{load_le<int16_t>(p + 2 * i)});
      break;
    case TokenDtype::uint16:
      for (uint64_t i = 0; i < count; ++i) fn(int64_t{load_le<uint16_t>(p + 2 * i)});
      break;
    case TokenDtype::int32:
      for (uint64_t i = 0; i < count; ++i) fn(int64_t{load_le<int32_t>(p + 4 * i)});
      break;
    case TokenDtype::int64:
      for (uint64_t i = 0; i < count; ++i) fn(load_le<int64_t>(p + 8 * i));
      break;
    case TokenDtype::float32:
    case TokenDtype::float64:
      break;  // refused at open
  }
}

}  // namespace

IndexedDataset IndexedDataset::open(const std::string& prefix, int64_t vocab_size) {
  IndexedDataset ds = open_index(prefix);
  ds.scan_tokens(vocab_size, nullptr);
  return ds;
}

IndexedDataset IndexedDataset::open(const std::string& prefix, int64_t vocab_size, const ScanShare& share) {
  IndexedDataset ds = open_index(prefix);
  ds.scan_tokens(vocab_size, &share);
  return ds;
}

IndexedDataset IndexedDataset::open_index(const std::string& prefix) {
  IndexedDataset ds;
  ds.prefix_ = prefix;
  ds.idx_ = MappedFile(index_path(prefix), "index file");
  ds.bin_ = MappedFile(bin_path(prefix), "data file");
  ds.validate_index();
  return ds;
}

int32_t IndexedDataset::sequence_length(uint64_t s) const {
  return load_le<int32_t>(lengths_ + 4 * s);
}
int64_t IndexedDataset::sequence_offset(uint64_t s) const {
  return load_le<int64_t>(offsets_ + 8 * s);
}
int64_t IndexedDataset::document_index(uint64_t d) const {
  return load_le<int64_t>(documents_ + 8 * d);
}

uint64_t IndexedDataset::token_start(uint64_t s) const {
  // The sequences tile the .bin from byte 0 (checked at open), so a sequence's byte offset is its stream position
  // times the token size.
  return s < num_sequences_ ? static_cast<uint64_t>(sequence_offset(s)) / token_dtype_size(dtype_) : num_tokens();
}

uint64_t IndexedDataset::document_token_start(uint64_t d) const {
  return token_start(static_cast<uint64_t>(document_index(d)));
}

void IndexedDataset::validate_index() {
  const char* path = idx_.path().c_str();
  const size_t size = idx_.size();
  const uint8_t* p = idx_.data();
  if (size < kIndexHeaderBytes) {
    throw Error(
        strprintf("index file %s is truncated: %zu bytes, but the header alone is %zu bytes", path,
                  size, kIndexHeaderBytes));
  }
  if (std::memcmp(p, kIndexMagic, sizeof(kIndexMagic)) != 0) {
    std::string got;
    for (size_t i = 0; i < sizeof(kIndexMagic); ++i) got += strprintf("%02x", p[i]);
    throw Error(
        strprintf("index file %s has the wrong magic bytes (%s; expected \"MMIDIDX\\x00\\x00\"): "
                  "not a Megatron indexed dataset",
                  path, got.c_str()));
  }
  const uint64_t version = load_le<uint64_t>(p + 9);
  if (version != kIndexVersion) {
    throw Error(
        strprintf("index file %s has version %llu; only version 1 (Megatron MMIDIDX) is "
                  "supported",
                  path, static_cast<unsigned long long>(version)));
  }
  const uint8_t code = p[17];
  if (code < 1 || code > 8) {
    throw Error(
        strprintf("index file %s has unknown token dtype code %u (known: 1 uint8, 2 int8, "
                  "3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)",
                  path, unsigned{code}));
  }
  dtype_ = static_cast<TokenDtype>(code);
  if (dtype_ == TokenDtype::float32 || dtype_ == TokenDtype::float64) {
    throw Error(
        strprintf("index file %s stores tokens as %s (code %u); token ids must be an integer "
                  "dtype",
                  path, token_dtype_name(dtype_), unsigned{code}));
  }
  num_sequences_ = load_le<uint64_t>(p + 18);
  const uint64_t doc_entries = load_le<uint64_t>(p + 26);
  const uint64_t body = size - kIndexHeaderBytes;
  // Checked before multiplying so absurd counts cannot overflow.
  const bool fits = num_sequences_ <= body / 12 && doc_entries <= (body - num_sequences_ * 12) / 8;
  if (!fits) {
    throw Error(strprintf(
        "index file %s is truncated or its counts are wrong: the header says %llu sequences and "
        "%llu "
        "document index entries (%s bytes of arrays) but only %zu bytes follow the header",
        path, static_cast<unsigned long long>(num_sequences_),
        static_cast<unsigned long long>(doc_entries),
        num_sequences_ <= body && doc_entries <= body
            ? std::to_string(num_sequences_ * 12 + doc_entries * 8).c_str()
            : "more",
        static_cast<size_t>(body)));
  }
  if (doc_entries == 0) {
    throw Error(
        strprintf("index file %s is inconsistent: the document index is empty (it must hold "
                  "at least the leading 0 and the sequence count)",
                  path));
  }
  const uint64_t S = num_sequences_;
  document_entries_ = doc_entries;
  const uint8_t* arrays = p + kIndexHeaderBytes;
  lengths_ = arrays;
  offsets_ = arrays + S * 4;
  documents_ = arrays + S * 12;

  const uint64_t item = token_dtype_size(dtype_);
  const uint64_t bin_size = bin_.size();
  int64_t previous_end = 0;  // the end of sequence s - 1 in bytes
  // One pass over the arrays (an .idx of 10^9 sequences is 12 GB): the first gap between sequences is kept and
  // reported only after the loop, because a truncated .bin or a broken offset further on is the likelier cause and
  // says more.
  std::optional<uint64_t> first_gap;  // the first sequence that does not start where the previous one ended
  for (uint64_t s = 0; s < S; ++s) {
    const int64_t length = sequence_length(s);
    const int64_t offset = sequence_offset(s);
    if (length < 0) {
      throw Error(strprintf("index file %s is inconsistent: sequence %llu has negative length %lld",
                            path, static_cast<unsigned long long>(s),
                            static_cast<long long>(length)));
    }
    if (offset < 0 || (s > 0 && offset < previous_end)) {
      throw Error(
          strprintf("index file %s is inconsistent: byte offset %lld of sequence %llu is %s; offsets must "
                    "increase and sequences must not overlap",
                    path, static_cast<long long>(offset), static_cast<unsigned long long>(s),
                    offset < 0 ? "negative"
                               : strprintf("before the end of sequence %llu (%lld)",
                                           static_cast<unsigned long long>(s - 1), static_cast<long long>(previous_end))
                                     .c_str()));
    }
    const uint64_t end = static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) * item;
    if (end > bin_size) {
      // A cut .bin, or an .idx of another (larger) dataset beside this .bin: the files alone cannot
      // tell which, so both are said, with the size the .idx expects.
      throw Error(strprintf(
          "data file %s is truncated, or %s is the index of another dataset: sequence %llu (%lld tokens of "
          "%s at byte %lld) ends at byte %llu, but the file has %llu bytes; the index describes %llu "
          "sequences in %s bytes of %s tokens. %s",
          bin_.path().c_str(), path, static_cast<unsigned long long>(s), static_cast<long long>(length),
          token_dtype_name(dtype_), static_cast<long long>(offset), static_cast<unsigned long long>(end),
          static_cast<unsigned long long>(bin_size), static_cast<unsigned long long>(S),
          described_bin_bytes().c_str(), token_dtype_name(dtype_), remake_hint().c_str()));
    }
    if (!first_gap && offset != previous_end) first_gap = s;
    previous_end = static_cast<int64_t>(end);
  }
  check_sequences_tile_bin(path, first_gap, previous_end);
  if (document_index(0) != 0) {
    throw Error(
        strprintf("index file %s is inconsistent: the document index starts at %lld; it must "
                  "start at 0",
                  path, static_cast<long long>(document_index(0))));
  }
  for (uint64_t d = 1; d < doc_entries; ++d) {
    if (document_index(d) < document_index(d - 1)) {
      throw Error(
          strprintf("index file %s is inconsistent: document index entry %llu (%lld) is less "
                    "than entry %llu (%lld); it must not decrease",
                    path, static_cast<unsigned long long>(d), static_cast<long long>(document_index(d)),
                    static_cast<unsigned long long>(d - 1), static_cast<long long>(document_index(d - 1))));
    }
  }
  if (static_cast<uint64_t>(document_index(doc_entries - 1)) != S) {
    throw Error(
        strprintf("index file %s is inconsistent: the document index ends at %lld; it must end "
                  "at the sequence count %llu",
                  path, static_cast<long long>(document_index(doc_entries - 1)), static_cast<unsigned long long>(S)));
  }
}

void IndexedDataset::check_sequences_tile_bin(const char* index_file, std::optional<uint64_t> first_gap,
                                              int64_t end) const {
  // Megatron's writer puts the sequences back to back from byte 0 to the end of the .bin. A gap or
  // trailing bytes mean the .idx does not describe this .bin; typically its token dtype is not the
  // one the .bin was written with (uint16 read over int32 data leaves a gap after every sequence),
  // which would otherwise train silently on garbage.
  const int64_t item = static_cast<int64_t>(token_dtype_size(dtype_));
  const auto hint = [&] {
    return strprintf("Megatron's writer leaves no gaps: is %s (token dtype %s, %lld bytes per token) "
                     "the index written with %s? %s",
                     index_file, token_dtype_name(dtype_), static_cast<long long>(item), bin_.path().c_str(),
                     remake_hint().c_str());
  };
  if (first_gap) {
    const uint64_t s = *first_gap;
    const int64_t previous_end =
        s == 0 ? 0 : sequence_offset(s - 1) + static_cast<int64_t>(sequence_length(s - 1)) * item;
    throw Error(
        strprintf("data file %s does not match its index: sequence %llu starts at byte %lld, but the "
                  "previous data ends at byte %lld. %s",
                  bin_.path().c_str(), static_cast<unsigned long long>(s), static_cast<long long>(sequence_offset(s)),
                  static_cast<long long>(previous_end), hint().c_str()));
  }
  if (static_cast<uint64_t>(end) != bin_.size()) {
    throw Error(strprintf("data file %s does not match its index: the sequences end at byte %lld but the file "
                          "has %llu bytes. %s",
                          bin_.path().c_str(), static_cast<long long>(end),
                          static_cast<unsigned long long>(bin_.size()), hint().c_str()));
  }
}

std::string IndexedDataset::described_bin_bytes() const {
  // The .bin size the .idx expects: its sequence lengths times the token size (counts past 2^64
  // bytes, possible only in a corrupt .idx, are said as such).
  const uint64_t item = token_dtype_size(dtype_);
  uint64_t total = 0;
  for (uint64_t s = 0; s < num_sequences_; ++s) {
    const int32_t length = sequence_length(s);
    const uint64_t bytes = static_cast<uint64_t>(std::max<int32_t>(length, 0)) * item;
    if (total > std::numeric_limits<uint64_t>::max() - bytes) return "more than 2^64";
    total += bytes;
  }
  return std::to_string(total);
}

std::string IndexedDataset::remake_hint() const {
  return strprintf("Both files must come from one run: write %s again (tools/preprocess_data.py, whose "
                   "--output-prefix P writes P_<json key>_document; or stepgraph data synth --out %s --force for "
                   "the synthetic corpus), or copy the .bin and .idx again from where they were made",
                   prefix_.c_str(), prefix_.c_str());
}

void IndexedDataset::scan_tokens(int64_t vocab_size, const ScanShare* share) {
  // validate_index established that the sequences tile the .bin from byte 0 to its end, so the .bin is one array
  // of num_tokens() tokens in stream order: scanned whole, and a bad id mapped back to its sequence after.
  const int64_t allowed_min = vocab_size > 0 ? 0 : INT32_MIN;
  const int64_t allowed_max = vocab_size > 0 ? vocab_size - 1 : INT32_MAX;
  TokenScanOptions options;
  options.label = bin_.path();
  // What the ranks sharing the scan compare before they combine their parts (data/token_scan_share.h).
  const std::string corpus =
      strprintf("%s (%s, %llu tokens in %llu sequences and %llu documents, ids checked against [%lld, %lld])",
                bin_.path().c_str(), token_dtype_name(dtype_), static_cast<unsigned long long>(num_tokens()),
                static_cast<unsigned long long>(num_sequences()), static_cast<unsigned long long>(num_documents()),
                static_cast<long long>(allowed_min), static_cast<long long>(allowed_max));
  const TokenScan scan = scan_token_array_shared(dtype_, bin_.data(), num_tokens(), allowed_min, allowed_max,
                                                 share ? *share : ScanShare{}, corpus, options);
  if (scan.first_bad) {
    const uint64_t position = *scan.first_bad;
    const uint64_t s = sequence_holding(position);
    const std::string limit = vocab_size > 0 ? strprintf(
                                                   "outside [0, vocab_size=%lld); check the tokenizer and "
                                                   "model.vocab_size",
                                                   static_cast<long long>(vocab_size))
                                             : std::string("does not fit int32");
    throw Error(strprintf("data file %s: token id %lld at sequence %llu, position %llu (byte %llu) is %s",
                          bin_.path().c_str(), static_cast<long long>(scan.bad_token),
                          static_cast<unsigned long long>(s),
                          static_cast<unsigned long long>(position - token_start(s)),
                          static_cast<unsigned long long>(position * token_dtype_size(dtype_)), limit.c_str()));
  }
  min_token_ = scan.min_token;
  max_token_ = scan.max_token;
}

uint64_t IndexedDataset::sequence_holding(uint64_t position) const {
  // The last s with token_start(s) <= position (so empty sequences are skipped), by bisection over s in [0, S]
  // (token_start(S) is num_tokens()).
  uint64_t lo = 0, hi = num_sequences_ + 1;  // the first s with token_start(s) > position lies in [lo, hi]
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (token_start(mid) <= position) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo - 1;
}

std::vector<int32_t> IndexedDataset::sequence(uint64_t s) const {
  SG_CHECK(s < num_sequences_, strprintf("%s: sequence %llu out of range (%llu sequences)",
                                         prefix_.c_str(), static_cast<unsigned long long>(s),
                                         static_cast<unsigned long long>(num_sequences_)));
  std::vector<int32_t> out(static_cast<size_t>(sequence_length(s)));
  if (!out.empty()) read_tokens(token_start(s), out.size(), out.data());
  return out;
}

void IndexedDataset::read_tokens(uint64_t start, uint64_t count, int32_t* out) const {
  SG_CHECK(start <= num_tokens() && count <= num_tokens() - start,
           strprintf("%s: token range [%llu, %llu) is beyond the %llu tokens of the corpus",
                     prefix_.c_str(), static_cast<unsigned long long>(start),
                     static_cast<unsigned long long>(start + count),
                     static_cast<unsigned long long>(num_tokens())));
  uint64_t s = sequence_holding(start);
  uint64_t pos = start - token_start(s);
  uint64_t written = 0;
  while (written < count) {
    const uint64_t available = static_cast<uint64_t>(sequence_length(s)) - pos;
    const uint64_t n = std::min(available, count - written);
    const uint8_t* p = bin_.data() + sequence_offset(s) + pos * token_dtype_size(dtype_);
    int32_t* dst = out + written;
    uint64_t i = 0;
    for_each_token(dtype_, p, n, [&](int64_t t) { dst[i++] = static_cast<int32_t>(t); });
    written += n;
    ++s;
    pos = 0;
  }
}

}  // namespace sg::data
