#!/bin/sh
# Two MPI ranks on one machine talking over a real network path: two network namespaces joined by
# a veth pair, MPI over TCP only (btl tcp,self; no shared memory), the link limited by `tc` to
# 1 Gbit/s and then 10 Gbit/s. Runs `ignis bench allreduce` and `ignis bench ddp_mnist_mlp` over
# each link, so that the scaling model of docs/distributed.md (bench/ddp_scaling_model.py) can be
# checked against measured times. Needs root (ip netns, tc) and OpenMPI.
#
#   sudo bench/netns_ddp.sh [build/ignis] [data/mnist] [rates]     rates default "1gbit 10gbit"
#
# (MAX_BYTES=N sets the largest all-reduce, default 16 MiB.) Compare with the model:
#   bench/ddp_scaling_model.py --check --gbits 1 --alpha A --compute C --backward B --buckets ...
#
# How: mpirun runs in namespace ns0 (address 10.210.0.1) with a hostfile of the two addresses;
# the second "node" (10.210.0.2) is started through an rsh agent that, instead of ssh, runs the
# command in namespace ns1 (with its own hostname, so that OpenMPI counts two nodes). The
# orted there connects back over the veth, and so do the ranks' TCP BTL connections
# (btl_tcp_if_include / oob_tcp_if_include 10.210.0.0/24). tbf on each veth end shapes each
# direction to the rate. Everything is removed at exit.
set -eu
IGNIS=$(realpath "${1:-build/ignis}")
DATA=$(realpath "${2:-data/mnist}")
RATES=${3:-"1gbit 10gbit"}
MAX_BYTES=${MAX_BYTES:-16777216}  # the largest all_reduce of `ignis bench allreduce`
NS0=ignis_ns0
NS1=ignis_ns1
NET=10.210.0
WORK=$(mktemp -d /tmp/ignis-netns.XXXXXX)

cleanup() {
  ip netns del "$NS0" 2>/dev/null || true
  ip netns del "$NS1" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
cleanup_quiet() { ip netns del "$NS0" 2>/dev/null || true; ip netns del "$NS1" 2>/dev/null || true; }
cleanup_quiet

ip netns add "$NS0"
ip netns add "$NS1"
ip link add veth_ig0 type veth peer name veth_ig1
ip link set veth_ig0 netns "$NS0"
ip link set veth_ig1 netns "$NS1"
ip -n "$NS0" addr add "$NET.1/24" dev veth_ig0
ip -n "$NS1" addr add "$NET.2/24" dev veth_ig1
for ns in "$NS0" "$NS1"; do
  ip -n "$ns" link set lo up
done
ip -n "$NS0" link set veth_ig0 up
ip -n "$NS1" link set veth_ig1 up

# The rsh agent: "agent HOST COMMAND..." runs COMMAND (a shell command line, as ssh would) in ns1.
cat > "$WORK/agent" <<AGENT
#!/bin/sh
shift
exec ip netns exec $NS1 unshare --uts sh -c "hostname ignis-node1; \$*"
AGENT
chmod +x "$WORK/agent"
printf '%s slots=1\n%s slots=1\n' "$NET.1" "$NET.2" > "$WORK/hosts"

run_mpi() {  # run_mpi ARGS...: 2 ranks, one per namespace, MPI over TCP on the veth only
  ip netns exec "$NS0" unshare --uts sh -c 'hostname ignis-node0; exec "$@"' sh \
    mpirun --allow-run-as-root -np 2 --hostfile "$WORK/hosts" --map-by node \
    --mca plm_rsh_agent "$WORK/agent" --mca btl tcp,self \
    --mca btl_tcp_if_include "$NET.0/24" --mca oob_tcp_if_include "$NET.0/24" \
    -x OMP_NUM_THREADS=1 -x IGNIS_ALLREDUCE "$@"
}

for rate in $RATES; do
  # tbf's bucket must hold a timer tick's worth of bytes at the rate, or it caps the rate lower.
  case $rate in
    *gbit) burst=$(( ${rate%gbit} * 1 + 1 ))mb ;;
    *) burst=1mb ;;
  esac
  for dev in veth_ig0:"$NS0" veth_ig1:"$NS1"; do
    d=${dev%%:*}
    n=${dev#*:}
    tc -n "$n" qdisc replace dev "$d" root tbf rate "$rate" burst "$burst" latency 50ms
  done
  echo "# link $rate (tbf on each direction)"
  IGNIS_ALLREDUCE=native run_mpi "$IGNIS" bench allreduce --max-bytes "$MAX_BYTES" --repeat 3
  # DDP's buckets use the ring (its default).
  IGNIS_ALLREDUCE=ring run_mpi "$IGNIS" bench ddp_mnist_mlp --threads 1 --data "$DATA"
done
