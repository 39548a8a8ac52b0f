// The NCCL collectives the step uses at world size 2 (issue 16). A sum of two values is one correctly
// rounded addition whatever NCCL's algorithm or transport, so every result is compared bitwise with the
// CPU's: the all-reduce of the fp32 gradients (and of the fp64 norm partials), the distributed optimizer's
// reduce-scatter and bf16 all-gather, and an all-reduce captured in a graph equal to eager on every replay.
// With 2 GPUs: one thread per GPU in this process, each with its own communicator. With 1 GPU: the test
// runs again as two child processes sharing it, each rank with its own NCCL_HOSTID so that NCCL (which
// refuses two ranks on one GPU of one host) carries their collectives over its socket transport on the
// loopback interface (scripts/two_ranks_one_gpu.sh does the same for whole training runs). The training
// step at world size 2 is checked end to end by `scripts/gpu.sh dp`.
// Filter: --gtest_filter='DataParallelTwoRanks*'
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/strings.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "dist/communicator.h"
#include "graph/registry.h"
#include "gpu_test_util.h"
#include "process_util.h"

namespace sg::dist {
namespace {

constexpr int kRanks = 2;
// Set only in the child processes of the one-GPU path: the rank, and the file rank 0 puts NCCL's id in.
constexpr const char* kChildRankEnv = "SG_TWO_RANKS_CHILD_RANK";
constexpr const char* kIdFileEnv = "SG_TWO_RANKS_ID_FILE";

class DataParallelTwoRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

using RankBody = std::function<void(int rank, Communicator& comm)>;

// Two GPUs: body(rank, communicator) on one thread per rank, each on GPU `rank`. Every communicator is
// destroyed after all threads finished their body (a communicator's teardown destroys every live graph of
// the process, so no rank may still be replaying one). Rethrows a thread's error.
void on_two_gpus(const RankBody& body) {
  const NcclUniqueIdBytes id = new_nccl_unique_id();
  std::barrier done(kRanks);
  std::vector<std::exception_ptr> errors(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        SG_CUDA_CHECK(cudaSetDevice(rank));
        Communicator comm(id, kRanks, rank);
        try {
          body(rank, comm);
        } catch (...) {
          errors[rank] = std::current_exception();
        }
        SG_CUDA_CHECK(cudaDeviceSynchronize());
        done.arrive_and_wait();
        if (!errors[rank]) comm.mark_finished();
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// In a child of the one-GPU path: this process is one rank on GPU 0. Rank 0 makes NCCL's id and hands it
// over in a file (renamed into place whole); rank 1 waits for it.
void as_child_rank(int rank, const RankBody& body) {
  const char* id_file = std::getenv(kIdFileEnv);
  ASSERT_NE(id_file, nullptr) << kIdFileEnv << " unset";
  NcclUniqueIdBytes id{};
  if (rank == 0) {
    id = new_nccl_unique_id();
    const std::string tmp = std::string(id_file) + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(id.data(), static_cast<std::streamsize>(id.size()));
      ASSERT_TRUE(out.good()) << "writing " << tmp;
    }
    std::filesystem::rename(tmp, id_file);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(id_file)) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "rank 0 wrote no NCCL id to " << id_file;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::ifstream in(id_file, std::ios::binary);
    in.read(id.data(), static_cast<std::streamsize>(id.size()));
    ASSERT_EQ(in.gcount(), static_cast<std::streamsize>(id.size())) << "reading " << id_file;
  }
  SG_CUDA_CHECK(cudaSetDevice(0));
  Communicator comm(id, kRanks, rank);
  body(rank, comm);
  SG_CUDA_CHECK(cudaDeviceSynchronize());
  if (!::testing::Test::HasFailure()) comm.mark_finished();
}

// One GPU: this test again in two child processes of this executable, one rank each (as_child_rank).
// Each must run the test and pass; their output is shown when one does not.
void as_two_processes_on_one_gpu() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test_name = std::string(info->test_suite_name()) + "." + info->name();
  const std::string base = ::testing::TempDir() + "two_ranks_" + std::to_string(::getpid()) + "_" + info->name();
  const std::string id_file = base + ".id";
  std::filesystem::remove(id_file);
  std::string script;
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string log = base + ".rank" + std::to_string(rank) + ".log";
    script += strprintf("%s=%d %s=%s NCCL_HOSTID=sg-two-ranks-%d NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 "
                        "timeout 120 /proc/%d/exe --gtest_filter=%s >%s 2>&1 & p%d=$!; ",
                        kChildRankEnv, rank, kIdFileEnv, test::shell_quote(id_file).c_str(), rank,
                        static_cast<int>(::getpid()), test_name.c_str(), test::shell_quote(log).c_str(), rank);
  }
  script += "wait $p0; s0=$?; wait $p1; s1=$?; echo \"$s0 $s1\"";
  const test::CommandResult result = test::run_command("sh -c " + test::shell_quote(script));
  int status[kRanks] = {-1, -1};
  std::istringstream(result.output) >> status[0] >> status[1];
  for (int rank = 0; rank < kRanks; ++rank) {
    std::ifstream in(base + ".rank" + std::to_string(rank) + ".log");
    std::stringstream log;
    log << in.rdbuf();
    // "1 test" passed: the child ran this very test (a filter that matched nothing would pass 0).
    EXPECT_TRUE(status[rank] == 0 && log.str().find("[  PASSED  ] 1 test.") != std::string::npos)
        << "rank " << rank << " (a child process on this GPU) exited " << status[rank] << ":\n"
        << log.str();
  }
  std::filesystem::remove(id_file);
}

void on_every_rank(const RankBody& body) {
  if (const char* rank = std::getenv(kChildRankEnv)) {
    as_child_rank(std::atoi(rank), body);
  } else if (cuda::device_count() >= kRanks) {
    on_two_gpus(body);
  } else {
    as_two_processes_on_one_gpu();
  }
}

template <class T>
std::vector<T> elementwise_sum(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

// "" when bitwise equal, else the size or the first differing element (never a million-element dump).
template <class T>
std::string difference(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return strprintf("%zu elements, expected %zu", got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      return strprintf("element %zu is %.9g, expected %.9g", i, static_cast<double>(got[i]),
                       static_cast<double>(want[i]));
    }
  }
  return "";
}

std::vector<float> rank_input(int rank, size_t n) { return test::random_normal(n, 100 + static_cast<uint64_t>(rank)); }

TEST_F(DataParallelTwoRanks, AllReduceSumsBothRanksExactly) {
  const size_t n = 1000003;  // not a multiple of anything NCCL likes
  const std::vector<float> expected = elementwise_sum(rank_input(0, n), rank_input(1, n));
  std::vector<double> d0(4099), d1(4099);
  for (size_t i = 0; i < d0.size(); ++i) {
    d0[i] = 1.0 / static_cast<double>(i + 3);
    d1[i] = static_cast<double>(i) * 1e-7;
  }
  const std::vector<double> expected_f64 = elementwise_sum(d0, d1);
  on_every_rank([&](int rank, Communicator& comm) {
    test::DeviceBuffer<float> in(n), out(n);
    in.upload(rank_input(rank, n));
    out.poison();
    test::DeviceBuffer<double> norms(d0.size());
    norms.upload(rank == 0 ? d0 : d1);
    cuda::Stream stream;
    comm.all_reduce_sum(in.get(), out.get(), n, ElementType::f32, stream);  // out of place
    comm.all_reduce_sum(in.get(), in.get(), n, ElementType::f32, stream);   // in place (the gradients)
    comm.all_reduce_sum(norms.get(), norms.get(), d0.size(), ElementType::f64, stream);
    stream.synchronize();
    comm.check_async_error();
    EXPECT_EQ(difference(out.download(), expected), "") << "rank " << rank;
    EXPECT_EQ(difference(in.download(), expected), "") << "rank " << rank << " in place";
    EXPECT_EQ(difference(norms.download(), expected_f64), "") << "rank " << rank << " fp64";
  });
}

TEST_F(DataParallelTwoRanks, ReduceScatterAndBf16AllGatherInPlace) {
  const size_t shard = 70001;  // elements per rank
  const size_t n = shard * kRanks;
  const std::vector<float> sum = elementwise_sum(rank_input(0, n), rank_input(1, n));
  // Each rank's bf16 weights: its own shard set, the other's poisoned; the gather fills the rest.
  const std::vector<float> weights = test::round_bf16(test::random_normal(n, 7));
  on_every_rank([&](int rank, Communicator& comm) {
    test::DeviceBuffer<float> grads(n);
    grads.upload(rank_input(rank, n));
    test::DeviceBuffer<bf16> gathered(n);
    gathered.poison();
    const std::vector<bf16> own = test::to_bf16(weights);
    SG_CUDA_CHECK(cudaMemcpy(gathered.get() + rank * shard, own.data() + rank * shard, shard * sizeof(bf16),
                             cudaMemcpyHostToDevice));
    cuda::Stream stream;
    float* own_grads = grads.get() + rank * shard;
    comm.reduce_scatter_sum(grads.get(), own_grads, shard, ElementType::f32, stream);
    comm.all_gather(gathered.get() + rank * shard, gathered.get(), shard, ElementType::bf16, stream);
    stream.synchronize();
    comm.check_async_error();
    const std::vector<float> all = grads.download();
    const std::vector<float> got(all.begin() + static_cast<ptrdiff_t>(rank * shard),
                                 all.begin() + static_cast<ptrdiff_t>((rank + 1) * shard));
    const std::vector<float> want(sum.begin() + static_cast<ptrdiff_t>(rank * shard),
                                  sum.begin() + static_cast<ptrdiff_t>((rank + 1) * shard));
    EXPECT_EQ(difference(got, want), "") << "rank " << rank << ": its shard of the summed gradients";
    EXPECT_EQ(difference(test::to_float(gathered.download()), weights), "")
        << "rank " << rank << ": the gathered bf16 weights";
  });
}

TEST_F(DataParallelTwoRanks, AllReduceCapturedInAGraphEqualsEagerOnEveryReplay) {
  const size_t n = 262147;
  const std::vector<float> expected = elementwise_sum(rank_input(0, n), rank_input(1, n));
  on_every_rank([&](int rank, Communicator& comm) {
    test::DeviceBuffer<float> in(n), work(n), out(n);
    in.upload(rank_input(rank, n));
    cuda::Stream stream;
    const auto body = [&](cudaStream_t s) {
      SG_CUDA_CHECK(cudaMemcpyAsync(work.get(), in.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, s));
      comm.all_reduce_sum(work.get(), work.get(), n, ElementType::f32, s);
      SG_CUDA_CHECK(cudaMemcpyAsync(out.get(), work.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, s));
    };
    out.poison();
    body(stream);
    stream.synchronize();
    const std::vector<float> eager = out.download();
    EXPECT_EQ(difference(eager, expected), "") << "rank " << rank << " eager";
    {
      graph::GraphRegistry registry;  // destroyed (its graph with the collective) before the communicator
      graph::GraphExec& exec = registry.capture("all-reduce", stream, body);
      for (int replay = 0; replay < 3; ++replay) {
        out.poison();
        registry.launch(exec, stream);
        stream.synchronize();
        EXPECT_EQ(difference(out.download(), eager), "") << "rank " << rank << " replay " << replay;
      }
    }
    comm.check_async_error();
  });
}

}  // namespace
}  // namespace sg::dist
