#include "common/diagnostics.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

namespace megamoe {
namespace {
std::mutex g_mutex;
WarningHandler g_handler;
}  // namespace

void warn(const std::string& message) {
  std::lock_guard lock(g_mutex);
  if (g_handler)
    g_handler(message);
  else
    std::fprintf(stderr, "megamoe: warning: %s\n", message.c_str());
}

void warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  {
    std::lock_guard lock(mutex);
    if (!said.insert(message).second) return;
  }
  warn(message);
}

void progress(const std::string& message) {
  const char* quiet = std::getenv("MEGAMOE_QUIET");
  if (quiet && quiet[0] == '1') return;
  std::lock_guard lock(g_mutex);
  std::fprintf(stderr, "megamoe: %s\n", message.c_str());
}

WarningHandler set_warning_handler(WarningHandler handler) {
  std::lock_guard lock(g_mutex);
  std::swap(g_handler, handler);
  return handler;
}

}  // namespace megamoe
