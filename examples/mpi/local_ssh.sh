#!/bin/sh
# A stand-in for ssh, for trying examples/mpi on one machine: Open MPI's rsh
# launcher runs `AGENT [ssh options] HOST COMMAND...` to start its daemon on
# HOST; this runs COMMAND here instead, with RINGMASTER_MPI_HOST=HOST, so the
# host names of `ringmaster hosts` need not resolve and each rank can say
# which host it was started for. Use it with
#   mpirun --mca plm_rsh_agent examples/mpi/local_ssh.sh ...
# On a real cluster leave it out: mpirun uses ssh.
while [ $# -gt 0 ]; do
  case $1 in
    -x|-X|-T|-t|-n|-q|-A|-a) shift ;;            # ssh flags without a value
    -o|-p|-l|-i|-F|-E) shift 2 ;;                # ssh options with a value
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "local_ssh.sh: want HOST COMMAND..., got: $*" >&2; exit 255; }
RINGMASTER_MPI_HOST=$1
export RINGMASTER_MPI_HOST
# Each stand-in host gets an Open MPI session directory of its own, as a real
# host has: the daemons of several "hosts" on one machine would otherwise race
# to create the same /tmp/ompi.HOSTNAME.UID/jf.N (seen under load: "mkdir ...
# File exists", orte_init failed).
OMPI_MCA_orte_tmpdir_base=${TMPDIR:-/tmp}/ompi-local-$RINGMASTER_MPI_HOST
mkdir -p "$OMPI_MCA_orte_tmpdir_base"
export OMPI_MCA_orte_tmpdir_base
shift
exec /bin/sh -c "$*"
