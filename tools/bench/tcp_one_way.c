// Small messages one way over loopback tcp, as a two-rank rooted call in a loop makes them (the
// leaf of a reduce or gather sends, the root only receives), against a round trip. CPU 1 sends
// BYTES-byte messages with TCP_NODELAY; CPU 0 receives each with a non-blocking recv, and between
// tries either polls again at once (spin: what a waiter in its busy phase does) or sleeps in
// poll() until data comes (block). Prints µs per message, the receiver's recv calls per message
// and the segments it sent per message (tcpi_segs_out: in the stream, all acknowledgements).
// `pingpong` sends each message back and prints the round trip instead. Built as
// build/tools/gyre-probe-tcp_one_way:
//   for w in spin block; do build/tools/gyre-probe-tcp_one_way stream $w 512; done
//   for w in spin block; do build/tools/gyre-probe-tcp_one_way pingpong $w 64; done
// Usage: tcp_one_way stream|pingpong spin|block BYTES [MESSAGES=200000]
#include "probe.h"

#include <linux/tcp.h> /* tcp_info with tcpi_segs_out, which glibc's lacks */
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int spin, pingpong;
static long recvCalls;

static void die(const char* what) {
  perror(what);
  exit(1);
}

static void receiveAll(int fd, char* buf, size_t bytes) {
  for (size_t got = 0; got < bytes;) {
    const ssize_t n = recv(fd, buf + got, bytes - got, MSG_DONTWAIT);
    ++recvCalls;
    if (n > 0) {
      got += (size_t)n;
    } else if (n == 0) {
      fprintf(stderr, "tcp_one_way: the peer closed the connection\n");
      exit(1);
    } else if (!spin) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0) die("poll");
    }
  }
}

static void sendAll(int fd, const char* buf, size_t bytes) {
  for (size_t sent = 0; sent < bytes;) {
    const ssize_t n = send(fd, buf + sent, bytes - sent, 0);
    if (n < 0) die("send");
    sent += (size_t)n;
  }
}

static unsigned segmentsOut(int fd) {
  struct tcp_info info;
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) die("TCP_INFO");
  return info.tcpi_segs_out;
}

int main(int argc, char** argv) {
  if (argc < 4 || (strcmp(argv[1], "stream") && strcmp(argv[1], "pingpong")) ||
      (strcmp(argv[2], "spin") && strcmp(argv[2], "block"))) {
    fprintf(stderr, "usage: tcp_one_way stream|pingpong spin|block BYTES [MESSAGES=200000]\n");
    return 2;
  }
  pingpong = !strcmp(argv[1], "pingpong");
  spin = !strcmp(argv[2], "spin");
  const size_t bytes = (size_t)atol(argv[3]);
  const long messages = argc > 4 ? atol(argv[4]) : 200000, warmup = 1000;
  if (bytes == 0 || messages <= 0) return 2;

  const int one = 1;
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  if (bind(listener, (struct sockaddr*)&addr, sizeof addr) || listen(listener, 1) ||
      getsockname(listener, (struct sockaddr*)&addr, &len))
    die("listen");
  const pid_t sender = fork();
  if (sender < 0) die("fork");
  int fd;
  if (sender == 0) {
    pin(1);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr*)&addr, sizeof addr)) die("connect");
  } else {
    pin(0);
    fd = accept(listener, NULL, NULL);
    if (fd < 0) die("accept");
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char* buf = calloc(1, bytes);

  if (sender == 0) {
    for (long i = 0; i < warmup + messages; ++i) {
      sendAll(fd, buf, bytes);
      if (pingpong) receiveAll(fd, buf, bytes);
    }
    char done;  // the receiver's go-ahead to close: its counts are taken by then
    receiveAll(fd, &done, 1);
    return 0;
  }
  double start = 0;
  unsigned segmentsBefore = 0;
  for (long i = 0; i < warmup + messages; ++i) {
    if (i == warmup) {
      start = nowSeconds();
      recvCalls = 0;
      segmentsBefore = segmentsOut(fd);
    }
    receiveAll(fd, buf, bytes);
    if (pingpong) sendAll(fd, buf, bytes);
  }
  const double seconds = nowSeconds() - start;
  const unsigned receiverSegments = segmentsOut(fd) - segmentsBefore;
  sendAll(fd, "x", 1);
  int status = 0;
  waitpid(sender, &status, 0);
  printf("%s %s %zu B: %.3f us per %s, %.2f recv calls and %.2f receiver segments per message\n",
         argv[1], argv[2], bytes, seconds / (double)messages * 1e6,
         pingpong ? "round trip" : "message", (double)recvCalls / (double)messages,
         (double)receiverSegments / (double)messages);
  return status == 0 ? 0 : 1;
}
