/* gyre: collective communication for CPU and GPU buffers. C API shaped like NCCL's.
 *
 * Every function returns a gyreResult_t. On failure, gyreGetLastError() returns a message
 * for the calling thread that names the rank and the operation.
 *
 * Buffers: host memory with `stream == NULL` means a blocking call. A cudaStream_t, or CUDA
 * device memory (then NULL is the default stream), means a stream-ordered call: it is enqueued
 * on the stream and returns; errors found later poison the communicator (see
 * gyreCommGetAsyncError and docs/cuda.md). */
#ifndef GYRE_GYRE_H_
#define GYRE_GYRE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GYRE_MAJOR 0
#define GYRE_MINOR 1
#define GYRE_PATCH 0
#define GYRE_VERSION_CODE (GYRE_MAJOR * 10000 + GYRE_MINOR * 100 + GYRE_PATCH)

#define GYRE_UNIQUE_ID_BYTES 128

#if defined(__GNUC__)
#define GYRE_API __attribute__((visibility("default")))
#else
#define GYRE_API
#endif

typedef enum {
  gyreSuccess = 0,
  gyreInvalidArgument = 1, /* bad pointer, count, rank, root, dtype or op */
  gyreInvalidUsage = 2,    /* ranks disagree on a collective; call on a destroyed comm */
  gyreSystemError = 3,     /* an OS call failed (socket, memory) */
  gyreRemoteError = 4,     /* a peer failed or disconnected */
  gyreTimeout = 5,         /* a wait ran past the communicator's deadline */
  gyreAborted = 6,         /* gyreCommAbort was called */
  gyreInternalError = 7,
  gyreNumResults = 8
} gyreResult_t;

typedef enum {
  gyreInt8 = 0,
  gyreUint8 = 1,
  gyreInt32 = 2,
  gyreUint32 = 3,
  gyreInt64 = 4,
  gyreUint64 = 5,
  gyreFloat16 = 6,
  gyreBfloat16 = 7,
  gyreFloat32 = 8,
  gyreFloat64 = 9,
  gyreNumTypes = 10
} gyreDataType_t;

typedef enum {
  gyreSum = 0,
  gyreProd = 1,
  gyreMin = 2,
  gyreMax = 3,
  gyreAvg = 4,
  gyreNumOps = 5,
  /* Ops from gyreRedOpCreatePreMulSum take values from gyreNumOps up. */
  gyreMaxRedOp = 0x7fffffff
} gyreRedOp_t;

/* Where the scalar of gyreRedOpCreatePreMulSum lives, as NCCL's ncclScalarResidence_t. */
typedef enum {
  gyreScalarDevice = 0,        /* read from that memory (device or host) as each call runs */
  gyreScalarHostImmediate = 1, /* host memory, read once by gyreRedOpCreatePreMulSum */
  gyreNumScalarResidences = 2
} gyreScalarResidence_t;

typedef struct gyreComm* gyreComm_t;
/* Asynchronous work started by gyreGroupEndAsync. */
typedef struct gyreWork* gyreWork_t;

/* Color for ranks that take no part in a gyreCommSplit. */
#define GYRE_SPLIT_NOCOLOR (-1)

/* Self-contained bootstrap token: rendezvous address, random job id, secret. */
typedef struct {
  char internal[GYRE_UNIQUE_ID_BYTES];
} gyreUniqueId;

/* Opaque stream handle: a cudaStream_t for stream-ordered calls, NULL for host buffers. */
typedef void* gyreStream_t;

GYRE_API int gyreGetVersion(int* version);

/* Per-communicator settings for gyreCommInitRankConfig and gyreCommSplit; zero (NULL) fields
 * keep the environment's value (GYRE_TIMEOUT, GYRE_SLOT_BYTES, GYRE_NSLOTS, GYRE_ALGO,
 * GYRE_CHANNELS), or the parent's for a split. */
typedef struct {
  size_t size;           /* sizeof(gyreConfig_t): lets later versions add fields */
  int timeoutMs;         /* every wait of this communicator; default 300000 */
  int slotBytes;         /* bytes per link slot; all ranks must agree */
  int nSlots;            /* slots per link direction */
  const char* algorithm; /* as GYRE_ALGO: "ring", "tree", "rd", ..., or "auto" (the tuner) */
  int channels;          /* rings per ring collective */
} gyreConfig_t;
#define GYRE_CONFIG_INITIALIZER \
  { sizeof(gyreConfig_t), 0, 0, 0, NULL, 0 }

/* Starts a rendezvous server inside the calling process and returns an id that every rank
 * passes to gyreCommInitRank. The server serves that one job: once every rank that joined
 * through the id has destroyed its communicators and none came back for 1 s, it stops (its
 * thread ends, its port closes; the next gyreGetUniqueId frees the rest). An id no rank ever
 * joins keeps its server until the process exits. */
GYRE_API gyreResult_t gyreGetUniqueId(gyreUniqueId* uniqueId);
GYRE_API gyreResult_t gyreCommInitRank(gyreComm_t* comm, int nranks, gyreUniqueId commId, int rank);
GYRE_API gyreResult_t gyreCommInitRankConfig(gyreComm_t* comm, int nranks, gyreUniqueId commId,
                                             int rank, const gyreConfig_t* config);
/* As NCCL's ncclCommInitRankScalable: nId ids (1 to nranks), the same on every rank and in the
 * same order, each from gyreGetUniqueId. gyre's ranks meet through one rendezvous server per job,
 * so every rank joins through the first id's; the ranks then compare their whole lists, and where
 * one differs the call fails on every rank, naming the ranks (a rank whose first id differs never
 * meets the others: every rank's wait ends at the timeout). The servers of the other ids, which
 * no rank joins, stay until their processes exit (gyreGetUniqueId). */
GYRE_API gyreResult_t gyreCommInitRankScalable(gyreComm_t* comm, int nranks, int rank, int nId,
                                               const gyreUniqueId* commIds,
                                               const gyreConfig_t* config);

/* Makes the `ndev` communicators of one job in this process, rank i in comms[i], as NCCL's
 * ncclCommInitAll: for a thread that drives several ranks, their calls in groups (a group runs
 * each communicator's part at once). devlist, where not NULL, lists a CUDA device per rank as
 * NCCL's does; gyre finds each buffer's device itself and only checks the entries are not
 * negative. On failure every comms[i] is NULL. */
GYRE_API gyreResult_t gyreCommInitAll(gyreComm_t* comms, int ndev, const int* devlist);

/* Reads GYRE_RANK, GYRE_WORLD_SIZE, GYRE_RENDEZVOUS (or torch's RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT). Without a rendezvous address, rank 0 hosts the server. */
GYRE_API gyreResult_t gyreCommInitFromEnv(gyreComm_t* comm);

/* Waits until every call issued on the communicator has ended (asynchronous work and the host
 * part of stream-ordered calls included; each ends by the communicator's timeout), then
 * returns the first error any of them ran into, as NCCL's ncclCommFinalize before
 * ncclCommDestroy. The communicator stays usable. */
GYRE_API gyreResult_t gyreCommFinalize(gyreComm_t comm);
/* Frees the communicator. The handle stays invalid: any later call through it, another
 * gyreCommDestroy included, returns gyreInvalidUsage (a few bytes per handle are kept for
 * that). */
GYRE_API gyreResult_t gyreCommDestroy(gyreComm_t comm);
/* From any thread: a collective waiting on this communicator fails with gyreAborted, and so
 * does every later call. Still call gyreCommDestroy afterwards. */
GYRE_API gyreResult_t gyreCommAbort(gyreComm_t comm);
/* As NCCL's ncclCommRevoke, for ranks that go on after a failure: what runs or is queued on
 * this communicator on this rank fails with gyreAborted, and the call returns once none of it
 * runs (gyre's revoke is never in progress). From then on it is for gyreCommSplit (and
 * gyreCommDup), gyreCommShrink and gyreCommDestroy: its collectives, sends and receives fail
 * with gyreAborted, gyreCommFinalize with gyreInvalidUsage, and gyreCommGetAsyncError reports
 * gyreSuccess. Revoking is this rank's own: a peer's call that waits on this rank ends by its
 * timeout, or at once where that peer revokes too. flags: GYRE_REVOKE_DEFAULT. */
#define GYRE_REVOKE_DEFAULT 0
GYRE_API gyreResult_t gyreCommRevoke(gyreComm_t comm, int flags);

/* Registers [buff, buff + size) with the communicator's rdma device (NCCL's
 * ncclCommRegister): gyreSend then moves slots straight out of it instead of copying them.
 * Where the communicator has no rdma it is accepted and changes nothing. The memory stays
 * pinned until gyreCommDeregister, which must come before the buffer is freed or reused, and
 * not while an operation uses it. The same address registered again shares the region, or
 * replaces it when the size differs. At most 1024 per communicator (docs/rdma.md). CUDA
 * device memory is registered for GPUDirect RDMA (dma-buf, else peer memory) where the system
 * allows it: a stream-ordered gyreSend from it to a peer over rdma is then not staged
 * (docs/cuda.md). */
GYRE_API gyreResult_t gyreCommRegister(const gyreComm_t comm, void* buff, size_t size,
                                       void** handle);
GYRE_API gyreResult_t gyreCommDeregister(const gyreComm_t comm, void* handle);
/* gyreSuccess, or the error that poisoned the communicator. */
GYRE_API gyreResult_t gyreCommGetAsyncError(gyreComm_t comm, gyreResult_t* asyncError);
GYRE_API gyreResult_t gyreCommCount(const gyreComm_t comm, int* count);
GYRE_API gyreResult_t gyreCommUserRank(const gyreComm_t comm, int* rank);
/* The CUDA device of the communicator, as NCCL's ncclCommCuDevice: the device that was current
 * on the thread that made it (set it with cudaSetDevice first), devlist[i] (else i) for
 * gyreCommInitAll's comms[i], the parent's for gyreCommSplit, gyreCommShrink and gyreCommDup.
 * gyre itself finds each buffer's device; this only reports. gyreInvalidUsage where the process
 * had not loaded the CUDA driver when the communicator was made (or gyre was built without
 * CUDA). */
GYRE_API gyreResult_t gyreCommCuDevice(const gyreComm_t comm, int* device);

/* `size` bytes of CUDA device memory on the calling thread's current device, as NCCL's
 * ncclMemAlloc (cudaMalloc here): every gyre call takes it, as it takes any device memory.
 * Free it with gyreMemFree (NULL: a no-op). gyreSystemError with CUDA's error where the
 * allocation fails (no device, no driver, out of memory); gyreInvalidUsage in a build without
 * CUDA. */
GYRE_API gyreResult_t gyreMemAlloc(void** ptr, size_t size);
GYRE_API gyreResult_t gyreMemFree(void* ptr);

/* A sum in which every rank's input is first multiplied by the scalar (one element of
 * `datatype`), as NCCL's ncclRedOpCreatePreMulSum: an op for gyreAllReduce, gyreReduce and
 * gyreReduceScatter of that datatype on `comm` alone, until gyreRedOpDestroy. The caller's
 * input is left as it was. A gyreScalarDevice scalar is read in stream order where the call is
 * stream-ordered. Such calls run through host memory (staged where the buffers are on a GPU)
 * and are not fused in groups (docs/collectives.md). */
GYRE_API gyreResult_t gyreRedOpCreatePreMulSum(gyreRedOp_t* op, void* scalar,
                                               gyreDataType_t datatype,
                                               gyreScalarResidence_t residence, gyreComm_t comm);
GYRE_API gyreResult_t gyreRedOpDestroy(gyreRedOp_t op, gyreComm_t comm);

GYRE_API gyreResult_t gyreAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    gyreDataType_t datatype, gyreRedOp_t op, gyreComm_t comm,
                                    gyreStream_t stream);
/* recvbuff holds nranks * sendcount elements; in place when sendbuff == recvbuff + rank*sendcount.
 */
GYRE_API gyreResult_t gyreAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream);
/* sendbuff holds nranks * recvcount elements; in place when recvbuff == sendbuff + rank*recvcount.
 */
GYRE_API gyreResult_t gyreReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        gyreDataType_t datatype, gyreRedOp_t op, gyreComm_t comm,
                                        gyreStream_t stream);
/* sendbuff is read on root only. */
GYRE_API gyreResult_t gyreBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    gyreDataType_t datatype, int root, gyreComm_t comm,
                                    gyreStream_t stream);

/* In place (NCCL's legacy ncclBcast): gyreBroadcast(buff, buff, ...). */
GYRE_API gyreResult_t gyreBcast(void* buff, size_t count, gyreDataType_t datatype, int root,
                                gyreComm_t comm, gyreStream_t stream);

/* recvbuff (count elements) is written on root only; other ranks may pass NULL. */
GYRE_API gyreResult_t gyreReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 gyreDataType_t datatype, gyreRedOp_t op, int root, gyreComm_t comm,
                                 gyreStream_t stream);
/* count elements per rank; recvbuff (nranks * count) is used on root only. In place when
 * sendbuff == recvbuff + root*count on root. */
GYRE_API gyreResult_t gyreGather(const void* sendbuff, void* recvbuff, size_t count,
                                 gyreDataType_t datatype, int root, gyreComm_t comm,
                                 gyreStream_t stream);
/* count elements per rank; sendbuff (nranks * count) is read on root only. In place when
 * recvbuff == sendbuff + root*count on root. */
GYRE_API gyreResult_t gyreScatter(const void* sendbuff, void* recvbuff, size_t count,
                                  gyreDataType_t datatype, int root, gyreComm_t comm,
                                  gyreStream_t stream);
/* count elements to and from every rank; buffers hold nranks * count and must not overlap. */
GYRE_API gyreResult_t gyreAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                   gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream);
/* Rank r contributes recvcounts[r] elements, placed at recvbuff + displs[r] (in elements). */
GYRE_API gyreResult_t gyreAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                                     const size_t* recvcounts, const size_t* displs,
                                     gyreDataType_t datatype, gyreComm_t comm, gyreStream_t stream);
/* sendcounts[r] elements at sendbuff + sdispls[r] go to rank r, which places them at its
 * recvbuff + rdispls[sender]; each pair of ranks must agree on its counts. */
GYRE_API gyreResult_t gyreAllToAllV(const void* sendbuff, const size_t* sendcounts,
                                    const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                                    const size_t* rdispls, gyreDataType_t datatype, gyreComm_t comm,
                                    gyreStream_t stream);
GYRE_API gyreResult_t gyreBarrier(gyreComm_t comm);
/* Point to point; the peer makes the matching call. Outside a group a send may wait for the
 * receiver; inside one, every send and receive of the group moves together. */
GYRE_API gyreResult_t gyreSend(const void* sendbuff, size_t count, gyreDataType_t datatype,
                               int peer, gyreComm_t comm, gyreStream_t stream);
GYRE_API gyreResult_t gyreRecv(void* recvbuff, size_t count, gyreDataType_t datatype, int peer,
                               gyreComm_t comm, gyreStream_t stream);

/* Groups: calls between gyreGroupStart and gyreGroupEnd (nestable) are deferred. At the end,
 * per communicator in order of first use: consecutive all-reduces of one type and op run as
 * one, other collectives run in order, then all sends and receives move together.
 * gyreGroupEnd blocks until they finished; gyreGroupEndAsync returns at once with a work
 * handle (buffers must stay valid until it completes). */
GYRE_API gyreResult_t gyreGroupStart(void);
GYRE_API gyreResult_t gyreGroupEnd(void);
GYRE_API gyreResult_t gyreGroupEndAsync(gyreWork_t* work);
/* gyreSuccess once done, gyreTimeout if still running after timeoutMs (the work goes on),
 * or the error the work ended with. With timeoutMs > 0 the waiting thread may run the work
 * itself, and the calls queued before it, instead of sleeping while the communicator's worker
 * thread does: it then returns when they end, which may be after timeoutMs (every call ends
 * by the communicator's timeout). gyreWorkWaitPassive only sleeps (a thread that watches works
 * which other threads issue and wait for). */
GYRE_API gyreResult_t gyreWorkWait(gyreWork_t work, int timeoutMs);
GYRE_API gyreResult_t gyreWorkWaitPassive(gyreWork_t work, int timeoutMs);
GYRE_API gyreResult_t gyreWorkTest(gyreWork_t work, int* done);
/* Calls fn(arg) once the work has run, just before waits and gyreWorkTest see it done: on the
 * thread that ran its last part (the communicator's worker, or one inside gyreWorkWait, a
 * blocking call or gyreGroupEnd that ran it), or on this thread at once when it has run
 * already. For a thread that completes works for others without sleeping on each one: fn
 * must be quick and must not call gyre (it runs inside the communicator's call, and the work
 * is not done yet, so waiting for or freeing it would never return). One per work. */
typedef void (*gyreWorkCallback_t)(void* arg);
GYRE_API gyreResult_t gyreWorkOnEnd(gyreWork_t work, gyreWorkCallback_t fn, void* arg);
/* Waits for the work to finish first. */
GYRE_API gyreResult_t gyreWorkFree(gyreWork_t work);

/* A communicator of the ranks that pass the same color, ordered by key (then by rank in
 * comm). Every rank of comm calls it; GYRE_SPLIT_NOCOLOR gives *newcomm = NULL. The child
 * keeps working after its parent is destroyed. config may be NULL (the parent's settings). */
GYRE_API gyreResult_t gyreCommSplit(gyreComm_t comm, int color, int key, gyreComm_t* newcomm,
                                    const gyreConfig_t* config);
GYRE_API gyreResult_t gyreCommDup(gyreComm_t comm, gyreComm_t* newcomm);

/* Flags of gyreCommShrink. */
#define GYRE_SHRINK_DEFAULT 0 /* wait for the calls issued on comm (each ends by the timeout) */
#define GYRE_SHRINK_ABORT 1   /* abort comm first: its calls fail at once, and it is unusable */
/* A communicator of comm's ranks but the excludeCount ranks listed, as NCCL's ncclCommShrink:
 * for the ranks that remain after others failed or left. Only they call it, each with the same
 * list, and nothing travels over comm, which may have failed: they meet through the rendezvous
 * (a rendezvous hosted by an excluded rank is gone with it: use gyre-rendezvous or the
 * launcher's). New ranks keep the old order. config: as for gyreCommSplit. */
GYRE_API gyreResult_t gyreCommShrink(gyreComm_t comm, const int* excludeRanks, int excludeCount,
                                     gyreComm_t* newcomm, const gyreConfig_t* config, int flags);

GYRE_API const char* gyreGetErrorString(gyreResult_t result);
/* The message of the last failed call on this thread ("" if none). */
GYRE_API const char* gyreGetLastError(gyreComm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* GYRE_GYRE_H_ */
