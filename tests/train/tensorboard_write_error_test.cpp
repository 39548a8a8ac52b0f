// TensorBoard events are never lost silently: a write the disk refuses (full, a file-size limit, an I/O error)
// is an sg::Error naming the event file and the system's reason, as a metrics.jsonl write failure is. flush()
// used to ignore fflush's result, and fwrite only fills the buffer, so a full disk lost every event unsaid.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "test_dir.h"
#include "train/tensorboard_writer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

// The message of the sg::Error `f` throws, or "" when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TensorBoardWriteError, AFullDiskAtTheFirstRecordIsAnErrorNamingTheFile) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  // /dev/full takes the bytes into the stdio buffer and refuses them at the flush (ENOSPC).
  const std::string e = error_of([] { TensorBoardWriter writer("/dev/full", TensorBoardWriter::ExactPath{}); });
  EXPECT_NE(e.find("cannot write TensorBoard events file /dev/full (logger.tensorboard_dir): No space left on device "
                   "(the disk is full)"),
            std::string::npos)
      << e;
}

// Every file this process writes is limited to `bytes` while it lives (a write past it fails with EFBIG, as on a
// full disk; SIGXFSZ ignored so that the write returns the error).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_xfsz_ = signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{bytes, saved_.rlim_max};
    ok_ = setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    signal(SIGXFSZ, previous_xfsz_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  sighandler_t previous_xfsz_ = SIG_DFL;
  bool ok_ = false;
};

TEST(TensorBoardWriteError, ADiskThatFillsDuringTheRunFailsTheFlushOfThatStep) {
  const fs::path dir = sg::test::fresh_test_dir("tensorboard_write_error_test", fs::current_path());
  std::string error;
  int64_t failed_at = -1;
  std::string path;
  {
    TensorBoardWriter writer(dir.string());  // the file-version record: well under the limit
    path = writer.path();
    const FileSizeLimit limit(1024);
    ASSERT_TRUE(limit.ok());
    for (int64_t step = 1; step <= 20 && error.empty(); ++step) {
      error = error_of([&] {
        for (const char* tag : {"lm loss", "learning-rate", "grad-norm", "iteration-time"}) {
          writer.scalar(tag, step, 1.0 / static_cast<double>(step));
        }
        writer.flush();  // as RunRecorder does after every step
      });
      if (!error.empty()) failed_at = step;
    }
  }
  // About 50 bytes per scalar: the step that crosses 1 KiB (the 5th or 6th) fails, not a later one.
  EXPECT_GE(failed_at, 4) << error;
  EXPECT_LE(failed_at, 7) << error;
  EXPECT_NE(error.find("cannot write TensorBoard events file " + path + " (logger.tensorboard_dir): File too large"),
            std::string::npos)
      << error;
  EXPECT_LE(fs::file_size(path), 1024u);
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace sg::train
