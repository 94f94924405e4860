#include "transport/transport.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gyre {

std::string PeerInfo::encode() const {
  std::ostringstream out;
  out << "rank=" << rank << "\nhost=" << hostId << "\ncpus=" << formatCpuList(cpus) << "\n";
  for (const auto& [name, value] : parts) out << "part." << name << "=" << value << "\n";
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
      } else if (key == "cpus") {
        info.cpus = parseCpuList(value);
      } else if (key.rfind("part.", 0) == 0) {
        info.parts[key.substr(5)] = value;
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

std::vector<int> allowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::string formatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> parseCpuList(const std::string& text) {
  constexpr int kMaxCpu = 1 << 16;
  std::vector<int> cpus;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty()) continue;
    const auto dash = part.find('-');
    size_t used = 0;
    const int lo = std::stoi(part.substr(0, dash), &used);
    if (used != (dash == std::string::npos ? part.size() : dash)) throw std::invalid_argument(part);
    int hi = lo;
    if (dash != std::string::npos) {
      hi = std::stoi(part.substr(dash + 1), &used);
      if (used != part.size() - dash - 1) throw std::invalid_argument(part);
    }
    if (lo < 0 || hi < lo || hi >= kMaxCpu) throw std::out_of_range(part);
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace gyre
