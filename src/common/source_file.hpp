// A source file held in memory: a kernel template, or a rendered kernel, by its path as included.
#pragma once
#include <string>

namespace megamoe {

struct SourceFile {
  std::string path;  // relative to templates/
  std::string text;
};

}  // namespace megamoe
