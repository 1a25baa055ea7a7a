/* A ring all-reduce over MPI: every rank contributes its rank, the sum must be
 * 0 + 1 + ... + (size-1). Each rank prints "rank R of N on HOST sum S", where
 * HOST is the host name mpirun started it for (RINGMASTER_MPI_HOST, set by the
 * remote-shell agent that started the rank's Open MPI daemon; see
 * examples/mpi/local_ssh.sh), or the machine's name without it. */
#include <mpi.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

/* The host this rank was started for: the environment, or that of the Open MPI
 * daemon that started it (its parent), or the machine's name. */
static void host_of_rank(char *out, size_t n) {
  const char *env = getenv("RINGMASTER_MPI_HOST");
  if (env != NULL && env[0] != '\0') {
    snprintf(out, n, "%s", env);
    return;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/environ", (long)getppid());
  FILE *f = fopen(path, "r");
  if (f != NULL) {
    static char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char key[] = "RINGMASTER_MPI_HOST=";
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1) {
      if (strncmp(buf + i, key, sizeof key - 1) == 0) {
        snprintf(out, n, "%s", buf + i + sizeof key - 1);
        return;
      }
    }
  }
  if (gethostname(out, n) != 0) snprintf(out, n, "unknown");
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long mine = rank, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  char host[256];
  host_of_rank(host, sizeof host);
  long want = (long)size * (size - 1) / 2;
  /* Print in rank order so the output is deterministic. */
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      printf("rank %d of %d on %s sum %ld\n", rank, size, host, sum);
      fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  int ok = sum == want;
  if (!ok) fprintf(stderr, "rank %d: all-reduce sum %ld, want %ld\n", rank, sum, want);
  MPI_Finalize();
  return ok ? 0 : 1;
}
