/* Open MPI's side of tools/bench/more_collectives.sh: the collectives the peer kit leaves out
 * (reduce, reduce-scatter, all-to-all, gather, scatter), timed as the kit's mpi_bench times its
 * own, on float32, each row as gyre-bench counts it.
 *   mpirun -np N mpi_more reduce|reduce_scatter|all_to_all|gather|scatter SIZES SECONDS
 * SIZES: a comma list (K and M suffixes) of bytes as gyre-bench counts them: a reduce's buffer;
 * the whole for the others (a reduce-scatter's input, an all-to-all's send buffer, a gather's
 * output, a scatter's input). Per size: one checked call (#wrong counts wrong elements over
 * every rank), 3 warm-up calls, iterations for about SECONDS from their pace (at least 5, the
 * same on every rank), then the slowest rank's mean per call. Prints "bytes time_us #wrong". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parseSize(const char* s, char** end) {
  double v = strtod(s, end);
  if (**end == 'K') v *= 1024, ++*end;
  else if (**end == 'M') v *= 1024 * 1024, ++*end;
  return (size_t)v;
}

/* Element i of rank r's input: small integers, so every sum is exact in float. */
static float input(int rank, size_t i) { return (float)((rank + 1) * (int)(i % 13 + 1)); }

enum Coll { kReduce, kReduceScatter, kAllToAll, kGather, kScatter };

static void call(enum Coll c, const float* send, float* recv, size_t part, size_t count) {
  switch (c) {
    case kReduce:
      MPI_Reduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
      break;
    case kReduceScatter:
      MPI_Reduce_scatter_block(send, recv, (int)part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case kAllToAll:
      MPI_Alltoall(send, (int)part, MPI_FLOAT, recv, (int)part, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case kGather:
      MPI_Gather(send, (int)part, MPI_FLOAT, recv, (int)part, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
    case kScatter:
      MPI_Scatter(send, (int)part, MPI_FLOAT, recv, (int)part, MPI_FLOAT, 0, MPI_COMM_WORLD);
      break;
  }
}

/* Wrong elements of this rank's output after one call with the inputs above. */
static long wrongElements(enum Coll c, const float* recv, int rank, int n, size_t part,
                          size_t count) {
  long wrong = 0;
  const int ranksSum = n * (n + 1) / 2;
  switch (c) {
    case kReduce:
      if (rank == 0)
        for (size_t i = 0; i < count; ++i) wrong += recv[i] != (float)(ranksSum * (int)(i % 13 + 1));
      break;
    case kReduceScatter:
      for (size_t i = 0; i < part; ++i)
        wrong += recv[i] != (float)(ranksSum * (int)((rank * part + i) % 13 + 1));
      break;
    case kAllToAll: /* block s of the output: block `rank` of rank s's input */
      for (int s = 0; s < n; ++s)
        for (size_t i = 0; i < part; ++i) wrong += recv[s * part + i] != input(s, rank * part + i);
      break;
    case kGather:
      if (rank == 0)
        for (int s = 0; s < n; ++s)
          for (size_t i = 0; i < part; ++i) wrong += recv[s * part + i] != input(s, i);
      break;
    case kScatter:
      for (size_t i = 0; i < part; ++i) wrong += recv[i] != input(0, rank * part + i);
      break;
  }
  return wrong;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: mpi_more COLLECTIVE SIZES SECONDS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char* names[] = {"reduce", "reduce_scatter", "all_to_all", "gather", "scatter"};
  int coll = -1;
  for (int c = 0; c < 5; ++c)
    if (!strcmp(argv[1], names[c])) coll = c;
  if (coll < 0) {
    if (rank == 0) fprintf(stderr, "mpi_more: unknown collective %s\n", argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const double seconds = atof(argv[3]);
  printf(rank == 0 ? "# mpi_more %s, %d ranks: bytes time_us #wrong\n" : "", argv[1], n);
  for (char* s = argv[2]; *s;) {
    char* end;
    const size_t bytes = parseSize(s, &end);
    s = *end == ',' ? end + 1 : end;
    /* Whole-buffer collectives count the buffer; the others split the whole in n parts of at
     * least one element each, as gyre-bench does, so both sides time the same sizes. */
    size_t part = bytes / sizeof(float) / (coll == kReduce ? 1 : n);
    if (part == 0) part = 1;
    const size_t count = coll == kReduce ? part : part * n;
    float* send = malloc(count * sizeof(float));
    float* recv = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; ++i) send[i] = input(rank, i);
    memset(recv, 0xff, count * sizeof(float)); /* NaN: an unwritten element shows */
    call(coll, send, recv, part, count);
    long wrong = wrongElements(coll, recv, rank, n, part, count), wrongAll = 0;
    MPI_Allreduce(&wrong, &wrongAll, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < 3; ++i) call(coll, send, recv, part, count);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < 3; ++i) call(coll, send, recv, part, count);
    double pace = (MPI_Wtime() - start) / 3, slowest;
    MPI_Allreduce(&pace, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long iters = (long)(seconds / slowest);
    if (iters < 5) iters = 5;
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    for (long i = 0; i < iters; ++i) call(coll, send, recv, part, count);
    const double mean = (MPI_Wtime() - start) / iters;
    MPI_Allreduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("%zu %.2f %ld\n", count * sizeof(float), slowest * 1e6, wrongAll);
    free(send);
    free(recv);
  }
  MPI_Finalize();
  return 0;
}
