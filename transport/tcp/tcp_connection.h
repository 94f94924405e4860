// A tcp connection to one peer; both link rings live in this process.
//
// Sending: frames (SlotMeta + payload) are written by whoever holds the writer token. The
// user thread writes directly with a non-blocking sendmsg while the proxy is idle; when the
// socket is full it hands the token and the rest to the proxy on the event loop, so a
// collective never blocks on a send the peer cannot take yet. A payload that already sits in
// user memory is written from there (sendThrough), and only what the socket refused is copied
// into the slot for the proxy.
//
// Receiving: the thread waiting in a collective reads frames into free recv slots itself and
// sleeps in poll() on the socket, so the kernel wakes exactly the thread that needs the data;
// a hand-off through the event loop would cost a thread wake-up per frame. Where the payload
// only needs copying out (all-gather, broadcast), it is read straight into the user's buffer
// (offerDirect), saving the copy out of the slot.
//
// The descriptor belongs to this object, not to Asio: it is registered with the event loop
// only while the proxy has a write outstanding (otherwise every arriving frame would wake
// the loop). It is shut down on failure and closed only on destruction, so no thread ever
// reaches a reused descriptor.
#pragma once

#include <array>
#include <asio/ip/tcp.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "link/link.h"
#include "transport/event_loop.h"
#include "transport/transport.h"

namespace gyre {

class TcpConnection : public Connection, public std::enable_shared_from_this<TcpConnection> {
 public:
  TcpConnection(EventLoop& loop, asio::ip::tcp::socket socket, int selfRank, int peer, int channel,
                const LinkConfig& config);
  ~TcpConnection() override;

  void sendPublished() override;
  // Write-through: a source the CPU may read is written to the socket from where it lies.
  Taken offerSource(const SendSource& source) override {
    return source.cpuReadable && sendThrough(source.data, source.bytes) ? Taken::untilPublished
                                                                        : Taken::no;
  }
  bool batchesSends() const override { return true; }
  DirectCounts directCounts() const override {
    return {throughSends_.load(std::memory_order_relaxed), 0};
  }
  void awaitRecv(Clock::time_point until) override;
  Status failure() const override;
  Status peerGone() override;  // the socket's end closed (POLLRDHUP), no bytes read
  Status flush(Clock::time_point deadline) override;
  void close() override;
  const char* transportName() const override { return "tcp"; }
  // A frame for the target is read from the socket straight into it.
  void offerTarget(const RecvTarget& target) override;
  bool withdrawTarget(uint32_t index) override {
    offer_.dst = nullptr;
    return landedDirect_ && landedIndex_ == index;
  }

 private:
  // False: not now (the progress thread is writing), fill the slot as usual.
  bool sendThrough(const std::byte* src, uint32_t bytes);
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };
  struct Ring {
    LinkCounters counters;
    std::vector<SlotMeta> metas;
    std::unique_ptr<std::byte, FreeDeleter> data;  // 64-byte aligned slots
  };
  static constexpr uint32_t kMaxSlotsPerWrite = 8;
  static constexpr size_t kStagingBytes = 16 * 1024;

  static void initRing(Ring& ring, Link& link, const LinkConfig& config);

  // Writer side; only the holder of the writer token runs these.
  void writeDirect();
  void pumpSendOnLoop();
  size_t gatherFrames(uint32_t filled);  // frames from sent_ into writeBuffers_
  void keepThroughPayloads();            // copies what the socket did not take into the slots
  void advanceSent(size_t bytes);        // accounts bytes written, publishes head

  // Reader side; only the thread in a collective runs these.
  uint32_t readFrames();  // non-blocking; returns frames completed (stops after the first)
  bool fillStaging();     // one recv into the staging buffer; false if nothing came

  void fail(const std::string& what, int err);
  void fail(Status status);  // any thread: records, shuts the socket down, wakes waiters

  EventLoop& loop_;
  const int selfRank_;
  const int fd_;
  Ring sendRing_;
  Ring recvRing_;

  std::atomic<bool> writerFree_{true};  // exchange(false) == true: you now own writing
  std::array<asio::const_buffer, 2 * kMaxSlotsPerWrite> writeBuffers_;
  uint32_t sent_ = 0;      // send slots completely written
  size_t sentOffset_ = 0;  // bytes of frame sent_ already written
  std::unique_ptr<asio::posix::stream_descriptor> loopWriter_;  // loop thread only
  // Per slot (index % nSlots): where its payload is while the user thread holds the writer
  // token from sendThrough() on; null: in the slot. The proxy never sees one set.
  struct Through {
    uint32_t index = 0;
    const std::byte* src = nullptr;
  };
  std::vector<Through> through_;
  uint32_t throughCount_ = 0;
  std::atomic<uint64_t> throughSends_{0};

  uint32_t received_ = 0;         // recv slots completely filled
  size_t receivedOffset_ = 0;     // bytes of frame received_ read so far
  std::byte* payload_ = nullptr;  // where frame received_'s payload goes, chosen at its header
  struct DirectOffer {
    uint32_t index = 0;
    std::byte* dst = nullptr;  // none while null
    uint32_t bytes = 0;
    OpDesc desc;
  } offer_;
  uint32_t landedIndex_ = 0;  // the last slot whose payload went to an offered destination
  bool landedDirect_ = false;
  std::vector<std::byte> staging_;
  size_t stagingBegin_ = 0, stagingEnd_ = 0;

  std::atomic<bool> closed_{false};
  mutable std::mutex failureMutex_;
  Status failure_;
  std::atomic<bool> failed_{false};
};

}  // namespace gyre
