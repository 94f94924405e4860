/* Plain C against the installed library, found through pkg-config. */
#include <gyre/gyre.h>
#include <stdio.h>

int main(void) {
  gyreUniqueId id;
  gyreComm_t comm;
  float x = 2.5f, y = 0;
  if (gyreGetUniqueId(&id) != gyreSuccess) return 1;
  if (gyreCommInitRank(&comm, 1, id, 0) != gyreSuccess) {
    fprintf(stderr, "init: %s\n", gyreGetLastError(NULL));
    return 1;
  }
  if (gyreAllReduce(&x, &y, 1, gyreFloat32, gyreSum, comm, NULL) != gyreSuccess || y != 2.5f) return 1;
  gyreCommDestroy(comm);
  printf("c consumer ok\n");
  return 0;
}
