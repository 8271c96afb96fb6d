#include "common/cli.hpp"

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "megamoe/errors.hpp"

namespace megamoe::cli {

namespace {

// `text` with its lines broken at spaces to at most `width` columns.
std::string wrapped(const std::string& text, std::size_t width) {
  std::string out, line;
  auto flush = [&] { out += (out.empty() ? "" : "\n") + line, line.clear(); };
  for (std::size_t i = 0; i <= text.size();) {
    const std::size_t end = std::min(text.find_first_of(" \n", i), text.size());
    const std::string word = text.substr(i, end - i);
    if (!line.empty() && line.size() + 1 + word.size() > width) flush();
    line += (line.empty() ? "" : " ") + word;
    if (end < text.size() && text[end] == '\n') flush();
    i = end + 1;
  }
  if (!line.empty()) flush();
  return out;
}

// CLI11's help with the descriptions wrapped to a terminal's width.
class WrappingFormatter : public CLI::Formatter {
 public:
  std::string make_option_desc(const CLI::Option* opt) const override { return wrapped(opt->get_description(), 72); }
  std::string make_description(const CLI::App* app) const override {
    return wrapped(app->get_description(), 100) + "\n";
  }
  std::string make_footer(const CLI::App* app) const override { return "\n" + wrapped(app->get_footer(), 100) + "\n"; }
};

}  // namespace

void describe(CLI::App& app, const std::string& tool, const std::string& description, const std::string& exits) {
  app.name(tool);
  app.description(description);
  app.footer(exits);
  auto formatter = std::make_shared<WrappingFormatter>();
  formatter->column_width(28);
  app.formatter(formatter);
  app.option_defaults()->always_capture_default();
}

void parse(CLI::App& app, int argc, char** argv) {
  for (CLI::Option* o : app.get_options())  // a scalar flag given twice: the last wins (lists gather)
    if (o->get_items_expected_max() == 1) o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    fmt::print("{}", app.help());
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    usage_error(app.get_name(), e.what());
  }
}

void usage_error(const std::string& tool, const std::string& message) {
  fmt::print(stderr, "{}: {}\n(see {} --help)\n", tool, message, tool);
  std::exit(2);
}

int run_reporting_errors(const std::function<int()>& body) {
  try {
    return body();
  } catch (const NoGpuError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}

namespace {
// The integer a value spells wholly, or false.
bool whole_integer(const std::string& s, std::int64_t& v) {
  try {
    std::size_t used = 0;
    v = std::stoll(s, &used);
    return used == s.size();
  } catch (...) {
    return false;
  }
}
}  // namespace

CLI::Validator at_least(std::int64_t lo, const std::string& what) {
  return CLI::Validator(
      [lo, what](std::string& s) -> std::string {
        std::int64_t v = 0;
        if (whole_integer(s, v) && v >= lo) return "";
        return fmt::format("expects {} of at least {}, got '{}'", what, lo, s);
      },
      fmt::format(">={}", lo));
}

CLI::Validator in_range(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        std::int64_t v = 0;
        if (whole_integer(s, v) && v >= lo && v <= hi) return "";
        return fmt::format("expects {}..{}, got '{}'", lo, hi, s);
      },
      fmt::format("{}..{}", lo, hi));
}

CLI::Validator finite(double lo, double hi, const std::string& what) {
  return CLI::Validator(
      [lo, hi, what](std::string& s) -> std::string {
        try {
          std::size_t used = 0;
          const double x = std::stod(s, &used);
          if (used == s.size() && std::isfinite(x) && x >= lo && x <= hi) return "";
        } catch (...) {
        }
        return fmt::format("expects {}, got '{}'", what, s);
      },
      "");
}

std::string either(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

CLI::Validator one_of(std::vector<std::string> names) {
  const std::string words = either(names);
  return CLI::Validator(
      [names, words](std::string& s) -> std::string {
        for (const std::string& n : names)
          if (s == n) return "";
        return fmt::format("expects {}, got '{}'", words, s);
      },
      "");
}

CLI::Option* add_config(CLI::App& app, std::string& name) {
  return app.add_option("--config", name, "built-in config name, or a path ending in .json")->type_name("NAME");
}

CLI::Option* add_experts_per_rank(CLI::App& app, int& n, int lo) {
  return app
      .add_option("--experts-per-rank", n,
                  std::string("each rank holds N experts: the model cut to N x W experts in all (one rank's share of a "
                              "wider group; Kimi-K3 with 112 is a rank of EP8, the per-rank work of "
                              "docs/perf-notes.md)") +
                      (lo == 0 ? "; 0: the config's own" : ""))
      ->type_name("N")
      ->check(at_least(lo));
}

CLI::Option* add_bucket_table(CLI::App& app, std::string& card, const std::string& when_empty) {
  return app
      .add_option("--bucket-table", card,
                  "the config's bucket table tuned on CARD (the GPU's name as the driver gives it, \"NVIDIA H200\"), "
                  "or \"default\"; without it, " + when_empty)
      ->type_name("CARD");
}

CLI::Option* add_path(CLI::App& app, KernelPath& path) {
  return app
      .add_option_function<std::string>(
          "--path", [&path](const std::string& name) { path = path_from_name(name); },
          "the expert-GEMM kernels: auto (default), portable, tensor_core or hopper")
      ->type_name("P")
      ->check(one_of({"auto", "portable", "tensor_core", "hopper"}));
}

CLI::Option* add_int_list(CLI::App& app, const std::string& flag, std::vector<std::int64_t>& values,
                          const std::string& help, std::int64_t lo) {
  return app.add_option(flag, values, help)
      ->delimiter(',')
      ->type_name("LIST")
      ->check(at_least(lo, "integers"));
}

}  // namespace megamoe::cli
