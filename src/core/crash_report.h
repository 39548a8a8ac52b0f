#pragma once
// Last words of a process that is dying: no failure of stepgraph ends without a message of its own.
//   * fatal signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT): a line naming the signal and what it
//     usually means, and a backtrace, written with async-signal-safe calls on an alternate stack (a
//     stack overflow still reports); then the signal's default action runs (core dump, exit status).
//   * std::terminate (an exception escaping a destructor, a noexcept function or a thread): the
//     exception's message, then abort (which reports as above).
// Signals that end a run on purpose (SIGINT, SIGTERM, SIGHUP) are graph/registry.h's business; a
// SIGKILL (the OOM killer, a job scheduler, a tool's timeout) cannot be caught by anyone, so
// `stepgraph train` prints what it is about to do before each long phase instead.
namespace sg::crash {

// Installs the handlers once per process (idempotent). `program` prefixes the messages.
void install_crash_reporter(const char* program);

}  // namespace sg::crash
