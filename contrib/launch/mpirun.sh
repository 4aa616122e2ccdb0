#!/usr/bin/env bash
# trainkit on several hosts with Open MPI's mpirun: one process per GPU. train-step reads its
# rank from OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK, and the ranks meet through --rendezvous (tcp
# on the first host by default, or a file on a shared file system).
#
#   contrib/launch/mpirun.sh HOSTFILE [TRAIN-STEP ARG...]
#
# HOSTFILE is an Open MPI hostfile, one host a line, "node1 slots=8" (slots = its GPUs); the
# first host runs rank 0. Edit the lines marked EDIT or set the TK_* variables. The trainkit
# build and the data must be at the same path on every host.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: mpirun.sh HOSTFILE [TRAIN-STEP ARG...]" >&2; exit 2; }
hostfile=$1
shift
[ -r "$hostfile" ] || { echo "mpirun.sh: error: $hostfile: cannot read" >&2; exit 4; }

here=$(cd "$(dirname "$0")" && pwd)
TK_ROOT=${TK_ROOT:-$(cd "$here/../.." && pwd)}                    # EDIT: the trainkit checkout
TK_BIN=${TK_BIN:-$TK_ROOT/build/bin}
CONFIG=${TK_CONFIG:-$TK_ROOT/share/workloads/dlrm/config.json}   # EDIT: the configuration
DATA=${TK_DATA:-/shared/criteo}                                   # EDIT: train/ and eval/ shards
GPUS_PER_NODE=${GPUS_PER_NODE:-8}                                 # EDIT: GPUs on each host

# One rank per slot: the slots of the hostfile (GPUS_PER_NODE for a host without slots=).
hosts=$(awk 'NF && $1 !~ /^#/' "$hostfile")
[ -n "$hosts" ] || { echo "mpirun.sh: error: $hostfile: no hosts" >&2; exit 3; }
np=$(awk -v d="$GPUS_PER_NODE" '{ n = d; for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) n = substr($i, 7); s += n } END { print s }' <<<"$hosts")
first_host=$(awk '{ print $1; exit }' <<<"$hosts")

# Rendezvous: rank 0 (on the first host: ranks fill the hosts in order) listens on TK_PORT.
# For a shared file system instead: TK_RENDEZVOUS=file:/shared/run/rendezvous.id
RDV=${TK_RENDEZVOUS:-tcp:$first_host:${TK_PORT:-29500}}
export TK_RUN_ID=${TK_RUN_ID:-mpirun-$(hostname)-$$-$(date +%s)}

# Open MPI does not pass this environment to ranks on other hosts: export what they need with
# -x. The site's NCCL_* settings are passed as they are and NCCL_NVLS_ENABLE is deliberately not
# set here. On our shared test machines NVLink multicast must stay off (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1, set by the site): a program that
# uses multicast can put the host's GPUs, which others share, out of service for a day or more.
# trainkit's defaults work without it; forwarding the site's values keeps it off on every host.
fwd=(-x TK_RUN_ID -x PATH)
[ -z "${LD_LIBRARY_PATH:-}" ] || fwd+=(-x LD_LIBRARY_PATH)
for v in $(compgen -e | grep -E '^(NCCL_|TORCH_SYMM_MEM_DISABLE_MULTICAST$|NVSHMEM_DISABLE_NVLS$)' | sort); do
    fwd+=(-x "$v")
done
# EDIT: site options, e.g. --mca btl_tcp_if_include ib0, or -x NCCL_IB_HCA=mlx5 above.

# --map-by ppr:N:node: N consecutive ranks a host, so LOCAL_RANK i uses GPU i.
# --bind-to none: train-step places its own loader threads.
exec mpirun -np "$np" --hostfile "$hostfile" --map-by "ppr:$GPUS_PER_NODE:node" --bind-to none \
    "${fwd[@]}" \
    "$TK_BIN/train-step" --workload dlrm --config "$CONFIG" \
    --train "$DATA/train" --eval "$DATA/eval" --rendezvous "$RDV" "$@"
