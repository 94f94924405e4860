#include "runtime/core/failure_board.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "base/log.h"

namespace gyre {

namespace {
constexpr auto kPublishEvery = std::chrono::milliseconds(200);
constexpr auto kReadTimeout = std::chrono::milliseconds(0);

std::string opText(const OpDesc& d) {
  std::ostringstream s;
  s << d.seq << ' ' << int(d.coll) << ' ' << d.count << ' ' << int(d.dtype) << ' ' << int(d.op)
    << ' ' << d.root;
  return s.str();
}

bool parseOp(std::istringstream& in, OpDesc& d) {
  int coll = 0, dtype = 0, op = 0;
  if (!(in >> d.seq >> coll >> d.count >> dtype >> op >> d.root)) return false;
  if (coll < 0 || coll >= kNumCollectives || dtype < 0 || dtype >= kNumDataTypes || op < 0 ||
      op >= kNumRedOps) {
    return false;
  }
  d.coll = Collective(coll);
  d.dtype = DataType(dtype);
  d.op = RedOp(op);
  return true;
}
}  // namespace

FailureBoard::FailureBoard(std::shared_ptr<Store> store, int rank, int nranks)
    : store_(std::move(store)), rank_(rank), nranks_(nranks) {
  // An entry from the start: a rank that never runs anything still reads as "none".
  store_->set("progress/" + std::to_string(rank_), encode(Progress{}));
  publisher_ = std::thread([this] { publishLoop(); });
}

FailureBoard::~FailureBoard() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  publisher_.join();
}

FailureBoard::Progress FailureBoard::snapshot(uint64_t& version) const {
  Progress p;
  uint64_t w[2][kWords];
  while (true) {
    const uint64_t before = version_.load(std::memory_order_acquire);
    for (int i = 0; i < kWords; ++i) {
      w[0][i] = started_[i].load(std::memory_order_relaxed);
      w[1][i] = completed_[i].load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (!(before & 1) && version_.load(std::memory_order_relaxed) == before) {
      version = before;
      break;
    }
    std::this_thread::yield();
  }
  auto decodeOp = [](const uint64_t* x, OpDesc& d) {
    d.seq = x[0];
    d.count = x[1];
    d.root = int32_t(uint32_t(x[2] >> 32));
    d.coll = Collective((x[2] >> 24) & 0xff);
    d.dtype = DataType((x[2] >> 16) & 0xff);
    d.op = RedOp((x[2] >> 8) & 0xff);
    return (x[2] & 1) != 0;
  };
  p.hasStarted = decodeOp(w[0], p.started);
  p.hasCompleted = decodeOp(w[1], p.completed);
  return p;
}

void FailureBoard::publishLoop() {
  uint64_t published = 0;
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, kPublishEvery, [&] { return stop_; });
    if (stop_) break;
    uint64_t version = 0;
    const Progress progress = snapshot(version);
    if (version == published) continue;
    published = version;
    const std::string text = encode(progress);
    lock.unlock();
    try {
      store_->set("progress/" + std::to_string(rank_), text);
    } catch (const Failure& f) {
      GYRE_LOG(warn, "rank " + std::to_string(rank_) +
                         ": cannot publish progress to the rendezvous: " + f.what());
      return;  // the store is gone; failures still travel over the connections
    }
    lock.lock();
  }
}

std::string FailureBoard::encode(const Progress& p) {
  std::string text;
  if (p.hasStarted) text += "started " + opText(p.started) + "\n";
  if (p.hasCompleted) text += "completed " + opText(p.completed) + "\n";
  return text;
}

FailureBoard::Progress FailureBoard::decode(const std::string& text) {
  Progress p;
  p.any = true;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "started") p.hasStarted = parseOp(in, p.started);
    if (kind == "completed") p.hasCompleted = parseOp(in, p.completed);
  }
  return p;
}

namespace {

// A recorded failure: "rank\ncode\nlostRank\nmessage".
struct Record {
  int rank = -1;
  Code code = Code::remote_error;
  int lostRank = -1;
  std::string message;
};

std::string encodeRecord(int rank, const Status& s) {
  return std::to_string(rank) + "\n" + std::to_string(int(s.code)) + "\n" +
         std::to_string(s.lostRank) + "\n" + s.message;
}

bool decodeRecord(const std::string& text, int nranks, Record& r) {
  std::istringstream in(text);
  int code = 0;
  if (!(in >> r.rank >> code >> r.lostRank)) return false;
  std::getline(in, r.message);  // rest of the lostRank line
  std::getline(in, r.message, '\0');
  r.code = Code(code);
  return r.rank >= 0 && r.rank < nranks && code > 0 && code <= int(Code::internal) &&
         r.lostRank >= -1 && r.lostRank < nranks;
}

// gyre-run (tools/run/launcher.cc) hands its ranks a pipe in GYRE_RUN_CAUSE_FD: a rank that
// fails because of another says which, so the launcher names the cause even where both ranks
// end before it looks. Best effort: the error this rank reports names the cause either way.
void tellLauncher(int self, int cause) {
  static const int fd = [] {
    const char* value = std::getenv("GYRE_RUN_CAUSE_FD");
    const int f = value ? std::atoi(value) : -1;
    struct stat st {};
    return f > 2 && fstat(f, &st) == 0 && S_ISFIFO(st.st_mode) ? f : -1;
  }();
  if (fd < 0 || cause < 0 || cause == self) return;
  const std::string line = std::to_string(self) + " " + std::to_string(cause) + "\n";
  if (::write(fd, line.data(), line.size()) < 0) return;  // a full or closed pipe: nothing to add
}

// Errors start with the rank that was lost, then who noticed it.
std::string lostHeader(int lostRank, int noticer) {
  return "rank " + std::to_string(lostRank) +
         " is gone (it exited, was killed or became unreachable; noticed by rank " +
         std::to_string(noticer) + "): ";
}

}  // namespace

Status FailureBoard::report(const Status& local, const OpDesc& op) {
  return report(local, describeOp(op));
}

Status FailureBoard::report(const Status& local, const std::string& what) {
  const std::string mine = encodeRecord(rank_, local);
  std::string first;
  try {
    first = store_->compareSet("failure", "", mine);
  } catch (const Failure& f) {
    GYRE_LOG(warn, "rank " + std::to_string(rank_) +
                       ": cannot record the failure at the "
                       "rendezvous: " +
                       f.what());
    first = mine;
  }
  Record r;
  if (first == mine || !decodeRecord(first, nranks_, r)) {
    if (local.lostRank < 0) return local;
    tellLauncher(rank_, local.lostRank);
    return {local.code, lostHeader(local.lostRank, rank_) + local.message, local.lostRank};
  }
  const std::string here = "rank " + std::to_string(rank_) + ": " + what;
  if (r.lostRank >= 0) {
    tellLauncher(rank_, r.lostRank);
    return {r.code, lostHeader(r.lostRank, r.rank) + here + " stopped: " + r.message, r.lostRank};
  }
  tellLauncher(rank_, r.rank);
  return {r.code,
          here + " failed because rank " + std::to_string(r.rank) + " failed first: " + r.message};
}

Status FailureBoard::recorded() {
  std::string first;
  try {
    first = store_->get("failure", std::chrono::milliseconds(0));
  } catch (const Failure&) {
    return {};  // nothing recorded (or the store is gone: the caller's deadline still holds)
  }
  Record r;
  if (!decodeRecord(first, nranks_, r)) return {};
  if (r.lostRank >= 0) return {r.code, lostHeader(r.lostRank, r.rank) + r.message, r.lostRank};
  return {r.code, "rank " + std::to_string(r.rank) + " failed: " + r.message};
}

namespace {
// Whether two ranks' descriptors of one call agree (variable-size collectives differ in count).
bool sameCall(const OpDesc& a, const OpDesc& b) {
  if (a.coll != b.coll || a.dtype != b.dtype) return false;
  if (reduces(a.coll) && a.op != b.op) return false;
  if (hasRoot(a.coll) && a.root != b.root) return false;
  const bool variable = a.coll == Collective::all_gather_v || a.coll == Collective::all_to_all_v;
  return variable || a.count == b.count;
}
}  // namespace

bool FailureBoard::readProgress(int rank, Progress& progress) {
  try {
    progress = decode(store_->get("progress/" + std::to_string(rank), kReadTimeout));
    return true;
  } catch (const Failure&) {
    return false;
  }
}

Status FailureBoard::disagreement(const OpDesc& op) {
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    Progress p;
    if (!readProgress(r, p)) continue;  // nothing published, or the store is gone: no evidence
    for (const OpDesc* other :
         {p.hasStarted ? &p.started : nullptr, p.hasCompleted ? &p.completed : nullptr}) {
      if (other && other->seq == op.seq && !sameCall(*other, op)) {
        return {Code::invalid_usage, "ranks disagree: this rank is in " + describeOp(op) +
                                         " but rank " + std::to_string(r) + " called " +
                                         describeOp(*other)};
      }
    }
  }
  return {};
}

std::string FailureBoard::attribute(const OpDesc& op) {
  std::string never, inside, silent;
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    Progress p;
    if (!readProgress(r, p)) {
      silent += (silent.empty() ? "" : ", ") + std::to_string(r);
      continue;
    }
    if (!p.hasStarted || p.started.seq < op.seq) {
      never += (never.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
               " never entered " + collectiveName(op.coll) + " #" + std::to_string(op.seq) +
               " (its last completed: " + (p.hasCompleted ? describeOp(p.completed) : "none") + ")";
    } else if (!p.hasCompleted || p.completed.seq < op.seq) {
      inside += (inside.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  std::string text = never;
  if (!inside.empty()) {
    text += (text.empty() ? "" : "; ") + std::string("ranks [") + inside + "] are inside it too";
  }
  if (!silent.empty()) {
    text +=
        (text.empty() ? "" : "; ") + std::string("ranks [") + silent + "] published no progress";
  }
  return text.empty() ? "every other rank had completed it" : text;
}

}  // namespace gyre
