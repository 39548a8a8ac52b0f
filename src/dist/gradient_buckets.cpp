#include "dist/gradient_buckets.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"

namespace sg::dist {

namespace {

int64_t round_up(int64_t n, int64_t unit) { return (n + unit - 1) / unit * unit; }

struct Piece {
  FlatRange range;
  int ready_point = 0;
  int owner = -1;
};

// The ready runs split at the shard boundaries, each with its owner.
std::vector<Piece> pieces_of(const std::vector<GradientSegment>& runs, const std::vector<FlatRange>& shards) {
  std::vector<Piece> out;
  for (const GradientSegment& run : runs) {
    if (shards.empty()) {
      out.push_back({run.range, run.ready_point, -1});
      continue;
    }
    for (size_t r = 0; r < shards.size(); ++r) {
      const int64_t begin = std::max(run.range.begin, shards[r].begin);
      const int64_t end = std::min(run.range.end(), shards[r].end());
      if (begin < end) out.push_back({{begin, end - begin}, run.ready_point, static_cast<int>(r)});
    }
  }
  return out;
}

}  // namespace

std::vector<GradientSegment> ready_runs(int64_t total, const GradientReadiness& readiness) {
  SG_CHECK(total >= 0 && readiness.points >= 1,
           strprintf("gradient readiness: %lld elements, %d ready points", static_cast<long long>(total),
                     readiness.points));
  const std::vector<GradientSegment>& segs = readiness.segments;
  for (size_t i = 0; i < segs.size(); ++i) {
    const GradientSegment& s = segs[i];
    SG_CHECK(s.range.size > 0 && s.range.begin >= 0 && s.range.end() <= total &&
                 (i == 0 || segs[i - 1].range.end() <= s.range.begin) && s.ready_point >= 0 &&
                 s.ready_point < readiness.points,
             strprintf("gradient readiness: segment %zu [%lld, %lld) at ready point %d is empty, overlaps the one "
                       "before, or lies outside [0, %lld) or the %d ready points",
                       i, static_cast<long long>(s.range.begin), static_cast<long long>(s.range.end()),
                       s.ready_point, static_cast<long long>(total), readiness.points));
  }
  std::vector<GradientSegment> out;
  const auto add = [&out](int64_t begin, int64_t end, int point) {
    if (begin >= end) return;
    if (!out.empty() && out.back().ready_point == point) {
      out.back().range.size = end - out.back().range.begin;
    } else {
      out.push_back({{begin, end - begin}, point});
    }
  };
  if (segs.empty()) {
    add(0, total, readiness.points - 1);
    return out;
  }
  for (size_t i = 0; i < segs.size(); ++i) {
    const int64_t begin = i == 0 ? 0 : segs[i].range.begin;  // the gap below the first joins it
    const int64_t end = i + 1 < segs.size() ? segs[i + 1].range.begin : total;  // gaps join the run below
    add(begin, end, segs[i].ready_point);
  }
  return out;
}

std::vector<GradientBucket> plan_gradient_buckets(int64_t total, const GradientReadiness& readiness,
                                                  int64_t bucket_size, const std::vector<FlatRange>& shards,
                                                  int64_t alignment) {
  SG_CHECK(bucket_size >= 1 && alignment >= 1,
           strprintf("gradient buckets: bucket_size = %lld and alignment = %lld must be positive (ddp.bucket_size)",
                     static_cast<long long>(bucket_size), static_cast<long long>(alignment)));
  int64_t next = 0;
  for (const FlatRange& s : shards) {
    SG_CHECK(s.begin == next && s.size > 0, "gradient buckets: the shards must tile the buffer in rank order");
    next = s.end();
  }
  SG_CHECK(shards.empty() || next == total,
           strprintf("gradient buckets: the shards end at %lld, the buffer at %lld", static_cast<long long>(next),
                     static_cast<long long>(total)));
  const std::vector<Piece> pieces = pieces_of(ready_runs(total, readiness), shards);

  // Boundaries, walking down from the end of the buffer.
  const int64_t limit = round_up(bucket_size, alignment);
  std::vector<FlatRange> ranges;
  int64_t hi = total, lo = total;
  int point = -1, owner = -1;
  const auto close = [&] {
    if (lo < hi) ranges.push_back({lo, hi - lo});
    hi = lo;
    point = -1;
  };
  for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
    if (lo < hi && (it->ready_point < point || it->owner != owner || hi - lo >= limit)) close();
    owner = it->owner;
    point = std::max(point, it->ready_point);
    lo = it->range.begin;
    while (hi - lo > limit) {  // cut full buckets off the top (hi - cut <= limit, cut > lo)
      const int64_t cut = round_up(hi - limit, alignment);
      ranges.push_back({cut, hi - cut});
      hi = cut;
    }
  }
  close();

  // Each bucket's ready point (the latest of its elements') and owner, then the launch order.
  std::vector<GradientBucket> out;
  out.reserve(ranges.size());
  for (const FlatRange& r : ranges) {
    auto p = std::upper_bound(pieces.begin(), pieces.end(), r.begin,
                              [](int64_t at, const Piece& piece) { return at < piece.range.begin; });
    if (p != pieces.begin()) --p;
    GradientBucket b{r, -1, p->owner};
    for (; p != pieces.end() && p->range.begin < r.end(); ++p) {
      if (p->range.end() > r.begin) b.ready_point = std::max(b.ready_point, p->ready_point);
    }
    out.push_back(b);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const GradientBucket& a, const GradientBucket& b) { return a.ready_point < b.ready_point; });
  return out;
}

std::string describe_buckets(const std::vector<GradientBucket>& buckets, int points) {
  int64_t at_end = 0;
  for (const GradientBucket& b : buckets) at_end += b.ready_point == points - 1 ? 1 : 0;
  return strprintf("%zu bucket%s over %d ready point%s (%lld ready only at the end of the backward)",
                   buckets.size(), buckets.size() == 1 ? "" : "s", points, points == 1 ? "" : "s",
                   static_cast<long long>(at_end));
}

}  // namespace sg::dist
