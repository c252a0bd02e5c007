// The `ignis` command-line program: a table of subcommands (bench, train, eval, fetch, models,
// version, help), each a function from its arguments to an exit status.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ignis/device.h"

namespace ignis::cli {

using Args = std::vector<std::string>;

/// Exit status for bad usage (unknown command, workload or option), as argparse and getopt.
constexpr int kUsageError = 2;

/// Thrown for bad command-line usage: main prints the message and the usage, exits with 2.
struct UsageError : std::runtime_error {
  UsageError(const std::string& msg, std::string usage_text)
      : std::runtime_error(msg), usage(std::move(usage_text)) {}
  std::string usage;
};

/// Thrown for `--help` / `-h`: main prints the usage to stdout and exits with 0.
struct HelpRequested : std::runtime_error {
  explicit HelpRequested(std::string usage_text)
      : std::runtime_error("help"), usage(std::move(usage_text)) {}
  std::string usage;
};

/// One subcommand: `ignis NAME ARGS...` calls run(ARGS).
struct Command {
  const char* name;
  const char* args;     // the argument synopsis shown in the usage
  const char* summary;  // one line for `ignis --help`
  int (*run)(const Args& args);
};

/// Parses the value of an integer option (`--threads 4` or `--threads=4`) in [lo, hi].
int64_t parse_int(const std::string& option, const std::string& value, int64_t lo, int64_t hi,
                  const std::string& usage);

/// Parses --device (cpu, cuda or cuda:N) into a device that can run the command: a GPU must be
/// there (else the reason), meta is refused (`meta_refusal` says why: "cannot train").
Device parse_device(const std::string& value, const std::string& meta_refusal,
                    const std::string& usage);

// ---- subcommands
int bench_main(const Args& args);
int run_main(const Args& args);  // cli/run.cpp

}  // namespace ignis::cli
