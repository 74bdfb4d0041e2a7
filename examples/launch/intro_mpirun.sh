#!/bin/bash
# The intro training on the machines of an Open MPI host file, one process per machine,
# 2 ranks in each. Open MPI does not say which machine runs rank 0: pass its address.
#   examples/launch/intro_mpirun.sh hosts.txt node1     (hosts.txt: one machine per line)
set -euo pipefail
hostfile=$1
master=$2
exec mpirun --hostfile "$hostfile" --npernode 1 -x MASTER_ADDR="$master" -x MASTER_PORT=29500 \
  ./build/bin/intro --procs 2 --nodes-from-environment --out build/examples-output
