#include "core/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <typeinfo>

namespace sg::crash {

namespace {

const char* g_program = "stepgraph";
alignas(16) char g_alternate_stack[1 << 16];

void write_text(const char* text) {
  const size_t n = strlen(text);
  ssize_t ignored = ::write(STDERR_FILENO, text, n);
  (void)ignored;
}

const char* meaning(int signal_number) {
  switch (signal_number) {
    case SIGSEGV: return "SIGSEGV, invalid memory access";
    case SIGBUS: return "SIGBUS, bus error (a memory-mapped file shrank under the process, or bad alignment)";
    case SIGILL: return "SIGILL, illegal instruction (a binary built for another CPU?)";
    case SIGFPE: return "SIGFPE, arithmetic exception";
    case SIGABRT: return "SIGABRT, aborted";
    default: return "fatal signal";
  }
}

extern "C" void crash_signal_handler(int signal_number) {
  write_text("\n");
  write_text(g_program);
  write_text(": fatal signal: ");
  write_text(meaning(signal_number));
  write_text(". This is a bug in stepgraph or a library it calls (or a hardware/driver fault); "
             "please report it with this output. Backtrace:\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // The default action produces the exit status (and core dump) the shell expects.
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}

void terminate_handler() {
  std::string message = std::string(g_program) + ": fatal: std::terminate was called";
  if (const std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& e) {
      message += std::string(" with an uncaught ") + typeid(e).name() + ": " + e.what();
    } catch (...) {
      message += " with an uncaught exception of unknown type";
    }
  } else {
    message += " without an active exception (an exception escaped a destructor or noexcept function, or a "
               "thread was left joinable)";
  }
  message += "\n";
  write_text(message.c_str());
  std::abort();
}

}  // namespace

void install_crash_reporter(const char* program) {
  static std::once_flag once;
  std::call_once(once, [program] {
    g_program = program;
    stack_t stack{};
    stack.ss_sp = g_alternate_stack;
    stack.ss_size = sizeof(g_alternate_stack);
    sigaltstack(&stack, nullptr);
    // Load libgcc's unwinder now: the first backtrace() call may allocate, which a handler must not.
    void* warm[1];
    (void)backtrace(warm, 1);
    struct sigaction action {};
    action.sa_handler = crash_signal_handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_ONSTACK | SA_RESETHAND;
    for (const int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(s, &action, nullptr);
    std::set_terminate(terminate_handler);
  });
}

}  // namespace sg::crash
