#pragma once
// GraphRegistry: owns every executable graph of a run (region graphs and the full-iteration graph)
// and destroys them on every way out. Plus the process's stop handling (SIGINT/SIGTERM/SIGHUP).
//
// Cleanup design (never hang at exit):
//   * normal end / exception: the registry is an ordinary object; its destructor destroys every
//     executable graph. cudaGraphExecDestroy never waits: an in-flight launch completes and the driver
//     frees it afterwards. Nothing here synchronises the device, so a hung kernel cannot hang exit.
//   * early exit (std::exit while a registry is alive): an atexit handler, registered after the CUDA
//     runtime initialised (so it runs before the runtime's own teardown), destroys the graphs of every
//     live registry. It only try_locks, so an exit from a thread that holds the lock cannot deadlock.
//   * SIGINT/SIGTERM/SIGHUP: the first signal only sets a flag (async-signal-safe) that the training loop
//     polls between steps; the loop ends normally and the destructors above run. A second signal
//     _exit()s at once, unless it comes within 0.2 s of the first: that is one request delivered twice
//     (GNU timeout signals the command and then its process group). A watchdog thread _exit()s if the process is still alive `grace_seconds` after
//     the first signal (a step that never returns). After _exit the driver reclaims all device memory.
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph_exec.h"
#include "graph/region.h"
#include "graph/stats.h"

namespace sg::graph {

class GraphRegistry {
 public:
  GraphRegistry();
  ~GraphRegistry();
  GraphRegistry(const GraphRegistry&) = delete;
  GraphRegistry& operator=(const GraphRegistry&) = delete;

  // Captures `body` on `stream` as graph `name` and makes it executable: instantiated (with upload)
  // the first time, updated in place (cudaGraphExecUpdate) on a re-capture of the same topology.
  // Does NOT launch it. Throws the explained capture error when the capture breaks, and the capture
  // check's error (the graph destroyed, never launched) when the check refuses it.
  GraphExec& capture(const std::string& name, cudaStream_t stream, const RegionBody& body);

  // Runs after every capture, before the graph can be launched. Data parallelism compares each rank's
  // graph here: ranks whose captured collectives differ would wait on each other forever at the first
  // replay, so the comparison has to come before it.
  using CaptureCheck = std::function<void(const GraphInfo&)>;
  void set_capture_check(CaptureCheck check) { capture_check_ = std::move(check); }

  GraphExec* find(const std::string& name);
  // One replay (counted in stats().replays).
  void launch(GraphExec& exec, cudaStream_t stream);

  // Destroys every executable graph (idempotent, never throws, never blocks).
  void destroy_all() noexcept;

  size_t size() const { return execs_.size(); }
  std::vector<GraphInfo> graphs() const;

  // The runners report what only they know.
  void set_graphable_regions(int count) { graphable_regions_ = count; }
  void set_capture_step_ms(double ms) { capture_step_ms_ = ms; }
  GraphStats stats() const;

 private:
  std::vector<std::unique_ptr<GraphExec>> execs_;  // stable addresses for GraphExec&
  std::unordered_map<std::string, size_t> index_;
  int graphable_regions_ = 0;
  double capture_step_ms_ = -1.0;
  CaptureCheck capture_check_;
};

// ---- cleanup order: graphs first, then what they reference ----
// A captured NCCL collective keeps references into its communicator (registered buffers, proxy state):
// destroying the communicator while a graph that holds such a collective is alive makes the graph's
// later destruction touch freed state. So anything graphs may reference is released AFTER every graph:
//   * on a normal end or an exception, its owner calls destroy_all_live_graphs() first, then releases it;
//   * on std::exit, the at-exit handler destroys every live registry's graphs, then runs the releases
//     registered here (latest first) — never the other way round.
// Destroys the graphs of every live registry (idempotent, never throws, never blocks). A registry whose
// graphs were destroyed captures them again at its runner's next capture.
void destroy_all_live_graphs() noexcept;
// Runs `release` at exit after every live graph is destroyed, unless cancelled first. Returns a handle.
int release_after_graphs_at_exit(std::function<void()> release);
void cancel_release_after_graphs(int handle) noexcept;

// ---- stop handling (SIGINT / SIGTERM / SIGHUP) ----

// What the watchdog's message says the grace period covers, and what its exit gives up.
struct StopGraceText {
  std::string covers = "the step in flight and, with checkpoint.save, one checkpoint save";
  std::string gives_up = "without a final checkpoint";
};
// Installs the handlers (idempotent; re-installing updates the grace period and the text).
void install_stop_handlers(double grace_seconds = 1.5, const StopGraceText& text = {});
// Restores the handlers that were there before (tests). The watchdog stays, idle.
void uninstall_stop_handlers();
// Polled by the training loop between steps (and by the bench/test loops).
bool stop_requested();
int stop_signal();  // the first signal received (SIGINT, SIGTERM, SIGHUP) or 0
// The exit status after a stop: 128 + signal (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), as a
// shell reports it.
int exit_code_for_stop();
// Tests: pretend a signal arrived / forget it.
void request_stop(int signal_number);
void clear_stop_request();

}  // namespace sg::graph
