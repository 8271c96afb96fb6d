// The kernel templates (templates/**.cuh, embedded in the binary) and include resolution.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_spec.hpp"

namespace megamoe {

// The text of a template header; throws megamoe::Error naming the path if there is none.
std::string_view template_text(std::string_view path);

// Every template header `source` includes with #include "...", transitively, each once,
// in first-inclusion order. These are handed to the compiler in memory, and hashed.
std::vector<SourceFile> collect_headers(std::string_view source);

}  // namespace megamoe
