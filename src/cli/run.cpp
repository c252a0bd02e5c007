// `ignis run MODEL.ignis --input X.safetensors --output Y.safetensors`: runs a saved graph
// (jit::Graph::save) with no model source. Inputs are taken from the input file by the graph's
// input names (%x0 -> "x0"; a single tensor is taken for a graph with a single input whatever
// its name); outputs are written as "output0", "output1", ... `--device` runs it on a GPU.
#include <iostream>
#include <string>

#include "cli/cli.h"
#include "ignis/autograd.h"
#include "ignis/error.h"
#include "ignis/jit.h"
#include "ignis/serialize.h"

namespace ignis::cli {

namespace {

const char* kRunUsage =
    "usage: ignis run MODEL.ignis --input X.safetensors --output Y.safetensors [--print-graph]\n"
    "                 [--device cpu|cuda|cuda:N]\n"
    "  runs a graph saved by jit::Graph::save on the inputs in X (by the graph's input names,\n"
    "  x0, x1, ...; a lone tensor feeds a lone input) and writes output0, output1, ... to Y.\n"
    "  --device: where it runs (default cpu); inputs are copied there, outputs back.\n";

}  // namespace

int run_main(const Args& args) {
  std::string model, input, output;
  bool print_graph = false;
  Device device = kCPU;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") throw HelpRequested(kRunUsage);
    if (a == "--print-graph") {
      print_graph = true;
    } else if (a == "--device") {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value", kRunUsage);
      device = parse_device(args[++i], "cannot run a graph (it has no data)", kRunUsage);
    } else if (a == "--input" || a == "--output") {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value", kRunUsage);
      (a == "--input" ? input : output) = args[++i];
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("unknown option '" + a + "'", kRunUsage);
    } else if (model.empty()) {
      model = a;
    } else {
      throw UsageError("more than one model file ('" + model + "', '" + a + "')", kRunUsage);
    }
  }
  if (model.empty()) throw UsageError("no model file given", kRunUsage);
  if (input.empty()) throw UsageError("--input is required", kRunUsage);
  if (output.empty()) throw UsageError("--output is required", kRunUsage);

  jit::Graph g = jit::load(model, device);
  if (print_graph) std::cout << g.str();
  SafetensorsFile in = load_safetensors(input);
  std::vector<Tensor> inputs;
  for (int id : g.inputs) {
    const std::string& name = g.values[static_cast<size_t>(id)].name;
    const Tensor* found = nullptr;
    for (const auto& [n, t] : in.tensors)
      if (n == name) found = &t;
    if (found == nullptr && g.inputs.size() == 1 && in.tensors.size() == 1) {
      found = &in.tensors[0].second;
    }
    if (found == nullptr) {
      std::string have;
      for (const auto& [n, t] : in.tensors) have += (have.empty() ? "" : ", ") + n;
      IGNIS_CHECK(false, "ignis run: ", input, " has no tensor '", name,
                  "' for the graph's input %", name,
                  " (it holds: ", have.empty() ? "nothing" : have, ")");
    }
    inputs.push_back(found->to(device));
  }
  std::vector<Tensor> outs;
  {
    NoGradGuard no_grad;
    outs = g.run(inputs);
  }
  NamedTensorList named;
  for (size_t i = 0; i < outs.size(); ++i) {
    named.emplace_back("output" + std::to_string(i), outs[i].cpu().contiguous());
    std::cout << "output" << i << ": " << outs[i].dtype() << " [";
    for (int64_t d = 0; d < outs[i].dim(); ++d) std::cout << (d ? ", " : "") << outs[i].size(d);
    std::cout << "]\n";
  }
  save_safetensors(output, named);
  return 0;
}

}  // namespace ignis::cli
