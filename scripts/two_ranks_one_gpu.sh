#!/usr/bin/env bash
# Runs one stepgraph command as two data-parallel ranks (torchrun's environment) on this machine's one GPU:
# world size 2's results where no second GPU is lent (issue 16; scripts/gpu.sh dp uses it on one GPU).
#
#   bash scripts/two_ranks_one_gpu.sh build/src/stepgraph train llama/tiny ... --run-dir runs/ws2
#
# NCCL refuses two ranks on one GPU of one host ("Duplicate GPU detected"), so each rank gets its own
# NCCL_HOSTID: NCCL takes them for two hosts and carries their collectives over its socket transport on the
# loopback interface. What this checks is world size 2's arithmetic and control flow (the data slices, the
# reduced gradients, the sharded optimizer, checkpoints, every graph mode, a signal or a failure on one
# rank); a sum of two values is one rounding whichever transport adds them. What it cannot check is speed:
# the two processes share one GPU and the transport is TCP, so `bench -ng 2` scaling still needs two GPUs.
#
# Rank 0 speaks; rank 1 logs only warnings and errors (as under `stepgraph launch`), its lines prefixed
# "[rank 1]". SIGINT, SIGTERM and SIGHUP are passed to both ranks once. Exit status: the lowest failing
# rank's, else 0.
set -uo pipefail
(( $# >= 2 )) || { echo "usage: bash scripts/two_ranks_one_gpu.sh STEPGRAPH SUBCOMMAND [ARGS...]" >&2; exit 2; }
port=${MASTER_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
pids=()
forward() {  # a signal once to every rank still running
  trap '' INT TERM HUP
  kill "-$1" "${pids[@]}" 2>/dev/null
}
trap 'forward INT' INT
trap 'forward TERM' TERM
trap 'forward HUP' HUP
for rank in 0 1; do
  (
    export RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
    # One visible GPU for both ranks: stepgraph then gives each rank device 0 (dist/world_env.cpp).
    export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
    export NCCL_HOSTID=stepgraph-one-gpu-rank$rank NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
    if (( rank == 0 )); then
      exec "$@"
    else
      exec "$@" > >(sed -u 's/^/[rank 1] /') 2> >(sed -u 's/^/[rank 1] /' >&2)
    fi
  ) &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  # A trapped signal interrupts wait while the rank still runs: wait again until it has ended, then take
  # its status (bash keeps it).
  while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
  wait "$pid"
  rc=$?
  (( status == 0 )) && status=$rc
done
exit "$status"
