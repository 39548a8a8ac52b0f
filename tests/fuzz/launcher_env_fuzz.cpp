// libFuzzer harness: the launcher environment (dist/world_env.h world_from_env, rendezvous_settings_from_env,
// device_for_local_rank) as torchrun, `stepgraph launch` and srun set it, and Slurm hostlists (dist/hostlist.h
// first_host). Input: one NAME=VALUE line per variable (RANK, WORLD_SIZE, SLURM_NODELIST, MASTER_PORT, ...; a later
// line wins); the first line is also read as a hostlist. What the parsers accept must be consistent: a rank below the
// world size, a port in [0, 65535], a device that exists.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "core/strings.h"
#include "dist/hostlist.h"
#include "dist/world_env.h"
#include "fuzz_util.h"

namespace {

[[noreturn]] void inconsistent(const char* what, const sg::dist::WorldInfo& w) {
  std::fprintf(stderr, "launcher_env_fuzz: accepted an inconsistent world (%s): %s\n", what, w.describe().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)sg::fuzz::scratch_dir("launcher_env");  // quiets the log
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> lines = sg::split(text, '\n');
  std::map<std::string, std::string> vars;
  for (const std::string& line : lines) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) vars[line.substr(0, eq)] = line.substr(eq + 1);
  }
  const sg::dist::EnvLookup env = [&](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  sg::fuzz::expect_sg_errors("launcher_env_fuzz", [&] { (void)sg::dist::first_host(lines.front()); });
  sg::fuzz::expect_sg_errors("launcher_env_fuzz", [&] {
    const sg::dist::RendezvousSettings s = sg::dist::rendezvous_settings_from_env(env);
    if (!(s.timeout_seconds > 0.0 && s.timeout_seconds <= 1e7)) {
      std::fprintf(stderr, "launcher_env_fuzz: accepted a rendezvous timeout of %g s\n", s.timeout_seconds);
      std::abort();
    }
  });
  sg::fuzz::expect_sg_errors("launcher_env_fuzz", [&] {
    const sg::dist::WorldInfo w = sg::dist::world_from_env(env);
    (void)w.describe();
    (void)w.ranks_on_node_source();
    if (w.world_size < 1 || w.rank < 0 || w.rank >= w.world_size) inconsistent("rank", w);
    if (w.local_rank < 0 || w.local_world_size < 0 || w.local_world_size > w.world_size) inconsistent("local", w);
    if (w.master_port < 0 || w.master_port > 65535) inconsistent("port", w);
    std::optional<std::string> visible;
    if (const auto it = vars.find("CUDA_VISIBLE_DEVICES"); it != vars.end()) visible = it->second;
    for (const int devices : {0, 1, 8}) {
      sg::fuzz::expect_sg_errors("launcher_env_fuzz", [&] {
        const int device = sg::dist::device_for_local_rank(w, devices, visible);
        if (device < 0 || device >= devices) inconsistent("device", w);
      });
    }
  });
  return 0;
}
