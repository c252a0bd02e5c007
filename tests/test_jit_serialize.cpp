// Saving and loading graphs: save -> load -> run equals the traced model; the loader treats a
// file as untrusted and names what is wrong in corrupted and hostile files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "no '" << from << "' in the graph";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// A saved MLP graph, with its JSON edited by `edit` and written back as a graph file.
struct Edited {
  TempDir dir{"ignis-jit"};
  std::string path = dir.file("g.ignis");
  std::string json;
  NamedTensorList tensors;
  Edited() {
    manual_seed(0);
    auto m = models::mlp({1, 4, 3}, {5});
    m->eval();
    jit::Graph g = jit::trace(m, {randn({2, 1, 4, 4})});
    jit::fuse_ops(g);  // flatten, linear_relu, linear
    g.save(path);
    SafetensorsFile f = load_safetensors(path);
    json = f.metadata.at("ignis.graph");
    tensors = f.tensors;
  }
  std::string load_error(const std::string& new_json,
                         std::map<std::string, std::string> extra = {}) {
    std::map<std::string, std::string> meta = {
        {"format", "ignis.graph"}, {"ignis.graph.version", "1"}, {"ignis.graph", new_json}};
    for (auto& [k, v] : extra) meta[k] = v;
    save_safetensors(path, tensors, meta);
    return error_of([&] { jit::load(path); });
  }
};

}  // namespace

TEST(JitSave, SaveLoadRunEqualsTheModel) {
  TempDir dir("ignis-jit");
  for (const char* name : {"mlp", "lenet", "resnet18"}) {
    SCOPED_TRACE(name);
    manual_seed(1);
    auto m = models::create(name, {3, 32, 10});
    m->eval();
    Tensor x = randn({2, 3, 32, 32});
    for (bool frozen : {false, true}) {
      jit::Graph g = jit::trace(m, {x});
      if (frozen) jit::freeze(g);
      const std::string path = dir.file(std::string(name) + (frozen ? "-frozen" : "") + ".ignis");
      g.save(path);
      jit::Graph back = jit::load(path);
      EXPECT_EQ(back.str(), g.str());
      NoGradGuard ng;
      EXPECT_TRUE(equal(back.run({x})[0], g.run({x})[0]));
      if (!frozen) {
        // Parameters come back as parameters (trainable), with their names.
        ASSERT_EQ(back.named_parameters().size(), g.named_parameters().size());
        EXPECT_TRUE(back.named_parameters()[0].second.requires_grad());
        EXPECT_EQ(back.named_parameters()[0].first, g.named_parameters()[0].first);
      }
    }
  }
}

// A training graph after fuse_ops (batch_norm_relu nodes, which update buffers in place) saves,
// loads and trains the same: output and parameter gradients equal.
TEST(JitSave, OptimisedTrainingGraphRoundTrips) {
  TempDir dir("ignis-jit");
  manual_seed(2);
  auto m = models::resnet18({3, 32, 10});
  m->train();
  Tensor x = randn({2, 3, 32, 32});
  jit::Graph g = jit::trace(m, {x});
  jit::optimize(g);
  ASSERT_EQ(g.count("batch_norm_relu"), 17);
  g.save(dir.file("train.ignis"));
  jit::Graph back = jit::load(dir.file("train.ignis"));
  EXPECT_EQ(back.str(), g.str());
  auto grads = [&](jit::Graph& graph) {
    Tensor y = graph.run({x})[0];
    std::vector<Tensor> params;
    for (auto& [name, p] : graph.named_parameters()) params.push_back(p);
    std::vector<Tensor> out = autograd::grad({y.pow(2).sum()}, params);
    out.insert(out.begin(), y.detach());
    return out;
  };
  auto a = grads(g), b = grads(back);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(equal(a[i], b[i])) << i;
}

TEST(JitSave, EveryAttributeTypeRoundTrips) {
  jit::Graph g = jit::trace(
      [](const TensorList& in) {
        Tensor a = in[0].mul(0.1).add(3).clamp(-0.5, std::numeric_limits<double>::infinity());
        Tensor b = cat({a, in[0]}, 0).sum({0, 1}, true, kFloat64);  // Tensor[], int[], bool, dtype
        Tensor c = full({2}, 1.0 / 3.0, TensorOptions(kFloat64));   // TensorOptions
        Tensor d = nn::functional::cross_entropy(in[0], zeros({2}, kInt64), Tensor(), -100, "sum",
                                                 0.1);  // str, float
        Tensor e = in[0].index({Slice(), tensor(std::vector<int64_t>{2, 0})});  // Tensor?[]
        return TensorList{b + c, d, in[0].contiguous(MemoryFormat::Contiguous), e};
      },
      {randn({2, 3})});
  TempDir dir("ignis-jit");
  g.save(dir.file("g.ignis"));
  jit::Graph back = jit::load(dir.file("g.ignis"));
  EXPECT_EQ(back.str(), g.str());
  EXPECT_THAT(back.str(), HasSubstr("clamp(%1, min=-0.5, max=inf)"));
  EXPECT_THAT(back.str(), ::testing::ContainsRegex("index\\.Tensor\\(%[0-9]+, \\[None, %[0-9]+\\]\\)"));
  Tensor x = randn({2, 3});
  TensorList r1 = g.run({x}), r2 = back.run({x});
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_TRUE(equal(r1[i], r2[i])) << i;
}

// Graph::to moves a graph (held tensors, values, device arguments such as a factory's options)
// to another device; load(path, device) maps a saved graph there (torch.jit.load's
// map_location). The meta device shows it without data: the moved graph runs there, with the
// CPU's shapes; a meta graph cannot be saved (no data).
TEST(JitSave, ToMovesTheGraphAndLoadMapsItToADevice) {
  manual_seed(3);
  auto m = models::mlp({1, 4, 3}, {5});
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        Tensor c = full({2, 3}, 0.5, TensorOptions(kFloat32));  // a device argument
        return TensorList{m->forward(in[0]) + c};
      },
      {randn({2, 16})});
  jit::Graph meta = g.to(kMeta);
  for (const jit::Value& v : meta.values) EXPECT_TRUE(v.device.is_meta()) << v.name;
  bool saw_options = false;
  for (const jit::Node& n : meta.nodes) {
    for (const jit::Arg& a : n.args) {
      if (a.kind == jit::Arg::Kind::Attribute && a.attr.is<TensorOptions>()) {
        EXPECT_TRUE(a.attr.get<TensorOptions>().device().is_meta()) << n.name();
        saw_options = true;
      }
    }
  }
  EXPECT_TRUE(saw_options) << g.str();
  for (size_t id = 0; id < meta.values.size(); ++id) {
    if (meta.values[id].held()) {
      EXPECT_TRUE(meta.tensors[id].device().is_meta()) << id;
    }
  }
  // A module's graph: its parameters move and stay trainable.
  const jit::Graph module_meta = jit::trace(m, {randn({2, 16})}).to(kMeta);
  ASSERT_FALSE(module_meta.named_parameters().empty());
  for (const auto& [name, t] : module_meta.named_parameters()) {
    EXPECT_TRUE(t.device().is_meta()) << name;
    EXPECT_TRUE(t.requires_grad()) << name << ": parameters stay trainable";
  }
  EXPECT_THAT(meta.str(), HasSubstr("@meta"));
  const Tensor y = meta.run({empty({2, 16}, TensorOptions().device(kMeta))})[0];
  EXPECT_TRUE(y.device().is_meta());
  EXPECT_EQ(y.sizes(), Shape({2, 3}));
  // On its own device: a copy sharing the tensors.
  jit::Graph same = g.to(kCPU);
  for (size_t id = 0; id < g.values.size(); ++id) {
    if (g.values[id].held()) {
      EXPECT_EQ(same.tensors[id].data_ptr(), g.tensors[id].data_ptr());
    }
  }
  // Saving: a meta graph holds no data; a CPU one loads back onto meta, and onto the CPU.
  TempDir dir("ignis-jit");
  EXPECT_THAT(error_of([&] { meta.save(dir.file("meta.ignis")); }),
              HasSubstr("is on the meta device, which holds no data to save"));
  g.save(dir.file("g.ignis"));
  jit::Graph on_meta = jit::load(dir.file("g.ignis"), kMeta);
  EXPECT_EQ(on_meta.str(), meta.str());
  const Tensor x = randn({2, 16});
  NoGradGuard ng;
  EXPECT_TRUE(equal(jit::load(dir.file("g.ignis"), kCPU).run({x})[0], g.run({x})[0]));
}

TEST(JitSave, GraphFileIsSafetensorsWithTheGraphInItsMetadata) {
  TempDir dir("ignis-jit");
  auto m = models::mlp({1, 4, 3}, {5});
  jit::Graph g = jit::trace(m, {randn({2, 16})});
  jit::fuse_ops(g);
  g.save(dir.file("m.ignis"));
  SafetensorsFile f = load_safetensors(dir.file("m.ignis"));
  EXPECT_EQ(f.metadata.at("format"), "ignis.graph");
  EXPECT_EQ(f.metadata.at("ignis.graph.version"), "1");
  EXPECT_THAT(f.metadata.at("ignis.graph"), HasSubstr("\"op\":\"linear_relu\""));
  EXPECT_EQ(f.tensors.size(), 4u);
  EXPECT_TRUE(equal(f.at("1.weight"), m->get("1.weight")));
}

TEST(JitLoad, AFileWrittenBeforeAnOpGainedAnArgumentTakesItsDefault) {
  // linear_pointwise gained add_first=False after graphs with it were saved: a node that leaves
  // out trailing arguments with defaults loads with the defaults; one that leaves out an
  // argument without a default is refused.
  manual_seed(3);
  Tensor w = randn({5, 4}), b = randn({5});
  jit::Graph g = jit::trace(
      [&](const TensorList& in) { return TensorList{gelu(linear(in[0], w, b)) + in[0].sum()}; },
      {randn({8, 4})}, {{"w", w}, {"b", b}});
  EXPECT_EQ(jit::fuse_linear_pointwise(g), 1);
  TempDir dir("ignis-jit");
  const std::string path = dir.file("old.ignis");
  g.save(path);
  SafetensorsFile f = load_safetensors(path);
  const std::string json = f.metadata.at("ignis.graph");
  ASSERT_THAT(json, HasSubstr("\"gelu\",false]"));
  auto save_with = [&](const std::string& j) {
    save_safetensors(path, f.tensors,
                     {{"format", "ignis.graph"}, {"ignis.graph.version", "1"}, {"ignis.graph", j}});
  };
  save_with(replace_once(json, "\"gelu\",false]", "\"gelu\"]"));
  jit::Graph back = jit::load(path);
  EXPECT_EQ(back.str(), g.str());
  Tensor x = randn({8, 4});
  EXPECT_TRUE(allclose(back.run({x})[0], g.run({x})[0], 1e-6, 1e-6));
  // No arguments at all: `input` has no default.
  const std::string head = "\"op\":\"linear_pointwise\",\"args\":[";
  const size_t from = json.find(head) + head.size();
  save_with(json.substr(0, from) + json.substr(json.find(']', from)));
  EXPECT_THAT(error_of([&] { jit::load(path); }),
              HasSubstr("(linear_pointwise) has 0 arguments but its schema takes 6"));
}

TEST(JitLoad, CorruptedAndHostileFilesNameTheFault) {
  Edited e;
  const std::string& j = e.json;
  EXPECT_THAT(e.load_error(replace_once(j, "\"op\":\"linear\"", "\"op\":\"no_such_op\"")),
              HasSubstr("node 2: unknown op 'no_such_op' (not in the registry)"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"op\":\"linear\"", "\"op\":\"nonzero\"")),
              HasSubstr("node 2 (nonzero): its output shape depends on tensor values"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"op\":\"linear\"", "\"op\":\"equal\"")),
              HasSubstr("node 2 (equal): returns a host value"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"op\":\"linear\"", "\"op\":\"relu\"")),
              HasSubstr("node 2 (relu) has 3 arguments but its schema takes 1"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"args\":[\"x0\",1,-1]", "\"args\":[\"x0\",\"1\",-1]")),
              HasSubstr("node 0 (flatten.using_ints) argument 'start_dim' must be an integer"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"args\":[\"x0\",1,-1]",
                                        "\"args\":[\"x0\",1000000000000000000,-1]")),
              HasSubstr("argument 'start_dim': 1000000000000000000 is out of range"));
  // A recorded shape the op does not give.
  EXPECT_THAT(e.load_error(replace_once(j,
                                        "\"name\":\"1\",\"kind\":\"result\",\"dtype\":"
                                        "\"float32\",\"device\":\"cpu\",\"shape\":[2,5]",
                                        "\"name\":\"1\",\"kind\":\"result\",\"dtype\":"
                                        "\"float32\",\"device\":\"cpu\",\"shape\":[2,7]")),
              HasSubstr("node 1 (linear_relu) gives float32[2, 5] but the file records %1 as "
                        "float32[2, 7]"));
  // An input whose shape does not fit the weights: the op's own check, on the meta device.
  EXPECT_THAT(
      e.load_error(replace_once(replace_once(j, "\"shape\":[2,1,4,4]", "\"shape\":[2,1,4,5]"),
                                "\"shape\":[2,16]", "\"shape\":[2,20]")),
      HasSubstr("node 1 (linear_relu): linear"));
  EXPECT_THAT(
      e.load_error(replace_once(j, "\"args\":[\"0\",\"1.weight\"", "\"args\":[\"0\",\"nope\"")),
      HasSubstr("node 1 (linear_relu) argument 'weight' refers to an unknown value 'nope'"));
  EXPECT_THAT(
      e.load_error(replace_once(j, "\"args\":[\"0\",\"1.weight\"", "\"args\":[\"2\",\"1.weight\"")),
      HasSubstr("graph: node 1 (linear_relu) uses %2 before it is defined"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"name\":\"1.bias\"", "\"name\":\"1.weight\"")),
              HasSubstr("(%1.weight): the name is used twice"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"name\":\"1.bias\"", "\"name\":\"1.b\"")),
              HasSubstr("(%1.b): the file holds no tensor of that name"));
  EXPECT_THAT(e.load_error(replace_once(j,
                                        "\"name\":\"1.bias\",\"kind\":\"parameter\","
                                        "\"dtype\":\"float32\",\"device\":\"cpu\","
                                        "\"shape\":[5]",
                                        "\"name\":\"1.bias\",\"kind\":\"parameter\","
                                        "\"dtype\":\"float32\",\"device\":\"cpu\","
                                        "\"shape\":[6]")),
              HasSubstr("(%1.bias): the tensor is float32[5] but the graph declares float32[6]"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"dtype\":\"float32\"", "\"dtype\":\"float16\"")),
              HasSubstr("value 0 (%x0) dtype: unknown dtype 'float16'"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"device\":\"cpu\"", "\"device\":\"cuda:7\"")),
              HasSubstr("device 'cuda:7' is not supported"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"shape\":[2,1,4,4]",
                                        "\"shape\":[4294967296,4294967296,4294967296]")),
              HasSubstr("value 0 (%x0) has too many elements"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"shape\":[2,1,4,4]", "\"shape\":[2,-1,4,4]")),
              HasSubstr("value 0 (%x0) has a negative size -1"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"name\":\"x0\"", "\"name\":\"x\\u001b[2J\"")),
              HasSubstr("value 0 name 'x\\u001b[2J' may hold only printable ASCII"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"kind\":\"input\"", "\"kind\":\"weird\"")),
              HasSubstr("unknown kind 'weird'"));
  EXPECT_THAT(e.load_error(j.substr(0, j.size() / 2)), HasSubstr("invalid JSON"));
  EXPECT_THAT(e.load_error(std::string(100, '[') + std::string(100, ']')),
              HasSubstr("nesting too deep"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"version\":1", "\"version\":2")),
              HasSubstr("graph format version 2 is not supported (this build reads version 1)"));
  EXPECT_THAT(e.load_error(j, {{"ignis.graph.version", "9"}}),
              HasSubstr("graph format version '9' is not supported"));
  EXPECT_THAT(e.load_error(j, {{"format", "pt"}}),
              HasSubstr("not an ignis graph file (format 'pt')"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"outputs\":[\"2\"]", "\"outputs\":[\"x9\"]")),
              HasSubstr("outputs refers to an unknown value 'x9'"));
  EXPECT_THAT(e.load_error(replace_once(j, "\"nodes\":[", "\"nodes\":{\"a\":1},\"x\":[")),
              HasSubstr("nodes must be an array"));
  // A tensor in the file that no value uses.
  e.tensors.emplace_back("stowaway", ones({1}));
  EXPECT_THAT(e.load_error(j), HasSubstr("the file holds a tensor 'stowaway' that no value"));
}

TEST(JitLoad, NotAGraphFileOrTruncated) {
  TempDir dir("ignis-jit");
  save_safetensors(dir.file("plain.safetensors"), {{"w", ones({2})}});
  EXPECT_THAT(error_of([&] { jit::load(dir.file("plain.safetensors")); }),
              HasSubstr("not an ignis graph file (no 'format' in its metadata)"));
  auto m = models::mlp({1, 4, 3}, {5});
  jit::trace(m, {randn({2, 16})}).save(dir.file("m.ignis"));
  std::ifstream in(dir.file("m.ignis"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  {
    std::ofstream out(dir.file("cut.ignis"), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 10));
  }
  EXPECT_THAT(error_of([&] { jit::load(dir.file("cut.ignis")); }), HasSubstr("cut.ignis"));
  EXPECT_THAT(error_of([&] { jit::load(dir.file("absent.ignis")); }), HasSubstr("absent.ignis"));
}

namespace {

// The ignis program next to the tests' directory (build/ignis), or "" when not built.
std::string ignis_program() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  auto p = exe.parent_path().parent_path() / "ignis";
  return std::filesystem::exists(p) ? p.string() : "";
}

std::pair<int, std::string> shell(const std::string& cmd) { return run_command(cmd); }

}  // namespace

TEST(JitCli, IgnisRunEqualsTheModel) {
  const std::string ignis = ignis_program();
  if (ignis.empty()) GTEST_SKIP() << "the ignis program is not built";
  TempDir dir("ignis-jit");
  manual_seed(5);
  auto m = models::lenet({1, 28, 10});
  m->eval();
  Tensor x = randn({3, 1, 28, 28});
  jit::Graph g = jit::trace(m, {x});
  jit::freeze(g);
  g.save(dir.file("lenet.ignis"));
  save_safetensors(dir.file("x.safetensors"), {{"x0", x}});
  auto [rc, out] = shell(ignis + " run " + dir.file("lenet.ignis") + " --input " +
                         dir.file("x.safetensors") + " --output " + dir.file("y.safetensors"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("output0: float32 [3, 10]"));
  SafetensorsFile y = load_safetensors(dir.file("y.safetensors"));
  NoGradGuard ng;
  EXPECT_TRUE(allclose(y.at("output0"), m->forward(x), 1e-4, 1e-5));
  // A wrongly named input, a wrong shape, a missing option, a file that is not a graph.
  save_safetensors(dir.file("bad.safetensors"), {{"a", x}, {"b", x}});
  auto [rc2, out2] = shell(ignis + " run " + dir.file("lenet.ignis") + " --input " +
                           dir.file("bad.safetensors") + " --output " + dir.file("z.safetensors"));
  EXPECT_EQ(rc2, 1);
  EXPECT_THAT(out2, HasSubstr("has no tensor 'x0' for the graph's input %x0 (it holds: a, b)"));
  save_safetensors(dir.file("x5.safetensors"), {{"x0", randn({5, 1, 28, 28})}});
  auto [rc3, out3] = shell(ignis + " run " + dir.file("lenet.ignis") + " --input " +
                           dir.file("x5.safetensors") + " --output " + dir.file("z.safetensors"));
  EXPECT_EQ(rc3, 1);
  EXPECT_THAT(out3, HasSubstr("graph: input %x0 was traced as float32[3, 1, 28, 28] but got "
                              "float32[5, 1, 28, 28]"));
  auto [rc4, out4] = shell(ignis + " run " + dir.file("lenet.ignis") + " --input x");
  EXPECT_EQ(rc4, 2);
  EXPECT_THAT(out4, HasSubstr("--output is required"));
  auto [rc5, out5] = shell(ignis + " run " + dir.file("x.safetensors") + " --input " +
                           dir.file("x.safetensors") + " --output " + dir.file("z.safetensors"));
  EXPECT_EQ(rc5, 1);
  EXPECT_THAT(out5, HasSubstr("not an ignis graph file"));
}

TEST(JitCli, IgnisRunTakesInputsByNameAndWritesEveryOutput) {
  const std::string ignis = ignis_program();
  if (ignis.empty()) GTEST_SKIP() << "the ignis program is not built";
  TempDir dir("ignis-jit");
  Tensor w = randn({3, 4});
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        return TensorList{linear(in[0], w) + in[1], in[1].sum({0})};
      },
      {randn({2, 4}), randn({2, 3})});
  g.save(dir.file("two.ignis"));
  Tensor a = randn({2, 4}), b = randn({2, 3});
  save_safetensors(dir.file("in.safetensors"), {{"x1", b}, {"x0", a}});  // any order
  auto [rc, out] =
      shell(ignis + " run " + dir.file("two.ignis") + " --input " + dir.file("in.safetensors") +
            " --output " + dir.file("out.safetensors") + " --print-graph");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("graph(%x0 : float32[2, 4], %x1 : float32[2, 3]):"));
  EXPECT_THAT(out, HasSubstr("output1: float32 [3]"));
  SafetensorsFile r = load_safetensors(dir.file("out.safetensors"));
  TensorList expected = g.run({a, b});
  EXPECT_TRUE(equal(r.at("output0"), expected[0]));
  EXPECT_TRUE(equal(r.at("output1"), expected[1]));
}

TEST(JitSave, AFailedSaveLeavesThePreviousFile) {
  TempDir dir("ignis-jit");
  auto m = models::mlp({1, 4, 3}, {5});
  m->eval();
  Tensor x = randn({2, 16});
  jit::Graph g = jit::trace(m, {x});
  g.save(dir.file("m.ignis"));
  jit::Graph broken = g;
  broken.outputs[0] = 12345;
  EXPECT_THAT(error_of([&] { broken.save(dir.file("m.ignis")); }),
              HasSubstr("the graph's return refers to value 12345"));
  NoGradGuard ng;
  EXPECT_TRUE(equal(jit::load(dir.file("m.ignis")).run({x})[0], m->forward(x)));
  // Nothing else was left in the directory (no temporary file).
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path)) ++files;
  EXPECT_EQ(files, 1);
}
