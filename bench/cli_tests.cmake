# Smoke tests of the `ignis` program, included from tests/CMakeLists.txt (after enable_testing).
# Exit codes: 0 for --help and a workload, 2 for an unknown command / workload / option.
if(NOT TARGET ignis_cli)
  return()
endif()
add_test(NAME cli_help COMMAND ignis_cli --help)
set_tests_properties(cli_help PROPERTIES PASS_REGULAR_EXPRESSION "usage: ignis COMMAND")
# `ignis COMMAND --help` prints that command's usage on stdout and exits with 0.
foreach(cmd bench train eval fetch run)
  add_test(NAME cli_help_${cmd} COMMAND ignis_cli ${cmd} --help)
  set_tests_properties(cli_help_${cmd} PROPERTIES PASS_REGULAR_EXPRESSION "usage: ignis ${cmd}")
endforeach()
# The zoo with torchvision's parameter counts at 1000 classes.
add_test(NAME cli_models COMMAND ignis_cli models)
set_tests_properties(cli_models PROPERTIES PASS_REGULAR_EXPRESSION
                     "model=alexnet params=61100840.*model=resnet18 params=11689512.*model=resnet50 params=25557032.*model=vgg16 params=138357544")
add_test(NAME cli_version COMMAND ignis_cli version)
set_tests_properties(cli_version PROPERTIES PASS_REGULAR_EXPRESSION "ignis [0-9]+\\.[0-9]+")
foreach(bad "frobnicate" "bench;no_such_workload" "bench;op_overhead;--bogus"
            "bench;op_overhead;--threads;x" "bench" "run" "run;m.ignis;--input;x.safetensors")
  string(REPLACE ";" "_" name "cli_usage_error_${bad}")
  # The program's exit status must be exactly 2 (usage error) and the usage printed.
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:ignis_cli> "-DARGS=${bad}"
                   -P ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.cmake)
endforeach()
foreach(w op_overhead seed_jit_mlp)
  add_test(NAME cli_bench_${w} COMMAND ignis_cli bench ${w} --repeat 1 --threads 1)
  set_tests_properties(cli_bench_${w} PROPERTIES PASS_REGULAR_EXPRESSION "workload=${w} ")
endforeach()
# bf16_gemm: every size, both bfloat16 paths and float32 (each checked against float32 first).
add_test(NAME cli_bench_bf16_gemm COMMAND ignis_cli bench bf16_gemm --repeat 1 --threads 1)
set_tests_properties(cli_bench_bf16_gemm PROPERTIES PASS_REGULAR_EXPRESSION
  "workload=bf16_gemm n=256 .*copies_gflops=.*f32_gflops=.*workload=bf16_gemm n=2048 ")
# jit_fusion on 64 rows: eager, the compiled kernel and the interpreter each report.
add_test(NAME cli_bench_jit_fusion COMMAND ignis_cli bench jit_fusion --batch 64 --repeat 1 --threads 1)
set_tests_properties(cli_bench_jit_fusion PROPERTIES PASS_REGULAR_EXPRESSION
  "mode=eager nodes=5 .*mode=compiler nodes=1 .*mode=interpreter nodes=1 ")
# jit_fusion_train on 64 rows: eager, then the fused node's forward and backward both ways.
add_test(NAME cli_bench_jit_fusion_train
         COMMAND ignis_cli bench jit_fusion_train --batch 64 --repeat 1 --threads 1)
set_tests_properties(cli_bench_jit_fusion_train PROPERTIES PASS_REGULAR_EXPRESSION
  "mode=eager ms_per_step=.*mode=compiler ms_per_step=.*mode=interpreter ms_per_step=")
# jit_block on 64 rows: eager (4 nodes), then the frozen graph of 2 fused nodes both ways.
add_test(NAME cli_bench_jit_block COMMAND ignis_cli bench jit_block --batch 64 --repeat 1 --threads 1)
set_tests_properties(cli_bench_jit_block PROPERTIES PASS_REGULAR_EXPRESSION
  "mode=eager nodes=4 .*graph_ops=linear_pointwise,fused_reduction.*mode=compiler nodes=2 .*mode=interpreter nodes=2 ")
# jit_rmsnorm on 64 rows: eager (6 nodes: pow, mean, add, rsqrt, mul, mul), then one
# fused_reduction both ways; jit_rmsnorm_train the same forward and backward.
add_test(NAME cli_bench_jit_rmsnorm COMMAND ignis_cli bench jit_rmsnorm --batch 64 --repeat 1 --threads 1)
set_tests_properties(cli_bench_jit_rmsnorm PROPERTIES PASS_REGULAR_EXPRESSION
  "mode=eager nodes=6 .*mode=compiler nodes=1 .*mode=interpreter nodes=1 ")
add_test(NAME cli_bench_jit_rmsnorm_train
         COMMAND ignis_cli bench jit_rmsnorm_train --batch 64 --repeat 1 --threads 1)
set_tests_properties(cli_bench_jit_rmsnorm_train PROPERTIES PASS_REGULAR_EXPRESSION
  "mode=eager ms_per_step=.*mode=compiler ms_per_step=.*mode=interpreter ms_per_step=")
# jit_attention on 4 heads: eager (3 nodes: mul, masked_fill, softmax), then one fused_reduction
# (the mask a bool input) both ways.
add_test(NAME cli_bench_jit_attention COMMAND ignis_cli bench jit_attention --batch 4 --repeat 1 --threads 1)
set_tests_properties(cli_bench_jit_attention PROPERTIES PASS_REGULAR_EXPRESSION
  "shape=4x128x128 threads=1 mode=eager nodes=3 .*mode=compiler nodes=1 .*mode=interpreter nodes=1 .*mode=materialised nodes=1 ")
# jit_posemb on a batch of 2: eager (3 nodes: add, gelu, mul), one fused_elementwise reading the
# position table in place both ways, then with the table materialised.
add_test(NAME cli_bench_jit_posemb COMMAND ignis_cli bench jit_posemb --batch 2 --repeat 1 --threads 1)
set_tests_properties(cli_bench_jit_posemb PROPERTIES PASS_REGULAR_EXPRESSION
  "shape=2x128x1024 threads=1 mode=eager nodes=3 .*mode=compiler nodes=1 .*mode=interpreter nodes=1 .*mode=materialised nodes=1 ")
# jit_layernorm on 64 rows: eager (9 nodes: mean, sub, pow, mean, add, sqrt, div, mul, add), one
# fused_reduction chaining two statistics both ways, then the two-node form; the same trained.
add_test(NAME cli_bench_jit_layernorm COMMAND ignis_cli bench jit_layernorm --batch 64 --repeat 1 --threads 1)
set_tests_properties(cli_bench_jit_layernorm PROPERTIES PASS_REGULAR_EXPRESSION
  "mode=eager nodes=9 .*mode=compiler nodes=1 .*mode=interpreter nodes=1 .*mode=two_nodes nodes=2 ")
add_test(NAME cli_bench_jit_layernorm_train
         COMMAND ignis_cli bench jit_layernorm_train --batch 64 --repeat 1 --threads 1)
set_tests_properties(cli_bench_jit_layernorm_train PROPERTIES PASS_REGULAR_EXPRESSION
  "mode=eager ms_per_step=.*mode=compiler ms_per_step=.*mode=interpreter ms_per_step=.*mode=two_nodes ms_per_step=")
# mnist_mlp without its data names the missing file and says how to get it.
add_test(NAME cli_bench_mnist_mlp_missing_data
         COMMAND ignis_cli bench mnist_mlp --data ${CMAKE_CURRENT_BINARY_DIR}/no_such_mnist)
set_tests_properties(cli_bench_mnist_mlp_missing_data PROPERTIES
                     PASS_REGULAR_EXPRESSION "no_such_mnist/train-images-idx3-ubyte not found.*ignis fetch mnist")
# --memory-format takes contiguous or channels_last; train_step prints the one it ran.
add_test(NAME cli_bench_memory_format_bad
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:ignis_cli>
                 "-DARGS=bench;train_step;--memory-format;nhwc"
                 -P ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.cmake)
set_tests_properties(cli_bench_memory_format_bad PROPERTIES PASS_REGULAR_EXPRESSION
                     "exit status 2, .*--memory-format expects contiguous or channels_last, got 'nhwc'")
foreach(f contiguous channels_last)
  add_test(NAME cli_bench_train_step_${f}
           COMMAND ignis_cli bench train_step --model lenet --batch 4 --repeat 1 --threads 1
                   --memory-format ${f})
  set_tests_properties(cli_bench_train_step_${f} PROPERTIES PASS_REGULAR_EXPRESSION
                       "workload=train_step model=lenet batch=4 .*memory_format=${f} device=cpu dtype=float32 mode=eager s_per_step=")
endforeach()
# --device and --dtype (train_step, gpu_matmul): bad values are usage errors; without a GPU the
# GPU workloads name the reason.
foreach(bad "--device;gpu" "--device;meta" "--dtype;int8" "--cudnn-api;v8")
  string(REPLACE ";" "_" name "cli_bench_bad_${bad}")
  string(REPLACE "-" "" name "${name}")
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:ignis_cli> "-DARGS=bench;train_step;${bad}"
                   -P ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.cmake)
endforeach()
set_tests_properties(cli_bench_bad_device_gpu PROPERTIES PASS_REGULAR_EXPRESSION
                     "exit status 2, .*--device expects cpu, cuda or cuda:N, got 'gpu'")
set_tests_properties(cli_bench_bad_device_meta PROPERTIES PASS_REGULAR_EXPRESSION
                     "exit status 2, .*--device meta has no data to time")
set_tests_properties(cli_bench_bad_dtype_int8 PROPERTIES PASS_REGULAR_EXPRESSION
                     "exit status 2, .*--dtype expects float32 or bfloat16, got 'int8'")
set_tests_properties(cli_bench_bad_cudnnapi_v8 PROPERTIES PASS_REGULAR_EXPRESSION
                     "exit status 2, .*--cudnn-api expects graph or legacy, got 'v8'")
# --cudnn-api legacy is reported in train_step's line (on the CPU it changes nothing).
add_test(NAME cli_bench_train_step_cudnn_legacy
         COMMAND ignis_cli bench train_step --model lenet --batch 4 --repeat 1 --threads 1
                 --cudnn-api legacy)
set_tests_properties(cli_bench_train_step_cudnn_legacy PROPERTIES PASS_REGULAR_EXPRESSION
                     "workload=train_step model=lenet .*dtype=float32 mode=eager cudnn_api=legacy s_per_step=")
# --compile trains through graph mode (mode=graph); it takes no value.
add_test(NAME cli_bench_train_step_compile
         COMMAND ignis_cli bench train_step --model resnet18 --image-size 32 --classes 10 --batch 4
                 --repeat 1 --threads 1 --compile)
set_tests_properties(cli_bench_train_step_compile PROPERTIES PASS_REGULAR_EXPRESSION
                     "workload=train_step model=resnet18 batch=4 .*mode=graph s_per_step=")
add_test(NAME cli_bench_compile_value
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:ignis_cli> "-DARGS=bench;train_step;--compile=yes"
                 -P ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.cmake)
set_tests_properties(cli_bench_compile_value PROPERTIES PASS_REGULAR_EXPRESSION
                     "exit status 2, .*--compile takes no value")
add_test(NAME cli_bench_gpu_matmul COMMAND ignis_cli bench gpu_matmul --repeat 1)
set_tests_properties(cli_bench_gpu_matmul PROPERTIES PASS_REGULAR_EXPRESSION
                     "gpu_matmul: no GPU is available \\(|workload=gpu_matmul device=cuda:0 dtype=bfloat16 n=8192 ")
# `ignis ops`: the registry, one schema per op; a name shows its overloads; an unknown one is a
# usage error.
add_test(NAME cli_ops COMMAND ignis_cli ops)
set_tests_properties(cli_ops PROPERTIES PASS_REGULAR_EXPRESSION
                     "add\\.Tensor\\(Tensor self, Tensor other, \\*, Scalar alpha=1\\) -> Tensor\n    kind=kernel differentiable=yes devices=cpu,meta.*[0-9]+ ops")
add_test(NAME cli_ops_name COMMAND ignis_cli ops max)
set_tests_properties(cli_ops_name PROPERTIES PASS_REGULAR_EXPRESSION
                     "max\\.dim\\(Tensor self, int dim, bool keepdim=False\\) -> \\(Tensor values, Tensor indices\\)")
add_test(NAME cli_ops_unknown
         COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:ignis_cli> "-DARGS=ops;no_such_op"
                 -P ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.cmake)
set_tests_properties(cli_ops_unknown PROPERTIES PASS_REGULAR_EXPRESSION
                     "exit status 2, .*no op named 'no_such_op' is registered")
# --profile: the profiler's table and a trace file.
add_test(NAME cli_bench_profile
         COMMAND ignis_cli bench op_overhead --repeat 1 --threads 1
                 --profile ${CMAKE_CURRENT_BINARY_DIR}/bench_profile.json)
set_tests_properties(cli_bench_profile PROPERTIES PASS_REGULAR_EXPRESSION
                     "Self CPU %.*add\\.Tensor.*wrote the trace to .*bench_profile.json")
# checkpoint on a small ResNet: plain, reentrant and non-reentrant each report; a model with no
# blocks to checkpoint is an error naming it.
add_test(NAME cli_bench_checkpoint
         COMMAND ignis_cli bench checkpoint --model resnet18 --batch 2 --image-size 32 --classes 10
                 --repeat 1 --threads 1)
set_tests_properties(cli_bench_checkpoint PROPERTIES PASS_REGULAR_EXPRESSION
  "mode=plain held_after_forward_mib=.*mode=reentrant held_after_forward_mib=.*mode=non_reentrant held_after_forward_mib=")
add_test(NAME cli_bench_checkpoint_bad_model
         COMMAND ignis_cli bench checkpoint --model lenet --repeat 1 --threads 1)
set_tests_properties(cli_bench_checkpoint_bad_model PROPERTIES PASS_REGULAR_EXPRESSION
  "bench checkpoint: --model expects a ResNet or a VGG of the zoo, got Sequential")
# jit_inference in bfloat16 (a CIFAR-sized ResNet-18): the frozen graph checked against eager, then
# both timed; each line names the dtype.
add_test(NAME cli_bench_jit_inference_bfloat16
         COMMAND ignis_cli bench jit_inference --model resnet18 --image-size 32 --classes 10
                 --dtype bfloat16 --repeat 1 --threads 1)
set_tests_properties(cli_bench_jit_inference_bfloat16 PROPERTIES PASS_REGULAR_EXPRESSION
                     "dtype=bfloat16 threads=1 mode=eager .*dtype=bfloat16 threads=1 mode=graph nodes=")
