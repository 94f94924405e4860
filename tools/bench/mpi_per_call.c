/* Open MPI's side of gyre-bench --per-call: one collective timed call by call, the same
 * summary line (rank 0's percentiles, the most calls over 1 ms of any rank, the calling
 * threads' voluntary context switches). Built and run by tools/bench/slow_mode.sh.
 *   mpirun -np 2 mpi_per_call all_gather|all_reduce|broadcast BYTES ITERS [rewrite]
 * BYTES as gyre-bench counts them: an all-gather's whole output (each rank sends
 * BYTES / n), a float all-reduce's and a broadcast's buffer. With `rewrite`, as gyre-bench
 * --rewrite: before each call every rank stores to each cache line of the bytes the call reads
 * there (fresh data, as an application produces), and the time includes those stores. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static int ascending(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static long sleeps(void) {
  struct rusage usage;
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

/* A store of the value already there to each line: the line leaves every other cache. */
static void rewrite(char* bytes, size_t n) {
  volatile char* p = bytes;
  for (size_t i = 0; i < n; i += 64) p[i] = p[i];
}

static void call(const char* coll, char* in, char* out, size_t bytes, int n) {
  if (strcmp(coll, "all_gather") == 0) {
    MPI_Allgather(in, (int)(bytes / n), MPI_BYTE, out, (int)(bytes / n), MPI_BYTE, MPI_COMM_WORLD);
  } else if (strcmp(coll, "all_reduce") == 0) {
    MPI_Allreduce(in, out, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else {
    MPI_Bcast(in, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int fresh = argc == 5 && strcmp(argv[4], "rewrite") == 0;
  if ((argc != 4 && !fresh) || (strcmp(argv[1], "all_gather") && strcmp(argv[1], "all_reduce") &&
                                strcmp(argv[1], "broadcast"))) {
    if (rank == 0)
      fprintf(stderr,
              "usage: mpi_per_call all_gather|all_reduce|broadcast BYTES ITERS [rewrite]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char* coll = argv[1];
  const size_t bytes = strtoull(argv[2], NULL, 0);
  const int iters = atoi(argv[3]);
  char* in = calloc(bytes, 1);
  char* out = calloc(bytes, 1);
  /* Written once, so no read meets the kernel's shared zero page. */
  memset(in, 1 + rank, bytes);
  memset(out, 0, bytes);
  double* us = malloc(sizeof(double) * (size_t)iters);
  /* What the call reads on this rank: an all-gather's block, the others' whole buffer. */
  const size_t input = strcmp(coll, "all_gather") == 0 ? bytes / (size_t)n : bytes;
  for (int i = 0; i < 20; ++i) call(coll, in, out, bytes, n);
  MPI_Barrier(MPI_COMM_WORLD);
  const long sleeps0 = sleeps();
  double sum = 0;
  for (int i = 0; i < iters; ++i) {
    const double t0 = MPI_Wtime();
    if (fresh) rewrite(in, input);
    call(coll, in, out, bytes, n);
    us[i] = (MPI_Wtime() - t0) * 1e6;
    sum += us[i];
  }
  long slept = sleeps() - sleeps0, allSlept = 0;
  double slow = 0, mostSlow = 0, mean = sum / iters, slowestMean = 0;
  for (int i = 0; i < iters; ++i) slow += us[i] > 1000;
  MPI_Reduce(&slept, &allSlept, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&slow, &mostSlow, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&mean, &slowestMean, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    qsort(us, (size_t)iters, sizeof(double), ascending);
#define AT(q) us[(size_t)((q)*iters) < (size_t)iters ? (size_t)((q)*iters) : (size_t)iters - 1]
    printf(
        "mean %.2f us (slowest rank); per call, rank 0: p50 %.1f p99 %.1f p99.9 %.1f max %.1f us; "
        "calls over 1 ms: %.0f of %d (the most of any rank); sleeps: %ld (all ranks)\n",
        slowestMean, AT(0.5), AT(0.99), AT(0.999), us[iters - 1], mostSlow, iters, allSlept);
  }
  free(in);
  free(out);
  free(us);
  MPI_Finalize();
  return 0;
}
