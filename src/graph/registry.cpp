#include "graph/registry.h"

#include <semaphore.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/inherited_signals.h"
#include "core/strings.h"
#include "cuda/device.h"
#include "graph/capture.h"

namespace sg::graph {

// ---------------------------------------------------------------------------------------------
// Live registries, for the atexit cleanup
// ---------------------------------------------------------------------------------------------

namespace {

// Heap objects that are never destroyed: usable from atexit handlers in any teardown order.
std::mutex& live_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<GraphRegistry*>& live_registries() {
  static auto* v = new std::vector<GraphRegistry*>;
  return *v;
}

struct PendingRelease {
  int handle;
  std::function<void()> release;
};
std::vector<PendingRelease>& pending_releases() {
  static auto* v = new std::vector<PendingRelease>;
  return *v;
}

void destroy_live_registries_at_exit() {
  // try_lock: if exit() was called while another thread holds the lock, skip (the driver reclaims
  // everything at process end) rather than risk a hang.
  std::unique_lock<std::mutex> lock(live_mutex(), std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (GraphRegistry* r : live_registries()) r->destroy_all();
  // Then what the graphs referenced, latest first.
  std::vector<PendingRelease> releases;
  releases.swap(pending_releases());
  lock.unlock();
  for (auto it = releases.rbegin(); it != releases.rend(); ++it) {
    try {
      it->release();
    } catch (...) {
    }
  }
}

void register_atexit_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Initialise the CUDA runtime first so its own teardown is registered before ours; atexit runs
    // in reverse order, so our handler then runs while the runtime is still usable.
    (void)cuda::device_count();
    std::atexit(destroy_live_registries_at_exit);
  });
}

}  // namespace

void destroy_all_live_graphs() noexcept {
  std::lock_guard<std::mutex> lock(live_mutex());
  for (GraphRegistry* r : live_registries()) r->destroy_all();
}

int release_after_graphs_at_exit(std::function<void()> release) {
  register_atexit_once();
  static int next_handle = 0;
  std::lock_guard<std::mutex> lock(live_mutex());
  const int handle = ++next_handle;
  pending_releases().push_back({handle, std::move(release)});
  return handle;
}

void cancel_release_after_graphs(int handle) noexcept {
  std::lock_guard<std::mutex> lock(live_mutex());
  auto& v = pending_releases();
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].handle == handle) {
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
}

GraphRegistry::GraphRegistry() {
  register_atexit_once();
  std::lock_guard<std::mutex> lock(live_mutex());
  live_registries().push_back(this);
}

GraphRegistry::~GraphRegistry() {
  destroy_all();
  std::lock_guard<std::mutex> lock(live_mutex());
  auto& v = live_registries();
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == this) {
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
}

GraphExec& GraphRegistry::capture(const std::string& name, cudaStream_t stream, const RegionBody& body) {
  CapturedGraph captured = capture_graph(stream, name, body);
  GraphExec* exec = find(name);
  if (exec == nullptr) {
    execs_.push_back(std::make_unique<GraphExec>(name));
    index_[name] = execs_.size() - 1;
    exec = execs_.back().get();
  }
  exec->install(captured.graph, stream, captured.capture_ms);  // takes ownership of the graph
  if (capture_check_) {
    try {
      capture_check_(exec->info());
    } catch (...) {
      exec->destroy();  // refused: never launched, and the runner captures again if the run goes on
      throw;
    }
  }
  return *exec;
}

GraphExec* GraphRegistry::find(const std::string& name) {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : execs_[it->second].get();
}

void GraphRegistry::launch(GraphExec& exec, cudaStream_t stream) { exec.launch(stream); }

void GraphRegistry::destroy_all() noexcept {
  for (auto& e : execs_) e->destroy();
}

std::vector<GraphInfo> GraphRegistry::graphs() const {
  std::vector<GraphInfo> out;
  out.reserve(execs_.size());
  for (const auto& e : execs_) out.push_back(e->info());
  return out;
}

GraphStats GraphRegistry::stats() const {
  GraphStats s;
  for (const auto& e : execs_) {
    const GraphInfo& g = e->info();
    s.graphs_created += g.instantiations;
    s.graphs_updated += g.updates;
    s.capture_ms += g.total_capture_ms;
    s.instantiate_ms += g.total_instantiate_ms;
    s.replays += g.launches;
    if (e->valid()) {
      ++s.graphs_live;
      s.nodes += g.nodes;
      s.kernel_nodes += g.kernel_nodes;
      s.memset_nodes_lowered += g.memset_nodes_lowered;
      s.memset_nodes_hoisted += g.memset_nodes_hoisted;
    }
  }
  s.graphable_regions = graphable_regions_;
  s.capture_step_ms = capture_step_ms_;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Stop handling
// ---------------------------------------------------------------------------------------------

namespace {

// Lock-free atomics only: these are touched from the signal handler.
std::atomic<int> g_stop_signal{0};
std::atomic<int> g_signal_count{0};
std::atomic<long long> g_first_signal_ns{0};  // CLOCK_MONOTONIC of the signal that requested the stop
// A signal this soon after the first is the same request delivered twice, not a second request: GNU timeout,
// for one, sends its signal to the command and then to its process group, so the command gets it twice
// within microseconds. A person pressing Ctrl-C again takes longer than this.
constexpr long long kDuplicateSignalNs = 200'000'000;
std::atomic<long long> g_grace_ms{1500};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<long long>::is_always_lock_free);

sem_t g_watchdog_sem;  // posted by the handler (sem_post is async-signal-safe); never destroyed
std::mutex g_install_mutex;
StopGraceText g_grace_text;  // under g_install_mutex; read by the watchdog thread, never by the handler
bool g_installed = false;
bool g_watchdog_started = false;
struct sigaction g_previous_int {};
struct sigaction g_previous_term {};
struct sigaction g_previous_hup {};

void write_stderr(const char* text, size_t length) {
  ssize_t ignored = ::write(STDERR_FILENO, text, length);
  (void)ignored;
}

long long monotonic_ns() {  // clock_gettime is async-signal-safe
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long long>(now.tv_sec) * 1'000'000'000LL + now.tv_nsec;
}

// The interrupted code may be between a failed call and its read of errno (a write's EINTR or ENOSPC, a poll's
// EINTR): the handler's own calls (write, sem_post) must not change it. ThreadSanitizer: "signal handler spoils errno".
struct SavedErrno {
  int value = errno;
  ~SavedErrno() { errno = value; }
};

extern "C" void stepgraph_stop_handler(int signal_number) {
  const SavedErrno saved_errno;
  const int count = g_signal_count.fetch_add(1) + 1;
  if (count > 1 && monotonic_ns() - g_first_signal_ns.load() < kDuplicateSignalNs) {
    static const char kMessage[] =
        "\nstepgraph: the same stop request again at once (a launcher sending it twice); still stopping cleanly\n";
    write_stderr(kMessage, sizeof(kMessage) - 1);
    return;
  }
  if (count == 1) {
    g_first_signal_ns.store(monotonic_ns());
    g_stop_signal.store(signal_number);
    static const char kMessage[] =
        "\nstepgraph: stop requested; finishing the current step and cleaning up (signal again to exit "
        "now)\n";
    write_stderr(kMessage, sizeof(kMessage) - 1);
    sem_post(&g_watchdog_sem);
  } else {
    static const char kMessage[] = "\nstepgraph: second signal; exiting now\n";
    write_stderr(kMessage, sizeof(kMessage) - 1);
    _exit(128 + signal_number);
  }
}

// Ends the process if a requested stop has not completed within the grace period.
void watchdog_main() {
  for (;;) {
    while (sem_wait(&g_watchdog_sem) != 0) {
      if (errno != EINTR) return;  // cannot wait: no watchdog (the stop flag still works)
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(g_grace_ms.load());
    while (std::chrono::steady_clock::now() < deadline && g_stop_signal.load() != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const int signal_number = g_stop_signal.load();
    if (signal_number == 0) continue;  // the stop was withdrawn (tests)
    // A thread, not a signal handler: formatting and the mutex are allowed here.
    StopGraceText text;
    {
      std::lock_guard<std::mutex> lock(g_install_mutex);
      text = g_grace_text;
    }
    const std::string message = strprintf(
        "\nstepgraph: the run did not stop within %.1f s of signal %d (the grace period covers %s); exiting now "
        "with status %d, %s\n",
        static_cast<double>(g_grace_ms.load()) / 1000.0, signal_number, text.covers.c_str(), 128 + signal_number,
        text.gives_up.c_str());
    write_stderr(message.data(), message.size());
    _exit(128 + signal_number);
  }
}

}  // namespace

void install_stop_handlers(double grace_seconds, const StopGraceText& text) {
  SG_CHECK(grace_seconds > 0.0, strprintf("stop grace period must be positive, got %g s", grace_seconds));
  std::lock_guard<std::mutex> lock(g_install_mutex);
  g_grace_ms.store(static_cast<long long>(grace_seconds * 1000.0));
  g_grace_text = text;
  if (!g_watchdog_started) {
    SG_CHECK(sem_init(&g_watchdog_sem, 0, 0) == 0, "sem_init for the stop watchdog failed");
    std::thread(watchdog_main).detach();  // never joined: it must not keep the process alive or block exit
    g_watchdog_started = true;
  }
  if (g_installed) return;
  struct sigaction action {};
  action.sa_handler = stepgraph_stop_handler;
  // The stop signals wait for each other's handler: the first one's count and time are recorded before a
  // second one (SIGTERM during SIGINT's handler) is weighed against them.
  sigemptyset(&action.sa_mask);
  for (const int blocked : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&action.sa_mask, blocked);
  action.sa_flags = SA_RESTART;
  SG_CHECK(sigaction(SIGINT, &action, &g_previous_int) == 0, "installing the SIGINT handler failed");
  SG_CHECK(sigaction(SIGTERM, &action, &g_previous_term) == 0, "installing the SIGTERM handler failed");
  // SIGHUP (the terminal or ssh session went away) ends a run like SIGTERM: finish, save, exit. Unless the process
  // started with it ignored (nohup): then the run is meant to outlive the session (core/inherited_signals.h).
  if (hangup_ignored_at_start()) {
    SG_CHECK(sigaction(SIGHUP, nullptr, &g_previous_hup) == 0, "reading the SIGHUP disposition failed");
  } else {
    SG_CHECK(sigaction(SIGHUP, &action, &g_previous_hup) == 0, "installing the SIGHUP handler failed");
  }
  g_installed = true;
}

void uninstall_stop_handlers() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (!g_installed) return;
  (void)sigaction(SIGINT, &g_previous_int, nullptr);
  (void)sigaction(SIGTERM, &g_previous_term, nullptr);
  (void)sigaction(SIGHUP, &g_previous_hup, nullptr);
  g_installed = false;
}

bool stop_requested() { return g_stop_signal.load(std::memory_order_relaxed) != 0; }

int stop_signal() { return g_stop_signal.load(); }

int exit_code_for_stop() {
  const int s = g_stop_signal.load();
  return s == 0 ? 0 : 128 + s;
}

void request_stop(int signal_number) {
  // No watchdog here: only a real signal arms it.
  g_stop_signal.store(signal_number);
}

void clear_stop_request() {
  g_stop_signal.store(0);
  g_signal_count.store(0);
  g_first_signal_ns.store(0);
}

}  // namespace sg::graph
