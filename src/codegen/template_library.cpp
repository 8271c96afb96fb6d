#include "codegen/template_library.hpp"

#include <set>

#include <fmt/format.h>

#include "common/embedded_files.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

std::string_view template_text(std::string_view path) {
  for (auto& f : embedded::templates())
    if (f.path == path) return f.text;
  throw Error(fmt::format("megamoe: no kernel template '{}' (templates/ has none by that path)", path));
}

namespace {

// The path of a line's #include "path", or empty.
std::string quoted_include(std::string_view line) {
  auto skip = [&](std::size_t i) { return line.find_first_not_of(" \t", i); };
  std::size_t i = skip(0);
  if (i == std::string_view::npos || line[i] != '#') return {};
  i = skip(i + 1);
  if (i == std::string_view::npos || line.substr(i, 7) != "include") return {};
  i = skip(i + 7);
  if (i == std::string_view::npos || line[i] != '"') return {};
  std::size_t close = line.find('"', i + 1);
  return close == std::string_view::npos ? std::string() : std::string(line.substr(i + 1, close - i - 1));
}

void collect(std::string_view text, std::set<std::string>& seen, std::vector<SourceFile>& out) {
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string path = quoted_include(text.substr(pos, eol - pos));
    pos = eol + 1;
    if (path.empty() || !seen.insert(path).second) continue;
    std::string_view body = template_text(path);
    out.push_back({path, std::string(body)});
    collect(body, seen, out);
  }
}

}  // namespace

std::vector<SourceFile> collect_headers(std::string_view source) {
  std::set<std::string> seen;
  std::vector<SourceFile> out;
  collect(source, seen, out);
  return out;
}

}  // namespace megamoe
