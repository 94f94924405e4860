#include "transport/transport.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace gyre {

std::string PeerInfo::encode() const {
  std::ostringstream out;
  out << "rank=" << rank << "\nhost=" << hostId << "\ntcp=" << tcpHost << "\nport=" << tcpPort
      << "\nshm=" << (shm ? 1 : 0) << "\n";
  return out.str();
}

PeerInfo PeerInfo::decode(const std::string& text) {
  PeerInfo info;
  std::istringstream in(text);
  std::string line;
  bool haveRank = false;
  try {
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
      if (key == "rank") {
        info.rank = std::stoi(value);
        haveRank = true;
      } else if (key == "host") {
        info.hostId = value;
      } else if (key == "tcp") {
        info.tcpHost = value;
      } else if (key == "shm") {
        info.shm = value == "1";
      } else if (key == "port") {
        const int port = std::stoi(value);
        if (port < 0 || port > 65535) throw std::out_of_range("port");
        info.tcpPort = uint16_t(port);
      }
    }
  } catch (const std::exception&) {
    fail(Code::internal, "malformed peer info in the rendezvous store: " + text);
  }
  if (!haveRank) fail(Code::internal, "peer info without a rank in the rendezvous store");
  return info;
}

std::string localHostId() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string id = host;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  if (boot >> bootId) id += ":" + bootId;
  return id;
}

}  // namespace gyre
