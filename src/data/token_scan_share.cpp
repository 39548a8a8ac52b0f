#include "data/token_scan_share.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/strings.h"

namespace sg::data {

PartRange scan_part_range(uint64_t num_tokens, uint64_t chunk_tokens, int part, int parts) {
  SG_CHECK(parts >= 1 && part >= 0 && part < parts && chunk_tokens > 0,
           strprintf("scan_part_range: part %d of %d, chunk of %llu tokens", part, parts,
                     static_cast<unsigned long long>(chunk_tokens)));
  // Whole chunks, so a part's scan splits into the chunks one scan of the whole array would take.
  const uint64_t chunks = (num_tokens + chunk_tokens - 1) / chunk_tokens;
  const auto boundary = [&](int p) {
    const uint64_t chunk =
        chunks / static_cast<uint64_t>(parts) * static_cast<uint64_t>(p) +
        chunks % static_cast<uint64_t>(parts) * static_cast<uint64_t>(p) / static_cast<uint64_t>(parts);
    return std::min(num_tokens, chunk * chunk_tokens);
  };
  return {boundary(part), boundary(part + 1)};
}

std::string encode_part_scan(const PartScan& part) {
  // Numbers on the first line, the corpus description (a path, which may hold spaces) after it.
  return strprintf("%llu %llu %llu %lld %lld %d %llu %lld\n%s", static_cast<unsigned long long>(part.num_tokens),
                   static_cast<unsigned long long>(part.range.begin), static_cast<unsigned long long>(part.range.end),
                   static_cast<long long>(part.scan.min_token), static_cast<long long>(part.scan.max_token),
                   part.scan.first_bad ? 1 : 0, static_cast<unsigned long long>(part.scan.first_bad.value_or(0)),
                   static_cast<long long>(part.scan.bad_token), part.corpus.c_str());
}

PartScan decode_part_scan(const std::string& text) {
  const size_t newline = text.find('\n');
  std::istringstream numbers(text.substr(0, newline));
  PartScan part;
  unsigned long long tokens = 0, begin = 0, end = 0, first_bad = 0;
  long long lo = 0, hi = 0, bad = 0;
  int has_bad = 0;
  std::string rest;
  if (newline == std::string::npos || !(numbers >> tokens >> begin >> end >> lo >> hi >> has_bad >> first_bad >> bad) ||
      (numbers >> rest) || begin > end || end > tokens || (has_bad != 0 && has_bad != 1) ||
      (has_bad == 1 && (first_bad < begin || first_bad >= end))) {
    throw Error("a rank's part of a corpus scan is not one: \"" + text + "\"");
  }
  part.corpus = text.substr(newline + 1);
  part.num_tokens = tokens;
  part.range = {begin, end};
  part.scan.min_token = lo;
  part.scan.max_token = hi;
  if (has_bad) part.scan.first_bad = first_bad;
  part.scan.bad_token = bad;
  return part;
}

TokenScan combine_part_scans(const std::vector<PartScan>& parts) {
  SG_CHECK(!parts.empty(), "combine_part_scans: no parts");
  const auto describe = [&](size_t p) {
    return strprintf("rank %zu scanned tokens [%llu, %llu) of %s", p,
                     static_cast<unsigned long long>(parts[p].range.begin),
                     static_cast<unsigned long long>(parts[p].range.end), parts[p].corpus.c_str());
  };
  uint64_t expected_begin = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p].corpus != parts[0].corpus || parts[p].num_tokens != parts[0].num_tokens ||
        parts[p].range.begin != expected_begin) {
      throw Error("the ranks' parts of a corpus scan are not parts of one corpus: " + describe(0) + ", but " +
                  describe(p) +
                  ". Every rank must open the same datasets in the same order, check them against the same "
                  "model.vocab_size, and read the same files (one copy on a shared filesystem, or identical copies)");
    }
    expected_begin = parts[p].range.end;
  }
  if (expected_begin != parts[0].num_tokens) {
    throw Error("the ranks' parts of a corpus scan do not cover it: " + describe(parts.size() - 1));
  }
  TokenScan all;
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const PartScan& part : parts) {
    if (part.range.begin == part.range.end) continue;  // no tokens: its min and max are placeholders
    lo = std::min(lo, part.scan.min_token);
    hi = std::max(hi, part.scan.max_token);
    if (part.scan.first_bad && !all.first_bad) {  // parts in array order: the lowest holds the first
      all.first_bad = part.scan.first_bad;
      all.bad_token = part.scan.bad_token;
    }
  }
  if (lo <= hi) {
    all.min_token = lo;
    all.max_token = hi;
  }
  return all;
}

std::string encode_combined_scan(const TokenScan& scan) {
  return strprintf("scan %lld %lld %d %llu %lld", static_cast<long long>(scan.min_token),
                   static_cast<long long>(scan.max_token), scan.first_bad ? 1 : 0,
                   static_cast<unsigned long long>(scan.first_bad.value_or(0)), static_cast<long long>(scan.bad_token));
}

std::string encode_combined_error(const std::string& message) {
  return "error\n" + message;
}

TokenScan decode_combined_scan(const std::string& text) {
  if (text.rfind("error\n", 0) == 0) throw Error(text.substr(6));
  std::istringstream numbers(text);
  std::string tag, rest;
  long long lo = 0, hi = 0, bad = 0;
  unsigned long long first_bad = 0;
  int has_bad = 0;
  if (!(numbers >> tag >> lo >> hi >> has_bad >> first_bad >> bad) || tag != "scan" || (numbers >> rest) ||
      (has_bad != 0 && has_bad != 1)) {
    throw Error("the combined corpus scan from rank 0 is not one: \"" + text + "\"");
  }
  TokenScan scan;
  scan.min_token = lo;
  scan.max_token = hi;
  if (has_bad) scan.first_bad = first_bad;
  scan.bad_token = bad;
  return scan;
}

TokenScan scan_token_array_shared(TokenDtype dtype, const uint8_t* data, uint64_t num_tokens, int64_t allowed_min,
                                  int64_t allowed_max, const ScanShare& share, const std::string& corpus,
                                  const TokenScanOptions& options) {
  if (!share.shared()) return scan_token_array(dtype, data, num_tokens, allowed_min, allowed_max, options);
  SG_CHECK(static_cast<bool>(share.exchange), "scan_token_array_shared: a shared scan without an exchange");
  const uint64_t item = token_dtype_size(dtype);
  PartScan mine;
  mine.corpus = corpus;
  mine.num_tokens = num_tokens;
  mine.range = scan_part_range(num_tokens, scan_chunk_tokens(dtype, options), share.part, share.parts);
  TokenScanOptions part_options = options;
  part_options.label = strprintf("%s (rank %d's part of %d)", options.label.c_str(), share.part, share.parts);
  mine.scan = scan_token_array(dtype, data + mine.range.begin * item, mine.range.end - mine.range.begin, allowed_min,
                               allowed_max, part_options);
  if (mine.scan.first_bad) *mine.scan.first_bad += mine.range.begin;
  const int parts = share.parts;
  const std::string combined = share.exchange(encode_part_scan(mine), [parts](const std::vector<std::string>& texts) {
    try {
      SG_CHECK(texts.size() == static_cast<size_t>(parts),
               strprintf("scan_token_array_shared: %zu parts to combine, expected %d", texts.size(), parts));
      std::vector<PartScan> decoded;
      decoded.reserve(texts.size());
      for (const std::string& text : texts) decoded.push_back(decode_part_scan(text));
      return encode_combined_scan(combine_part_scans(decoded));
    } catch (const Error& e) {
      return encode_combined_error(e.what());  // every process raises it, not only the one that combined
    }
  });
  return decode_combined_scan(combined);
}

}  // namespace sg::data
