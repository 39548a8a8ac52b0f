#pragma once
// Signal dispositions the process inherited. `nohup` starts a command with SIGHUP ignored so that it outlives its
// terminal; stepgraph's stop handlers (graph/registry.h) and `stepgraph launch` (dist/local_launcher.h) leave such
// a SIGHUP ignored instead of turning it into a stop. (SIGINT, which a non-interactive shell also ignores in
// background jobs, still stops a run: scripts and tests send it on purpose.)
namespace sg {

// Whether SIGHUP was ignored when the process started. The first call reads the disposition and later calls
// return that answer; cli/main.cpp makes the first call before any handler is installed.
bool hangup_ignored_at_start();

}  // namespace sg
