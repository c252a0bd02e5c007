// `ignis bench WORKLOAD [--threads T] [--repeat R]`: option parsing and the table of workloads.
#include "cli/bench.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>

#include "cli/cli.h"
#include "ignis/cuda.h"
#include "ignis/ops.h"
#include "ignis/profiler.h"

namespace ignis::cli {
namespace {

constexpr Workload kWorkloads[] = {
    {"op_overhead", "per-op cost of add on 1 and 64 floats, with and without autograd recording",
     &bench_op_overhead},
    {"sgemm", "square float32 matmul, n = 256..2048: GFLOP/s of ignis::matmul vs raw dnnl_sgemm",
     &bench_sgemm},
    {"bf16_gemm",
     "square bfloat16 matmul, n = 256..2048: GFLOP/s native (oneDNN's bfloat16 matmul), on "
     "float32 copies, and float32's",
     &bench_bf16_gemm},
    {"seed_jit_mlp", "inference of a 512-256-128-2 ReLU MLP on one sample (us per forward)",
     &bench_seed_jit_mlp},
    {"mnist_mlp", "one training epoch of the demo MLP on MNIST (s per epoch, test accuracy)",
     &bench_mnist_mlp},
    {"batch_norm",
     "float32 batch_norm (training) on 64x64x32x32, NCHW and channels-last: forward, forward + "
     "backward, relu(bn(x) + r) as three ops and fused",
     &bench_batch_norm},
    {"mnist_lenet", "one epoch of LeNet-5 on MNIST (SGD, batch 64): s/epoch, test accuracy",
     &bench_mnist_lenet},
    {"train_step", "SGD steps of a zoo model on synthetic data (--model, --batch, ...)",
     &bench_train_step},
    {"checkpoint",
     "SGD steps of a zoo ResNet/VGG at 224: plain, checkpointed (reentrant, non-reentrant)",
     &bench_checkpoint},
    {"jit_inference", "a zoo model's inference eager and as a frozen graph (--model, --batch)",
     &bench_jit_inference},
    {"jit_fusion", "gelu(x * a + b) * g + r on [4096, 1024]: eager, fused (compiled, interpreted)",
     &bench_jit_fusion},
    {"jit_fusion_train",
     "the jit_fusion block's forward + backward: eager, fused (one kernel, backward programs)",
     &bench_jit_fusion_train},
    {"jit_dropout_train",
     "dropout(relu(x + b), 0.1) forward + backward: eager, fused (the mask drawn in the kernel)",
     &bench_jit_dropout_train},
    {"jit_norm_train",
     "layer_norm(dropout(gelu(x * a + b)) + r) forward + backward: eager, one fused_reduction",
     &bench_jit_norm_train},
    {"jit_block", "layer_norm(gelu(linear(x))) + x on [4096, 1024]: eager, frozen graph",
     &bench_jit_block},
    {"jit_attention",
     "softmax(masked_fill(s * c, causal, -inf)) on [96, 128, 128]: eager, one fused_reduction",
     &bench_jit_attention},
    {"jit_posemb",
     "gelu(x + pos) * g, pos [128, 1024] against x [32, 128, 1024]: eager, one fused_elementwise",
     &bench_jit_posemb},
    {"jit_rmsnorm",
     "x * rsqrt(mean(x ** 2, -1) + eps) * w on [4096, 1024]: eager, one fused_reduction (mean)",
     &bench_jit_rmsnorm},
    {"jit_rmsnorm_train", "the jit_rmsnorm block's forward + backward: eager, one fused_reduction",
     &bench_jit_rmsnorm_train},
    {"jit_layernorm",
     "a hand-written layer norm on [4096, 1024]: eager, one fused_reduction (mean, then variance)",
     &bench_jit_layernorm},
    {"jit_layernorm_train",
     "the jit_layernorm block's forward + backward: eager, the chain, two nodes",
     &bench_jit_layernorm_train},
    {"allreduce", "all-reduce of 4 KB..256 MB under mpirun: MPI's vs ignis's ring (algbw, busbw)",
     &bench_allreduce},
    {"ddp_mnist_mlp",
     "one epoch of the demo MLP with DistributedDataParallel under mpirun -np N "
     "(global batch 128): overlap on/off, bucket_cap_mb sweep",
     &bench_ddp_mnist_mlp},
    {"gcn", "a 2-layer GCN training epoch, power-law graph of 100k nodes, 1M edges, 128 features",
     &bench_gcn},
    {"gin", "a GIN training epoch on 10000 MNIST digits as graphs (batch 64), test accuracy",
     &bench_gin},
    {"gpu_matmul", "square matmul on the GPU, n = 1024..8192, float32 and bfloat16: TFLOP/s",
     &bench_gpu_matmul},
};

std::string bench_usage() {
  std::string s =
      "usage: ignis bench WORKLOAD [--threads T] [--repeat R] [--data DIR]\n\n"
      "Prints one line per measurement: workload=NAME key=value ...\n\nworkloads:\n";
  for (const Workload& w : kWorkloads) {
    std::string name = w.name;
    s += "  " + name + std::string(name.size() < 14 ? 14 - name.size() : 1, ' ') + w.summary + "\n";
  }
  s += "  all           every workload above but the training ones (mnist_*, train_step,\n"
       "                checkpoint, gcn, gin), jit_inference, gpu_matmul and the distributed\n"
       "                ones (allreduce,\n"
       "                ddp_mnist_mlp: run them under mpirun -np N)\n\n"
       "options:\n"
       "  --threads T   intra-op threads (ignis::set_num_threads); default: the OpenMP default\n"
       "  --repeat R    timed batches per measurement, the median is reported (default 7)\n"
       "  --data DIR    mnist_mlp, mnist_lenet, ddp_mnist_mlp, gin: the MNIST IDX files\n"
       "                (default data/mnist)\n"
       "  --model NAME  train_step: the zoo model (default resnet18); jit_inference,\n"
       "                checkpoint: (resnet50)\n"
       "  --batch B     train_step: the batch size (default 32); jit_inference: (1);\n"
       "                checkpoint: (4); jit_fusion,\n"
       "                jit_fusion_train, jit_dropout_train, jit_norm_train, jit_block,\n"
       "                jit_rmsnorm, jit_rmsnorm_train: the rows (4096); jit_attention: the\n"
       "                heads (96); jit_posemb: the batch (32)\n"
       "  --image-size S, --classes C   train_step: the input size and classes (default: the\n"
       "                model's natural ones, e.g. 224 and 1000 for resnet18; `ignis models`)\n"
       "  --max-bytes B allreduce: the largest buffer (default 268435456)\n"
       "  --ranks N     ddp_mnist_mlp: run under `mpirun -np N` (launched by itself)\n"
       "  --memory-format contiguous|channels_last   mnist_lenet, train_step, checkpoint:\n"
       "                the layout of the input batches (default channels_last: the convolutions "
       "run\n"
       "                without layout reorders)\n"
       "  --device D    train_step, mnist_mlp, jit_block: cpu (default), cuda or cuda:N (the\n"
       "                step, epoch or forward then ends with cuda::synchronize, so that it is\n"
       "                timed whole)\n"
       "  --dtype T     train_step, jit_inference: the parameters' and inputs' dtype, float32\n"
       "                (default) or bfloat16\n"
       "  --compile     train_step: the model trains through graph mode (jit::compile; the\n"
       "                warm-up steps trace it and record its memory plan)\n"
       "  --cudnn-benchmark   on a GPU, convolutions time cuDNN's algorithms once per shape\n"
       "                and keep the fastest (torch.backends.cudnn.benchmark); default: cuDNN's\n"
       "                heuristic choice\n"
       "  --cudnn-api graph|legacy   on a GPU, the cuDNN API convolutions go through: graph\n"
       "                (default; the legacy API where it has no plan) or legacy only\n"
       "  --profile PATH  record the run with the profiler: print its table and write a\n"
       "                Chrome trace to PATH (the timings then include the profiler's cost)\n";
  return s;
}

}  // namespace

const char* memory_format_name(MemoryFormat f) {
  return f == MemoryFormat::ChannelsLast ? "channels_last" : "contiguous";
}

Tensor uniform_tensor(IntArrayRef shape, float bound, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> dist(-bound, bound);
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  std::vector<float> values(n);
  for (float& v : values) v = dist(engine);
  return tensor(values, kFloat32).reshape(shape);
}

Tensor synthetic_images(const models::ModelConfig& cfg, int64_t batch) {
  return uniform_tensor({batch, cfg.in_channels, cfg.image_size, cfg.image_size}, 1.0f, 7);
}

Tensor synthetic_labels(const models::ModelConfig& cfg, int64_t batch) {
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = (i * 7919) % cfg.num_classes;
  return tensor(labels);
}

int bench_main(const Args& args) {
  const std::string usage = bench_usage();
  std::string workload;
  BenchOptions opts;
  int threads = 0;  // 0: leave the OpenMP default
  std::string profile_path;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    }
    if (a.rfind("--", 0) == 0) {
      std::string key = a, value;
      if (const size_t eq = a.find('='); eq != std::string::npos) {
        key = a.substr(0, eq);
        value = a.substr(eq + 1);
      } else if (key == "--threads" || key == "--repeat" || key == "--data" || key == "--model" ||
                 key == "--batch" || key == "--image-size" || key == "--classes" ||
                 key == "--memory-format" || key == "--profile" || key == "--max-bytes" ||
                 key == "--ranks" || key == "--device" || key == "--dtype" ||
                 key == "--cudnn-api") {
        if (i + 1 >= args.size()) throw UsageError(key + " expects a value", usage);
        value = args[++i];
      }
      if (key == "--threads") {
        threads = static_cast<int>(parse_int(key, value, 1, 4096, usage));
      } else if (key == "--repeat") {
        opts.repeat = static_cast<int>(parse_int(key, value, 1, 1000, usage));
      } else if (key == "--data") {
        if (value.empty()) throw UsageError("--data expects a directory", usage);
        opts.data = value;
      } else if (key == "--model") {
        opts.model = value;
      } else if (key == "--batch") {
        opts.batch = parse_int(key, value, 1, 1 << 16, usage);
      } else if (key == "--image-size") {
        opts.image_size = parse_int(key, value, 1, 4096, usage);
      } else if (key == "--classes") {
        opts.classes = parse_int(key, value, 1, 1 << 20, usage);
      } else if (key == "--profile") {
        if (value.empty()) throw UsageError("--profile expects a file path", usage);
        profile_path = value;
      } else if (key == "--ranks") {
        opts.ranks = static_cast<int>(parse_int(key, value, 1, 1024, usage));
      } else if (key == "--max-bytes") {
        opts.max_bytes = parse_int(key, value, 4096, int64_t{1} << 31, usage);
      } else if (key == "--device") {
        opts.device = parse_device(value, "has no data to time", usage);
      } else if (key == "--dtype") {
        if (value == "float32") {
          opts.dtype = kFloat32;
        } else if (value == "bfloat16") {
          opts.dtype = kBFloat16;
        } else {
          throw UsageError("--dtype expects float32 or bfloat16, got '" + value + "'", usage);
        }
      } else if (key == "--cudnn-benchmark") {
        if (!value.empty()) throw UsageError("--cudnn-benchmark takes no value", usage);
        opts.cudnn_benchmark = true;
      } else if (key == "--compile") {
        if (!value.empty()) throw UsageError("--compile takes no value", usage);
        opts.compile = true;
      } else if (key == "--cudnn-api") {
        if (value != "graph" && value != "legacy") {
          throw UsageError("--cudnn-api expects graph or legacy, got '" + value + "'", usage);
        }
        opts.cudnn_legacy = value == "legacy";
      } else if (key == "--memory-format") {
        if (value == "channels_last") {
          opts.memory_format = MemoryFormat::ChannelsLast;
        } else if (value == "contiguous") {
          opts.memory_format = MemoryFormat::Contiguous;
        } else {
          throw UsageError(
              "--memory-format expects contiguous or channels_last, got '" + value + "'", usage);
        }
      } else {
        throw UsageError("unknown option '" + a + "'", usage);
      }
      continue;
    }
    if (!workload.empty()) throw UsageError("unexpected argument '" + a + "'", usage);
    workload = a;
  }
  if (workload.empty()) throw UsageError("missing WORKLOAD", usage);

  std::vector<const Workload*> selected;
  for (const Workload& w : kWorkloads) {
    // The training workloads take seconds to minutes and need data: run only when named.
    const std::string n = w.name;
    const bool heavy = n == "mnist_mlp" || n == "mnist_lenet" || n == "train_step" ||
                       n == "checkpoint" || n == "allreduce" || n == "ddp_mnist_mlp" ||
                       n == "jit_inference" || n == "gcn" || n == "gin" || n == "gpu_matmul";
    if (workload == w.name || (workload == "all" && !heavy)) selected.push_back(&w);
  }
  if (selected.empty()) throw UsageError("unknown workload '" + workload + "'", usage);

  if (threads > 0) set_num_threads(threads);
  cuda::set_cudnn_benchmark(opts.cudnn_benchmark);
  if (opts.cudnn_legacy) cuda::set_cudnn_graph_api(false);
  // --profile: the whole run recorded (its timings then include the profiler's cost).
  std::unique_ptr<profiler::Profile> prof;
  if (!profile_path.empty()) prof = std::make_unique<profiler::Profile>();
  for (const Workload* w : selected) w->run(opts);
  if (prof) {
    prof->stop();
    std::cout << prof->table(25);
    prof->export_chrome_trace(profile_path);
    std::cout << "wrote the trace to " << profile_path << "\n";
  }
  return 0;
}

}  // namespace ignis::cli
