// bench/kernel_profile.h on made-up CUPTI records: grouping by demangled name (arguments dropped, template
// arguments kept), per-repetition figures checked by hand, the "others" row, invalid records left out.
#include "bench/kernel_profile.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sg::bench {
namespace {

ActivityRecord kernel(const std::string& name, uint64_t start, uint64_t end) {
  return {.kind = ActivityKind::kernel, .name = name, .start_ns = start, .end_ns = end};
}

TEST(KernelProfile, GroupsByNameAndSortsByTime) {
  // _Z4gemvPfi = gemv(float*, int); _Z4tileILi128EEvPf = void tile<128>(float*); the same kernels twice.
  const std::vector<ActivityRecord> records = {
      kernel("_Z4gemvPfi", 1000, 4000),          // 3000 ns
      kernel("_Z4tileILi128EEvPf", 4000, 5000),  // 1000
      kernel("_Z4gemvPfi", 5000, 10000),         // 5000
      {.kind = ActivityKind::memset, .name = "", .start_ns = 10000, .end_ns = 10500, .bytes = 64},
      kernel("_Z4tileILi128EEvPf", 0, 0),          // no timestamp: left out
      kernel("_Z4tileILi128EEvPf", 11000, 13500),  // 2500
      // void sg::(anonymous namespace)::scan<4>(float*): 200 ns, the smallest
      kernel("_ZN2sg12_GLOBAL__N_14scanILi4EEEvPf", 20000, 20200),
  };
  const KernelProfile p = profile_kernels(records);
  ASSERT_EQ(p.rows.size(), 4u);
  EXPECT_EQ(p.rows[0].name, "gemv");
  EXPECT_EQ(p.rows[0].launches, 2u);
  EXPECT_EQ(p.rows[0].total_ns, 8000u);
  EXPECT_EQ(p.rows[0].longest_ns, 5000u);
  EXPECT_EQ(p.rows[1].name, "tile<128>");
  EXPECT_EQ(p.rows[1].launches, 2u);
  EXPECT_EQ(p.rows[1].total_ns, 3500u);
  EXPECT_EQ(p.rows[2].name, "memset");
  EXPECT_EQ(p.rows[3].name, "sg::scan<4>");
  EXPECT_EQ(p.summary.invalid, 1u);
  EXPECT_EQ(p.summary.busy_ns, 12200u);  // 1000..10500 without gaps, then 11000..13500 and 20000..20200

  // Two repetitions: per repetition 6100 ns busy = 6.1 us of a measured 0.010 ms = 10 us (61%), 3 launches.
  const std::string table = format_kernel_profile(p, 2, "step", 0.010, 1);
  EXPECT_NE(table.find("device time per step (2 steps, CUPTI): 6.1 us busy of 10.0 us measured (61%); 3.0 launches"),
            std::string::npos)
      << table;
  // gemv: 1 launch and 4.0 us per step, 8000 of the 12200 ns of kernel and memset time, longest 5.0 us.
  EXPECT_NE(table.find("       1.0        4.0   65.6%         5.0  gemv\n"), std::string::npos) << table;
  // The rest folded into one row: 2 launches and 2.1 us per step, 34.4%, longest 2.5 us.
  EXPECT_NE(table.find("       2.0        2.1   34.4%         2.5  (3 others)\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("tile<128>"), std::string::npos) << table;
}

TEST(KernelProfile, EmptyWindowAndBadRepetitions) {
  const KernelProfile p = profile_kernels({});
  EXPECT_TRUE(p.rows.empty());
  EXPECT_NE(format_kernel_profile(p, 3, "step", 1.0).find("0.0 us busy of 1000.0 us measured (0%)"), std::string::npos);
  EXPECT_THROW(format_kernel_profile(p, 0, "step", 1.0), std::exception);
}

}  // namespace
}  // namespace sg::bench
