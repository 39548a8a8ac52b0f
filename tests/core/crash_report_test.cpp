// No death without a message (issue 17, item 13): a fatal signal and std::terminate print what
// happened (and a backtrace) before the process dies with the same status as without the reporter.
#include "core/crash_report.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace sg::crash {
namespace {

struct Death {
  int status = 0;
  std::string stderr_text;
};

// Runs `body` in a child with the reporter installed; returns how it died and what it wrote to stderr.
Death die_in_child(const std::function<void()>& body) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    install_crash_reporter("stepgraph-test");
    body();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  Death d;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) d.stderr_text.append(buffer, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  ::waitpid(pid, &d.status, 0);
  return d;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wterminate"  // the point of the test
void throws_through_noexcept() noexcept { throw std::runtime_error("the device vanished"); }
#pragma GCC diagnostic pop

TEST(CrashReport, AFatalSignalSaysWhatHappenedAndKeepsItsStatus) {
  const Death d = die_in_child([] { ::raise(SIGSEGV); });
  ASSERT_TRUE(WIFSIGNALED(d.status)) << d.stderr_text;
  EXPECT_EQ(WTERMSIG(d.status), SIGSEGV);
  EXPECT_NE(d.stderr_text.find("stepgraph-test: fatal signal: SIGSEGV, invalid memory access"), std::string::npos)
      << d.stderr_text;
  EXPECT_NE(d.stderr_text.find("Backtrace:"), std::string::npos) << d.stderr_text;
  const Death bus = die_in_child([] { ::raise(SIGBUS); });
  EXPECT_NE(bus.stderr_text.find("SIGBUS, bus error"), std::string::npos) << bus.stderr_text;
}

TEST(CrashReport, TerminateNamesTheException) {
  const Death d = die_in_child([] { throws_through_noexcept(); });
  ASSERT_TRUE(WIFSIGNALED(d.status)) << d.stderr_text;
  EXPECT_EQ(WTERMSIG(d.status), SIGABRT);
  EXPECT_NE(d.stderr_text.find("stepgraph-test: fatal: std::terminate was called with an uncaught"), std::string::npos)
      << d.stderr_text;
  EXPECT_NE(d.stderr_text.find("the device vanished"), std::string::npos) << d.stderr_text;
}

}  // namespace
}  // namespace sg::crash
