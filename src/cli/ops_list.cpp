// `ignis ops [NAME]`: every registered op with its schema, kind, whether it is differentiable
// and the devices with kernels; with NAME, only the ops whose name is NAME (all overloads).
#include <iostream>

#include "cli/cli.h"
#include "ignis/op_registry.h"

namespace ignis::cli {

int ops_main(const Args& args) {
  if (args.size() > 1) {
    throw UsageError("ops takes at most one op name", "usage: ignis ops [NAME]\n");
  }
  const std::string filter = args.empty() ? "" : args[0];
  size_t shown = 0;
  for (const op::Record* r : op::all_records()) {
    if (!filter.empty() && r->schema.name != filter && r->schema.full_name() != filter) continue;
    std::string devices;
    for (const std::string& d : r->devices) devices += (devices.empty() ? "" : ",") + d;
    std::cout << r->schema.str() << "\n    kind=" << r->kind
              << " differentiable=" << (r->differentiable ? "yes" : "no") << " devices=" << devices
              << "\n";
    ++shown;
  }
  if (!filter.empty() && shown == 0) {
    throw UsageError("no op named '" + filter + "' is registered", "usage: ignis ops [NAME]\n");
  }
  if (filter.empty()) std::cout << shown << " ops\n";
  return 0;
}

}  // namespace ignis::cli
