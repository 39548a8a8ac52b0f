#include "core/log.h"

#include <atomic>
#include <cstdio>

namespace sg::log {
namespace {
std::atomic<Level> g_level{Level::info};
const char* prefix(Level level) {
  switch (level) {
    case Level::debug: return "debug: ";
    case Level::info: return "";
    case Level::warn: return "warning: ";
    case Level::error: return "error: ";
  }
  return "";
}
}  // namespace

void set_level(Level level) { g_level = level; }
Level level() { return g_level; }
void write(Level level, const std::string& message) {
  if (level < g_level) return;
  std::fprintf(stderr, "%s%s\n", prefix(level), message.c_str());
  std::fflush(stderr);
}

}  // namespace sg::log
