// `ignis COMMAND [ARGS...]`: looks COMMAND up in the table of subcommands and runs it. A new
// subcommand is one row of kCommands plus its function.
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include "cli/cli.h"
#include "cli/train.h"
#include "ignis/cuda.h"
#include "ignis/error.h"

#ifndef IGNIS_VERSION
#define IGNIS_VERSION "0.1.0"
#endif

namespace ignis::cli {
namespace {

int help_main(const Args& args);
int version_main(const Args& args);

constexpr Command kCommands[] = {
    {"bench", "WORKLOAD [--threads T] [--repeat R] [OPTIONS]",
     "run a benchmark workload (`ignis bench --help` lists them)", &bench_main},
    {"train", "--model NAME --dataset NAME [OPTIONS]", "train a model from the zoo", &train_main},
    {"eval", "--model NAME --dataset NAME --load PATH", "evaluate saved weights", &eval_main},
    {"fetch", "mnist [--dir DIR]", "download a data set (checks sha256)", &fetch_main},
    {"run", "MODEL.ignis --input X.safetensors --output Y.safetensors",
     "run a saved graph (jit::Graph::save) with no model source", &run_main},
    {"models", "", "list the model zoo with parameter counts", &models_main},
    {"ops", "[NAME]", "list the registered ops with their schemas", &ops_main},
    {"version", "", "print the versions of ignis and its libraries", &version_main},
    {"help", "", "print this help", &help_main},
};

std::string usage() {
  std::string s = "usage: ignis COMMAND [ARGS...]\n\ncommands:\n";
  for (const Command& c : kCommands) {
    s += std::string("  ") + c.name + (*c.args ? " " : "") + c.args + "\n      " + c.summary + "\n";
  }
  s += "\nRun `ignis COMMAND --help` for a command's options.\n";
  return s;
}

int help_main(const Args&) {
  std::cout << usage();
  return 0;
}

int version_main(const Args& args) {
  if (!args.empty()) throw UsageError("version takes no arguments", "usage: ignis version\n");
  const dnnl_version_t* v = dnnl_version();
  const std::string hash = v->hash;
  std::cout << "ignis " << IGNIS_VERSION << "\n"
            << "oneDNN " << v->major << "." << v->minor << "." << v->patch
            << (hash.empty() || hash == "N/A" ? "" : " (" + hash + ")") << "\n"
            << "OpenMP " << _OPENMP << ", " << omp_get_max_threads() << " threads by default\n"
            << "compiler " << __VERSION__ << "\n";
  return 0;
}

}  // namespace

Device parse_device(const std::string& v, const std::string& meta_refusal,
                    const std::string& usage_text) {
  Device d;
  try {
    d = Device(v);
  } catch (const Error&) {
    throw UsageError("--device expects cpu, cuda or cuda:N, got '" + v + "'", usage_text);
  }
  if (d.is_meta()) throw UsageError("--device meta " + meta_refusal, usage_text);
  if (d.is_cuda()) {
    if (!cuda::is_available()) {
      throw UsageError(
          "--device " + v + ": no GPU is available (" + cuda::unavailable_reason() + ")",
          usage_text);
    }
    if (d.index >= cuda::device_count()) {
      throw UsageError(
          "--device " + v + ": there are " + std::to_string(cuda::device_count()) + " GPUs",
          usage_text);
    }
  }
  return d;
}

int64_t parse_int(const std::string& option, const std::string& value, int64_t lo, int64_t hi,
                  const std::string& usage_text) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size()) {
    throw UsageError(option + " expects an integer, got '" + value + "'", usage_text);
  }
  if (v < lo || v > hi) {
    throw UsageError(option + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "], got " + value,
                     usage_text);
  }
  return v;
}

}  // namespace ignis::cli

int main(int argc, char** argv) {
  using namespace ignis::cli;
  if (argc < 2) {
    std::cerr << "ignis: error: missing command\n" << usage();
    return kUsageError;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h") return help_main({});
  if (name == "--version") return version_main({});
  const Args args(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(args);
    } catch (const HelpRequested& h) {
      std::cout << h.usage;
      return 0;
    } catch (const UsageError& e) {
      std::cerr << "ignis " << name << ": error: " << e.what() << "\n" << e.usage;
      return kUsageError;
    } catch (const std::exception& e) {
      std::cerr << "ignis " << name << ": " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "ignis: error: unknown command '" << name << "'\n" << usage();
  return kUsageError;
}
