// Reading megamoe's environment variables (README.md lists them).
#pragma once
#include <cstdlib>
#include <string_view>

namespace megamoe {

// True when the variable is set to 1, true, yes or on.
inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return false;
  std::string_view s(v);
  return s == "1" || s == "true" || s == "yes" || s == "on" || s == "TRUE" || s == "ON";
}

}  // namespace megamoe
