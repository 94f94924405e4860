// One thread running an Asio io_context: a communicator's progress thread. It accepts and
// checks handshakes and finishes the writes a socket could not take at once; the calling
// thread does the rest of the socket work itself (docs/threading.md). Functions that must run
// on it end in "OnLoop".
#pragma once

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <string>
#include <thread>

namespace gyre {

class EventLoop {
 public:
  explicit EventLoop(std::string name);
  ~EventLoop();  // stops and joins
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  asio::io_context& context() { return io_; }
  template <class Fn>
  void post(Fn&& fn) {
    asio::post(io_, std::forward<Fn>(fn));
  }
  bool onLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }
  // Stops the loop and joins its thread; pending handlers are dropped. Idempotent.
  void stop();

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
};

}  // namespace gyre
