// The kernel templates and built-in configs, embedded at build time by cmake/EmbedFiles.cmake.
#pragma once
#include <string_view>
#include <vector>

namespace megamoe::embedded {

struct File {
  std::string_view path;  // relative to templates/ or configs/
  std::string_view text;
};

const std::vector<File>& templates();
const std::vector<File>& configs();

}  // namespace megamoe::embedded
