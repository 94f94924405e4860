#include "runtime/core/failure_board.h"

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
  store_->set("progress/" + std::to_string(rank_), encode(progress_));
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

void FailureBoard::started(const OpDesc& op) {
  std::lock_guard lock(mutex_);
  progress_.started = op;
  progress_.hasStarted = true;
  dirty_ = true;
}

void FailureBoard::completed(const OpDesc& op) {
  std::lock_guard lock(mutex_);
  progress_.completed = op;
  progress_.hasCompleted = true;
  dirty_ = true;
}

void FailureBoard::publishLoop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, kPublishEvery, [&] { return stop_; });
    if (stop_ || !dirty_) continue;
    const std::string text = encode(progress_);
    dirty_ = false;
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

Status FailureBoard::report(const Status& local, const OpDesc& op) {
  const std::string mine =
      std::to_string(rank_) + "\n" + std::to_string(int(local.code)) + "\n" + local.message;
  std::string first;
  try {
    first = store_->compareSet("failure", "", mine);
  } catch (const Failure& f) {
    GYRE_LOG(warn, "rank " + std::to_string(rank_) +
                       ": cannot record the failure at the "
                       "rendezvous: " +
                       f.what());
    return local;
  }
  if (first == mine) return local;
  std::istringstream in(first);
  int rank = -1, code = int(Code::remote_error);
  std::string message;
  in >> rank >> code;
  std::getline(in, message);  // rest of the code line
  std::getline(in, message, '\0');
  if (rank < 0 || rank >= nranks_ || code <= 0 || code > int(Code::internal)) return local;
  return Status{Code(code), "rank " + std::to_string(rank_) + ": " + describeOp(op) +
                                " failed because rank " + std::to_string(rank) +
                                " failed first: " + message};
}

Status FailureBoard::recorded() {
  std::string first;
  try {
    first = store_->get("failure", std::chrono::milliseconds(0));
  } catch (const Failure&) {
    return {};  // nothing recorded (or the store is gone: the caller's deadline still holds)
  }
  std::istringstream in(first);
  int rank = -1, code = 0;
  std::string message;
  in >> rank >> code;
  std::getline(in, message);
  std::getline(in, message, '\0');
  if (rank < 0 || rank >= nranks_ || code <= 0 || code > int(Code::internal)) return {};
  return {Code(code), "rank " + std::to_string(rank) + " failed: " + message};
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
