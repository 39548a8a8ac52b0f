// RngTracker on the CPU: generators, fork semantics, the host mirror's numbers, checkpoint bytes.
// (The device side — the advance kernel and draws in replayed graphs — is in the GPU tests.)
#include "cuda/rng_tracker.h"

#include <gtest/gtest.h>

#include "test_util.h"

#include <functional>

#include "core/error.h"

namespace sg::cuda {
namespace {

using test::thrown_message;

TEST(RngTracker, DefaultGeneratorsAndSeeds) {
  RngTracker t(1234);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.name(0), kDefaultRng);
  EXPECT_EQ(t.name(1), kModelParallelRng);
  EXPECT_EQ(t.host_state(0).seed, 1234u);
  EXPECT_EQ(t.host_state(1).seed, 1234u + 2718u);
  EXPECT_EQ(t.host_state(0).offset, 0u);
  EXPECT_EQ(t.index("model-parallel-rng"), 1u);
  EXPECT_EQ(t.device_bytes(), 2 * sizeof(RngState));
}

TEST(RngTracker, ForkSelectsGeneratorAndNests) {
  RngTracker t(std::vector<GeneratorSpec>{{"default", 1}, {"model-parallel-rng", 2}, {"expert-parallel-rng", 3}});
  EXPECT_EQ(t.current_name(), "default");
  {
    auto f1 = t.fork();  // model-parallel-rng, like TE's tracker.fork()
    EXPECT_EQ(t.current_name(), "model-parallel-rng");
    {
      auto f2 = t.fork("expert-parallel-rng");
      EXPECT_EQ(t.current_index(), 2u);
      {
        auto f3 = t.fork("default");
        EXPECT_EQ(t.current_index(), 0u);
      }
      EXPECT_EQ(t.current_index(), 2u);
    }
    EXPECT_EQ(t.current_name(), "model-parallel-rng");
    auto moved = std::move(f1);  // a moved-from Fork does not pop twice
  }
  EXPECT_EQ(t.current_name(), "default");
}

TEST(RngTracker, UnknownGeneratorSuggestsClosest) {
  RngTracker t(1);
  const std::string msg = thrown_message([&] { auto f = t.fork("model-paralel-rng"); });
  EXPECT_NE(msg.find("unknown RNG generator 'model-paralel-rng'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'model-parallel-rng'"), std::string::npos) << msg;
  EXPECT_EQ(t.current_name(), "default");  // a failed fork changes nothing
}

TEST(RngTracker, RejectsDuplicateNames) {
  EXPECT_NE(thrown_message([] { RngTracker t(std::vector<GeneratorSpec>{{"a", 1}, {"a", 2}}); })
                .find("defined twice"),
            std::string::npos);
}

TEST(RngTracker, MirrorMatchesPhiloxAndAdvances) {
  RngTracker t(99);
  for (size_t g = 0; g < t.size(); ++g) {
    for (uint64_t i : {0ULL, 1ULL, 5ULL, 123457ULL}) {
      const RngState s = t.host_state(g);
      EXPECT_EQ(t.uniform(g, 3, i), rng::philox_uniform(s.seed, s.offset, 3, i));
      EXPECT_EQ(t.bits(g, 3, i), rng::philox_bits(s.seed, s.offset, 3, i));
    }
  }
  const float before = t.uniform(0, 0, 0);
  const uint32_t before_bits = t.bits(0, 0, 0);
  t.advance_host();
  EXPECT_EQ(t.host_state(0).offset, 1u);
  EXPECT_EQ(t.host_state(1).offset, 1u);
  EXPECT_NE(t.bits(0, 0, 0), before_bits);
  EXPECT_EQ(t.uniform(0, 0, 0), rng::philox_uniform(99, 1, 0, 0));
  (void)before;
  t.advance_host(5);
  EXPECT_EQ(t.host_state(0).offset, 6u);
  // Independent generators draw different numbers.
  EXPECT_NE(t.bits(0, 0, 0), t.bits(1, 0, 0));
}

TEST(RngTracker, SaveRestoreRoundTrip) {
  RngTracker a(7);
  a.advance_host(41);
  a.host_state(1).offset = 1234567890123ULL;
  const std::vector<uint8_t> bytes = a.serialize_host();
  RngTracker b(8);  // different seed: restore must overwrite it
  b.deserialize_host(bytes);
  for (size_t g = 0; g < a.size(); ++g) {
    EXPECT_EQ(b.host_state(g).seed, a.host_state(g).seed);
    EXPECT_EQ(b.host_state(g).offset, a.host_state(g).offset);
    EXPECT_EQ(b.bits(g, 11, 1000), a.bits(g, 11, 1000));
  }
  EXPECT_EQ(b.serialize_host(), bytes);
  // Without a device copy, save/restore are the host serialisation.
  EXPECT_EQ(b.save(), bytes);
}

TEST(RngTracker, RestoreRejectsForeignOrCorruptBytes) {
  RngTracker a(7);
  std::vector<uint8_t> bytes = a.serialize_host();
  RngTracker three(std::vector<GeneratorSpec>{{"default", 1}, {"model-parallel-rng", 2}, {"x", 3}});
  EXPECT_NE(thrown_message([&] { three.deserialize_host(bytes); }).find("has 2 generators"), std::string::npos);
  RngTracker other_names(std::vector<GeneratorSpec>{{"default", 1}, {"other", 2}});
  EXPECT_NE(thrown_message([&] { other_names.deserialize_host(bytes); }).find("unknown RNG generator"),
            std::string::npos);
  std::vector<uint8_t> truncated(bytes.begin(), bytes.end() - 3);
  EXPECT_NE(thrown_message([&] { a.deserialize_host(truncated); }).find("truncated"), std::string::npos);
  std::vector<uint8_t> bad_magic = bytes;
  bad_magic[0] = 'X';
  EXPECT_NE(thrown_message([&] { a.deserialize_host(bad_magic); }).find("header"), std::string::npos);
  std::vector<uint8_t> trailing = bytes;
  trailing.push_back(0);
  EXPECT_NE(thrown_message([&] { a.deserialize_host(trailing); }).find("trailing"), std::string::npos);
  // A failed restore leaves the state untouched.
  EXPECT_EQ(a.host_state(0).seed, 7u);
}

TEST(RngTracker, DevicePointerNeedsBinding) {
  RngTracker t(1);
  EXPECT_FALSE(t.has_device());
  EXPECT_NE(thrown_message([&] { (void)t.current(); }).find("bind"), std::string::npos);
  MemoryPlan plan;
  const MemorySlot slot = t.plan(plan);
  EXPECT_EQ(plan.at(slot).bytes, t.device_bytes());
  EXPECT_EQ(plan.at(slot).category, MemoryCategory::optimizer_state);
}

}  // namespace
}  // namespace sg::cuda
