// Where megamoe's warnings go: stderr, or a handler installed by the embedding program (tests
// capture them this way).
#pragma once
#include <functional>
#include <string>

namespace megamoe {

using WarningHandler = std::function<void(const std::string& message)>;

void warn(const std::string& message);
// warn(), the first time this process gives that message (a choice every runtime makes alike).
void warn_once(const std::string& message);
// A line of progress for long work (a kernel compiled at run time): stderr, unless
// MEGAMOE_QUIET=1.
void progress(const std::string& message);
// Returns the handler it replaced; an empty handler means stderr.
WarningHandler set_warning_handler(WarningHandler handler);

}  // namespace megamoe
