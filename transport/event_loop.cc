#include "transport/event_loop.h"

#include <pthread.h>

#include <cstdio>
#include <exception>

namespace gyre {

EventLoop::EventLoop(std::string name) : guard_(asio::make_work_guard(io_)) {
  thread_ = std::thread([this, name = std::move(name)] {
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
    // Handlers catch their own errors; an escape here is a bug worth a loud message.
    try {
      io_.run();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gyre: event loop %s: unexpected exception: %s\n", name.c_str(),
                   e.what());
      std::terminate();
    }
  });
}

EventLoop::~EventLoop() {
  stop();
}

void EventLoop::stop() {
  guard_.reset();
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gyre
