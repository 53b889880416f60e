// Subcommands of the troupe binary. Each takes its arguments (after the command name) and
// returns the process exit code: 0 ok, 1 runtime failure, 2 usage or config error.
#pragma once

#include <string>
#include <vector>

namespace troupe::app {

int serveCommand(const std::vector<std::string>& args);
extern const char* const kServeHelp;
int simulateCommand(const std::vector<std::string>& args);
extern const char* const kSimulateHelp;

}  // namespace troupe::app
