// PyTorch interop through safetensors, both directions, with Debian's python3-torch:
// - ignis saves a model's state_dict (and tensors of every dtype); a Python script loads it into
//   torch (with the `safetensors` package when installed, and always by hand with struct + json +
//   torch.frombuffer), checks the values and that torch's own modules give ignis's outputs;
// - a Python script writes a safetensors file byte by byte from torch tensors; ignis loads it,
//   checks the values and that its own Linear gives torch's outputs.
// Skipped (with a message) when python3 or torch is missing; $IGNIS_PYTHON picks the interpreter.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

#include "training_test_util.h"

using namespace ignis;
using ignis::testing_util::expect_values;
using ignis::testing_util::tmp_path;
using ignis::testing_util::to_vec;
using ignis::testing_util::write_file;
using ::testing::HasSubstr;

namespace {

// The interpreter: $IGNIS_PYTHON (e.g. a virtual environment's), else Debian's python3.
const std::string kPython = [] {
  const char* env = std::getenv("IGNIS_PYTHON");
  return std::string(env != nullptr && *env != '\0' ? env : "/usr/bin/python3");
}();

// Runs a shell command; returns its exit status and its combined output.
std::pair<int, std::string> run(const std::string& cmd) { return run_command(cmd); }

// Whether Python can find `module`, without importing it (importing torch takes seconds).
bool python_has(const std::string& module) {
  return run(kPython + " -c 'import importlib.util, sys; sys.exit(importlib.util." +
             "find_spec(\"" + module + "\") is None)'")
             .first == 0;
}

// Why the interop tests cannot run here, or "" when they can.
std::string missing_python_torch() {
  if (std::system(("test -x " + kPython).c_str()) != 0) return kPython + " not found";
  if (!python_has("torch")) return kPython + " has no torch module (python3-torch)";
  return "";
}

// Reads a safetensors file into a dict of torch tensors: with the safetensors package
// (mode "package") or by hand (mode "hand"), then checks what ignis wrote.
const char* kLoadScript = R"PY(
import json, struct, sys
import torch

path, mode = sys.argv[1], sys.argv[2]
if mode == "package":
    from safetensors.torch import load_file
    tensors = load_file(path)
else:
    DTYPES = {"F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16,
              "F16": torch.float16, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
              "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    assert meta.get("format") == "ignis-interop", meta
    start = 8 + n
    tensors = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dt = DTYPES[e["dtype"]]
        if end == b:
            t = torch.empty(e["shape"], dtype=dt)
        else:
            t = torch.frombuffer(bytearray(raw[start + b:start + end]), dtype=dt)
            t = t.reshape(e["shape"])
        tensors[name] = t

def check(cond, what):
    if not cond:
        print("MISMATCH", what)
        sys.exit(1)

# The model: ignis's state_dict loads strictly into the same torch architecture, and torch's
# forward gives ignis's output.
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
model.load_state_dict(state, strict=True)
with torch.no_grad():
    y = model(tensors["x"])
check(torch.allclose(y, tensors["y"], rtol=1e-5, atol=1e-6), ("forward", y, tensors["y"]))
# The comparison can fail: ignis's output plus 1e-3 is refused.
check(not torch.allclose(y, tensors["y_wrong"], rtol=1e-5, atol=1e-6), "y_wrong accepted")
ln = torch.nn.LayerNorm(3)
ln.load_state_dict({"weight": tensors["ln.weight"], "bias": tensors["ln.bias"]})
with torch.no_grad():
    check(torch.allclose(ln(tensors["ln.x"]), tensors["ln.y"], rtol=1e-5, atol=1e-6), "layer_norm")

# Every dtype, exactly.
check(tensors["f64"].dtype == torch.float64 and
      tensors["f64"].tolist() == [1 / 3, -2.5e-300, 1e300], ("f64", tensors["f64"]))
check(tensors["f32"].dtype == torch.float32 and tensors["f32"].tolist() == [1.5, -0.0, 3.25],
      ("f32", tensors["f32"]))
check(tensors["i64"].dtype == torch.int64 and tensors["i64"].tolist() == [-3, 0, 2 ** 40],
      ("i64", tensors["i64"]))
check(tensors["i32"].dtype == torch.int32 and tensors["i32"].tolist() == [-2 ** 31, 5],
      ("i32", tensors["i32"]))
check(tensors["u8"].dtype == torch.uint8 and tensors["u8"].tolist() == [0, 255, 7], "u8")
check(tensors["bool"].dtype == torch.bool and tensors["bool"].tolist() == [True, False, True],
      "bool")
check(tensors["bf16"].dtype == torch.bfloat16 and
      tensors["bf16"].float().tolist() == [0.5, -8.0, 3.140625], ("bf16", tensors["bf16"]))
check(tensors["transposed"].tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]], "transposed")
check(tensors["scalar"].shape == () and tensors["scalar"].item() == 2.5, "scalar")
check(tuple(tensors["empty"].shape) == (0, 3), "empty")
print("OK", len(tensors), "tensors")
)PY";

// Builds a safetensors file byte by byte from torch tensors (header padded with spaces to a
// multiple of 8, as the reference implementation writes it).
const char* kSaveScript = R"PY(
import json, struct, sys
import torch

torch.manual_seed(0)
lin = torch.nn.Linear(5, 4)
x = torch.randn(3, 5)
with torch.no_grad():
    y = lin(x)
tensors = {
    "weight": lin.weight.detach(), "bias": lin.bias.detach(), "x": x, "y": y,
    "f64": torch.tensor([1 / 3, -2.5e-300, 1e300], dtype=torch.float64),
    "i64": torch.tensor([-3, 0, 2 ** 40]),
    "i32": torch.tensor([-2 ** 31, 5], dtype=torch.int32),
    "u8": torch.tensor([0, 255, 7], dtype=torch.uint8),
    "bool": torch.tensor([True, False, True]),
    "bf16": torch.tensor([0.5, -8.0, 3.140625]).to(torch.bfloat16),
    "transposed": torch.arange(6.0).reshape(2, 3).t(),
    "scalar": torch.tensor(2.5),
    "empty": torch.zeros(0, 3),
}
NAMES = {torch.float32: "F32", torch.float64: "F64", torch.bfloat16: "BF16",
         torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}
header = {"__metadata__": {"format": "pt", "source": "torch " + torch.__version__}}
blobs, offset = [], 0
for name, t in tensors.items():
    flat = t.contiguous().reshape(-1)
    data = bytes(flat.view(torch.uint8).tolist()) if flat.numel() else b""
    header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                    "data_offsets": [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
h = json.dumps(header).encode("utf-8")
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
print("WROTE", len(tensors), "tensors with torch", torch.__version__)
)PY";

}  // namespace

TEST(TorchInterop, TorchLoadsWhatIgnisSaves) {
  const std::string why = missing_python_torch();
  if (!why.empty()) GTEST_SKIP() << "PyTorch interop skipped: " << why;
  manual_seed(7);
  auto model = std::make_shared<nn::Sequential>(nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 2));
  Tensor x = randn({5, 4});
  Tensor y = model->forward(x).detach();
  nn::LayerNorm ln({3});
  {
    NoGradGuard ng;
    ln.weight.copy_(tensor({0.5, 2.0, -1.0}));
    ln.bias.copy_(tensor({0.1, 0.0, -0.3}));
  }
  Tensor lx = randn({2, 3});
  NamedTensorList all;
  for (auto& [n, t] : model->state_dict()) all.emplace_back("model." + n, t);
  all.insert(all.end(), {{"x", x},
                         {"y", y},
                         {"y_wrong", y + 1e-3},
                         {"ln.weight", ln.weight.detach()},
                         {"ln.bias", ln.bias.detach()},
                         {"ln.x", lx},
                         {"ln.y", ln(lx).detach()},
                         {"f64", tensor({1.0 / 3.0, -2.5e-300, 1e300}, kFloat64)},
                         {"f32", tensor({1.5, -0.0, 3.25})},
                         {"i64", tensor(std::vector<int64_t>{-3, 0, int64_t{1} << 40})},
                         {"i32", tensor(std::vector<int64_t>{-2147483648LL, 5}).to(kInt32)},
                         {"u8", tensor({0, 255, 7}).to(kUInt8)},
                         {"bool", tensor(std::vector<bool>{true, false, true})},
                         {"bf16", tensor({0.5, -8.0, 3.140625}).to(kBFloat16)},
                         {"transposed", tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}).t()},
                         {"scalar", scalar_tensor(2.5)},
                         {"empty", zeros({0, 3})}});
  const std::string path = tmp_path("to_torch.safetensors");
  const std::string script = tmp_path("load.py");
  save_safetensors(path, all, {{"format", "ignis-interop"}});
  write_file(script, kLoadScript);
  auto [rc, out] = run(kPython + " " + script + " " + path + " hand");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("OK 21 tensors"));
  if (python_has("safetensors")) {
    auto [rc2, out2] = run(kPython + " " + script + " " + path + " package");
    EXPECT_EQ(rc2, 0) << out2;
    EXPECT_THAT(out2, HasSubstr("OK 21 tensors"));
  } else {
    std::cout << "note: the Python safetensors package is not installed; torch read the file "
                 "through the hand-written parser only\n";
  }
  std::remove(path.c_str());
  std::remove(script.c_str());
}

TEST(TorchInterop, IgnisLoadsWhatTorchWritesByteByByte) {
  const std::string why = missing_python_torch();
  if (!why.empty()) GTEST_SKIP() << "PyTorch interop skipped: " << why;
  const std::string path = tmp_path("from_torch.safetensors");
  const std::string script = tmp_path("save.py");
  write_file(script, kSaveScript);
  auto [rc, out] = run(kPython + " " + script + " " + path);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_THAT(out, HasSubstr("WROTE 13 tensors"));
  SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 13u);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  // The module: torch's Linear weights in ignis's Linear give torch's output.
  nn::Linear lin(5, 4);
  lin.load_state_dict({{"weight", f.at("weight")}, {"bias", f.at("bias")}});
  Tensor y = lin(f.at("x"));
  EXPECT_EQ(y.sizes().shape(), Shape({3, 4}));
  expect_values(y, to_vec(f.at("y")), 1e-6, 1e-5, "linear forward");
  // Every dtype, exactly.
  EXPECT_EQ(f.at("f64").dtype(), kFloat64);
  EXPECT_EQ(to_vec(f.at("f64")), (std::vector<double>{1.0 / 3.0, -2.5e-300, 1e300}));
  EXPECT_EQ(f.at("i64").dtype(), kInt64);
  EXPECT_EQ(f.at("i64")[2].item<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(f.at("i64")[0].item<int64_t>(), -3);
  EXPECT_EQ(f.at("i32").dtype(), kInt32);
  EXPECT_EQ(f.at("i32")[0].item<int64_t>(), -2147483648LL);
  EXPECT_EQ(f.at("u8").dtype(), kUInt8);
  EXPECT_EQ(f.at("u8")[1].item<int64_t>(), 255);
  EXPECT_EQ(f.at("bool").dtype(), kBool);
  EXPECT_TRUE(f.at("bool")[0].item<bool>());
  EXPECT_FALSE(f.at("bool")[1].item<bool>());
  EXPECT_EQ(f.at("bf16").dtype(), kBFloat16);
  EXPECT_EQ(to_vec(f.at("bf16")), (std::vector<double>{0.5, -8.0, 3.140625}));
  EXPECT_EQ(f.at("transposed").sizes().shape(), Shape({3, 2}));
  EXPECT_EQ(to_vec(f.at("transposed")), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(f.at("scalar").dim(), 0);
  EXPECT_EQ(f.at("scalar").item<double>(), 2.5);
  EXPECT_EQ(f.at("empty").sizes().shape(), Shape({0, 3}));
  std::remove(path.c_str());
  std::remove(script.c_str());
}
