#include "dist/world_env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "dist/hostlist.h"

namespace sg::dist {
namespace {

// A variable that is set to something other than blanks.
std::optional<std::string> get(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> v = env(name);
  if (v && trim(*v).empty()) return std::nullopt;
  if (v) return trim(*v);
  return v;
}

std::string require(const EnvLookup& env, const std::string& name, const std::string& why) {
  std::optional<std::string> v = get(env, name);
  if (!v) throw Error(strprintf("%s is not set, but %s; %s", name.c_str(), why.c_str(),
                                "start the ranks with `stepgraph launch -n N -- train ...`, torchrun or srun, "
                                "which set it"));
  return *v;
}

void check_local(const char* rank_name, int local_rank, const char* size_name, int local_size, const char* world_name,
                 int world) {
  // Bounded by the world size, which is bounded: local_rank + 1 (WorldInfo::ranks_on_node) cannot overflow.
  if (local_rank >= world) {
    throw Error(
        strprintf("%s = %d must be less than %s = %d (a rank on this node is one of the world's): the "
                  "launcher's environment is inconsistent",
                  rank_name, local_rank, world_name, world));
  }
  if (local_size > 0 && local_rank >= local_size) {
    throw Error(strprintf("%s = %d must be less than %s = %d: the launcher's environment is inconsistent", rank_name,
                          local_rank, size_name, local_size));
  }
  if (local_size > world) {
    throw Error(strprintf("%s = %d exceeds %s = %d: the launcher's environment is inconsistent", size_name,
                          local_size, world_name, world));
  }
}

std::string job_token(const EnvLookup& env) {
  if (auto v = get(env, "TORCHELASTIC_RUN_ID")) return "torchelastic:" + *v;
  if (auto v = get(env, "STEPGRAPH_RUN_ID")) return "stepgraph:" + *v;
  if (auto v = get(env, "SLURM_JOB_ID")) return "slurm:" + *v + "." + get(env, "SLURM_STEP_ID").value_or("");
  return "";
}

WorldInfo torchrun_world(const EnvLookup& env) {
  // Only the ones that are set (the missing one is named by require).
  std::vector<std::string> set;
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK"}) {
    if (get(env, name)) set.emplace_back(name);
  }
  // A stray torchrun variable in an srun task (an sbatch template's LOCAL_RANK, say) hides Slurm's: say so.
  const std::string slurm_too = set.size() < 3 && get(env, "SLURM_PROCID")
                                    ? "; this is also an srun task (SLURM_PROCID is set): unset " + join(set, " and ") +
                                          " to use Slurm's variables"
                                    : "";
  const std::string why = join(set, " and ") + (set.size() == 1 ? " is" : " are") +
                          " (torchrun and stepgraph launch set RANK, WORLD_SIZE and LOCAL_RANK together" + slurm_too +
                          ")";
  WorldInfo w;
  w.launcher = "torchrun";
  w.world_size = parse_env_int("WORLD_SIZE", require(env, "WORLD_SIZE", why), 1, 1 << 20);
  w.rank = parse_env_int("RANK", require(env, "RANK", why), 0, INT_MAX);
  if (w.rank >= w.world_size) {
    throw Error(strprintf("RANK = %d must be less than WORLD_SIZE = %d: the launcher's environment is inconsistent",
                          w.rank, w.world_size));
  }
  w.local_rank = parse_env_int("LOCAL_RANK", require(env, "LOCAL_RANK", why), 0, INT_MAX);
  if (auto v = get(env, "LOCAL_WORLD_SIZE")) {
    w.local_world_size = parse_env_int("LOCAL_WORLD_SIZE", *v, 1, 1 << 20);
    w.local_world_size_variable = "LOCAL_WORLD_SIZE";
  }
  check_local("LOCAL_RANK", w.local_rank, "LOCAL_WORLD_SIZE", w.local_world_size, "WORLD_SIZE", w.world_size);
  if (auto v = get(env, "MASTER_ADDR")) {
    w.master_addr = *v;
    w.master_source = "MASTER_ADDR";
  }
  if (auto v = get(env, "MASTER_PORT")) w.master_port = parse_env_int("MASTER_PORT", *v, 1, 65535);
  return w;
}

// SLURM_NTASKS_PER_NODE / SLURM_STEP_TASKS_PER_NODE look like "4" or "4(x2),3": the first count.
int slurm_tasks_on_first_node(const std::string& name, const std::string& value) {
  const std::string first = value.substr(0, value.find_first_of("(,"));
  return parse_env_int(name, first, 1, 1 << 20);
}

WorldInfo slurm_world(const EnvLookup& env) {
  const std::string why = "SLURM_PROCID is (an srun task)";
  WorldInfo w;
  w.launcher = "slurm";
  const std::string size_name = get(env, "SLURM_NTASKS") || !get(env, "SLURM_NPROCS") ? "SLURM_NTASKS" : "SLURM_NPROCS";
  w.world_size = parse_env_int(size_name, require(env, size_name, why), 1, 1 << 20);
  w.rank = parse_env_int("SLURM_PROCID", require(env, "SLURM_PROCID", why), 0, INT_MAX);
  if (w.rank >= w.world_size) {
    throw Error(strprintf("SLURM_PROCID = %d must be less than %s = %d: the Slurm environment is inconsistent",
                          w.rank, size_name.c_str(), w.world_size));
  }
  w.local_rank = parse_env_int("SLURM_LOCALID", require(env, "SLURM_LOCALID", why), 0, INT_MAX);
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}) {
    if (auto v = get(env, name)) {
      w.local_world_size = slurm_tasks_on_first_node(name, *v);
      w.local_world_size_variable = name;
      break;
    }
  }
  if (w.local_world_size > 0 && w.local_rank >= w.local_world_size) {
    // Heterogeneous task counts per node are allowed: only the first node's count is known here.
    w.local_world_size = 0;
    w.local_world_size_variable.clear();
  }
  check_local("SLURM_LOCALID", w.local_rank, "SLURM_NTASKS_PER_NODE", w.local_world_size, size_name.c_str(),
              w.world_size);

  if (auto v = get(env, "MASTER_ADDR")) {
    w.master_addr = *v;
    w.master_source = "MASTER_ADDR";
  } else {
    for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      if (auto list = get(env, name)) {
        w.master_addr = first_host(*list, name);
        w.master_source = std::string("first host of ") + name;
        break;
      }
    }
    if (w.master_addr.empty()) {
      if (auto ip = get(env, "SLURM_LAUNCH_NODE_IPADDR")) {
        w.master_addr = *ip;
        w.master_source = "SLURM_LAUNCH_NODE_IPADDR";
      }
    }
  }
  if (auto v = get(env, "MASTER_PORT")) {
    w.master_port = parse_env_int("MASTER_PORT", *v, 1, 65535);
  } else if (auto job = get(env, "SLURM_JOB_ID")) {
    // The range of parse_env_int would be the derived digits', not the variable's: check the whole id.
    if (job->find_first_not_of("0123456789") != std::string::npos) {
      throw Error(
          strprintf("SLURM_JOB_ID = '%s' is not an integer (MASTER_PORT is derived from its last four "
                    "digits); set MASTER_PORT, or leave SLURM_JOB_ID as Slurm sets it",
                    job->c_str()));
    }
    const std::string digits = job->size() > 4 ? job->substr(job->size() - 4) : *job;
    w.master_port = 15000 + parse_env_int("SLURM_JOB_ID", digits, 0, 9999);
  }
  return w;
}

// Where stepgraph's own store listens (world_env.h's file comment): master_port is MASTER_PORT (or Slurm's derived
// port) on entry, the store's port on return.
void resolve_store_port(const EnvLookup& env, WorldInfo& w) {
  if (w.launcher == "none") return;
  // torchrun exports str(True) / str(False); torch's own workers test for exactly "True".
  w.agent_store = w.launcher == "torchrun" && get(env, "TORCHELASTIC_USE_AGENT_STORE") == std::string("True");
  const char* agent_note =
      "torchrun's elastic agent serves its own TCPStore on MASTER_ADDR:MASTER_PORT "
      "(TORCHELASTIC_USE_AGENT_STORE=True) and sets MASTER_PORT itself";
  if (auto v = get(env, "STEPGRAPH_STORE_PORT")) {
    int port = 0;
    try {
      port = parse_env_int("STEPGRAPH_STORE_PORT", *v, 1, 65535);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) +
                  ": set it to a free TCP port on rank 0's host for stepgraph's rendezvous store, or unset it");
    }
    if (w.agent_store && port == w.master_port) {
      throw Error(
          strprintf("STEPGRAPH_STORE_PORT = %d is MASTER_PORT, but %s: set STEPGRAPH_STORE_PORT to another "
                    "free port, or unset it to use MASTER_PORT + 1",
                    port, agent_note));
    }
    w.master_port = port;
    w.master_port_given = true;
    w.port_source = w.port_variable = "STEPGRAPH_STORE_PORT";
    return;
  }
  if (w.agent_store) {
    w.port_variable = "STEPGRAPH_STORE_PORT";
    if (w.master_port == 0) return;  // named by the TCP rendezvous (dist/rendezvous.cpp)
    if (w.master_port >= 65535) {
      throw Error(
          strprintf("MASTER_PORT = %d leaves no MASTER_PORT + 1 for stepgraph's rendezvous store (%s): set "
                    "STEPGRAPH_STORE_PORT to a free port on rank 0's host",
                    w.master_port, agent_note));
    }
    w.master_port += 1;
    w.port_source = "MASTER_PORT + 1";
    return;
  }
  w.port_variable = "MASTER_PORT";
  const bool set = get(env, "MASTER_PORT").has_value();
  if (w.master_port > 0) w.port_source = set ? "MASTER_PORT" : "SLURM_JOB_ID";
  // A file rendezvous serves Slurm's MASTER_PORT; under torchrun-style launchers, which always set one, a free port.
  w.master_port_given = set && w.launcher == "slurm";
}

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

int parse_env_int(const std::string& name, const std::string& value, int lo, int hi) {
  const std::string text = trim(value);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || v < lo || v > hi) {
    throw Error(strprintf("%s = '%s' is not an integer in [%d, %d]", name.c_str(), value.c_str(), lo, hi));
  }
  return static_cast<int>(v);
}

WorldInfo world_from_env(const EnvLookup& env) {
  WorldInfo w;
  if (get(env, "RANK") || get(env, "WORLD_SIZE") || get(env, "LOCAL_RANK")) {
    w = torchrun_world(env);
  } else if (get(env, "SLURM_PROCID")) {
    w = slurm_world(env);
  } else {
    w.launcher = "none";
  }
  resolve_store_port(env, w);
  w.job_token = job_token(env);
  return w;
}

std::string WorldInfo::describe() const {
  std::string text = strprintf("rank %d of %d (local rank %d, %s)", rank, world_size, local_rank, launcher.c_str());
  if (!master_addr.empty()) {
    text += strprintf(", master %s:%d", master_addr.c_str(), master_port);
    if (port_source != "MASTER_PORT" && !port_source.empty()) {
      text += " (" + port_source + (agent_store ? ": torchrun's agent store holds MASTER_PORT" : "") + ")";
    }
  }
  return text;
}

std::string WorldInfo::ranks_on_node_source() const {
  if (local_world_size > 0 && !local_world_size_variable.empty()) {
    return strprintf("%s = %d", local_world_size_variable.c_str(), local_world_size);
  }
  if (local_world_size > 0) return strprintf("local world size %d", local_world_size);
  return strprintf("at least local rank %d + 1", local_rank);
}

int device_for_local_rank(const WorldInfo& world, int device_count,
                          const std::optional<std::string>& cuda_visible_devices) {
  const std::string visible =
      cuda_visible_devices ? "CUDA_VISIBLE_DEVICES=" + *cuda_visible_devices : "CUDA_VISIBLE_DEVICES unset";
  if (device_count < 1) {
    throw Error(strprintf("rank %d needs a GPU and sees none (%s): data parallelism runs one rank per GPU", world.rank,
                          visible.c_str()));
  }
  const int ranks_here = world.ranks_on_node();
  if (device_count == 1 && !cuda_visible_devices && ranks_here > 1) {
    throw Error(strprintf("%d ranks on this node but this machine has 1 GPU (%s): start at most 1 rank per GPU "
                          "(launch -n / bench -ng / torchrun --nproc-per-node at most 1 here)",
                          ranks_here, visible.c_str()));
  }
  if (world.local_rank < device_count) return world.local_rank;
  if (device_count == 1) return 0;  // each rank was given its own GPU
  throw Error(strprintf("local rank %d has no GPU: this node has %d GPU%s visible (%s); start at most %d rank%s per "
                        "node",
                        world.local_rank, device_count, device_count == 1 ? "" : "s", visible.c_str(), device_count,
                        device_count == 1 ? "" : "s"));
}

RendezvousSettings rendezvous_settings_from_env(const EnvLookup& env) {
  RendezvousSettings s;
  if (auto v = get(env, "STEPGRAPH_RENDEZVOUS_FILE")) s.file = *v;
  if (auto v = get(env, "STEPGRAPH_RENDEZVOUS_TIMEOUT")) {
    char* end = nullptr;
    const double t = std::strtod(v->c_str(), &end);
    // At most 10^7 s (115 days): the deadline is steady_clock nanoseconds, which a larger (or infinite) value would
    // overflow into the past.
    if (end != v->c_str() + v->size() || !(t > 0.0) || !(t <= 1e7)) {
      throw Error("STEPGRAPH_RENDEZVOUS_TIMEOUT = '" + *v + "' must be a number of seconds above 0 and at most 1e7");
    }
    s.timeout_seconds = t;
  }
  return s;
}

}  // namespace sg::dist
