// The torch.distributed operations, each as gyre calls in one gyre group on contiguous
// workspaces; results torch wants in separate or non-contiguous tensors are copied there
// when the work completes (before its Work or future reports it).
#include <numeric>

#include "gyre_backend.h"
#include "tensor_args.h"

namespace gyre_torch {

using Tensors = std::vector<at::Tensor>;

namespace {

// Torch tensors that are one flat block: `parts` concatenated (for sending).
at::Tensor concatenated(const Tensors& parts) {
  Tensors flat;
  flat.reserve(parts.size());
  for (const auto& p : parts) flat.push_back(p.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive blocks of `flat` into `parts` (for receiving).
std::function<void()> scatterInto(Tensors parts, at::Tensor flat) {
  return [parts, flat]() mutable {
    int64_t at = 0;
    for (auto& p : parts) {
      p.copy_(flat.narrow(0, at, p.numel()).view(p.sizes()));
      at += p.numel();
    }
  };
}

}  // namespace

c10::intrusive_ptr<c10d::Work> GyreBackend::broadcast(Tensors& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  checkSingle(tensors, "broadcast");
  Launch l{"broadcast"};
  l.synchronous = callerWaits(opts);
  at::Tensor ws = workspace(tensors[0], true, l.finishers);
  const auto type = typeOf(ws, "broadcast");
  const int root = int(opts.rootRank);
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreBroadcast(ws.data_ptr(), ws.data_ptr(), gyreCount(ws), type, root, comm, stream);
  };
  l.outputs = tensors;
  l.keepAlive = {ws};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::allreduce(Tensors& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  checkSingle(tensors, "all_reduce");
  Launch l{"all_reduce"};
  l.synchronous = callerWaits(opts);
  at::Tensor ws = workspace(tensors[0], true, l.finishers);
  const auto type = typeOf(ws, "all_reduce");
  const auto op = reduceOpOf(opts.reduceOp, ws, "all_reduce");
  at::Tensor in = preMultiplied(opts.reduceOp, ws, "all_reduce");
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreAllReduce(in.data_ptr(), ws.data_ptr(), gyreCount(ws), type, op, comm, stream);
  };
  l.outputs = tensors;
  l.keepAlive = {ws, in};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::allreduce_coalesced(
    Tensors& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  Launch l{"all_reduce_coalesced"};
  l.synchronous = callerWaits(opts);
  Tensors spaces;
  for (auto& t : tensors) {
    checkCpu(t, l.what);
    spaces.push_back(workspace(t, true, l.finishers));
  }
  std::vector<std::pair<gyreDataType_t, gyreRedOp_t>> kinds;
  Tensors inputs;
  for (auto& ws : spaces) {
    kinds.emplace_back(typeOf(ws, l.what), reduceOpOf(opts.reduceOp, ws, l.what));
    inputs.push_back(preMultiplied(opts.reduceOp, ws, l.what));
  }
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    for (size_t i = 0; i < spaces.size(); ++i) {
      const auto& ws = spaces[i];
      const gyreResult_t r = gyreAllReduce(inputs[i].data_ptr(), ws.data_ptr(), gyreCount(ws),
                                           kinds[i].first, kinds[i].second, comm, stream);
      if (r != gyreSuccess) return r;
    }
    return gyreSuccess;
  };
  l.outputs = tensors;
  l.keepAlive = spaces;
  l.keepAlive.insert(l.keepAlive.end(), inputs.begin(), inputs.end());
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::reduce(Tensors& tensors,
                                                   const c10d::ReduceOptions& opts) {
  checkSingle(tensors, "reduce");
  Launch l{"reduce"};
  l.synchronous = callerWaits(opts);
  const int root = int(opts.rootRank);
  const bool isRoot = root == getRank();
  at::Tensor ws = workspace(tensors[0], isRoot, l.finishers);
  const auto type = typeOf(ws, "reduce");
  const auto op = reduceOpOf(opts.reduceOp, ws, "reduce");
  at::Tensor in = preMultiplied(opts.reduceOp, ws, "reduce");
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreReduce(in.data_ptr(), isRoot ? ws.data_ptr() : nullptr, gyreCount(ws), type, op,
                      root, comm, stream);
  };
  l.outputs = tensors;
  l.keepAlive = {ws, in};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::allgather(std::vector<Tensors>& outputs,
                                                      Tensors& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  checkSingle(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1, "gyre all_gather: expects one output list");
  checkSameShape(outputs[0], inputs[0], size_t(getSize()), "all_gather");
  Launch l{"all_gather"};
  l.synchronous = callerWaits(opts);
  at::Tensor in = inputs[0].contiguous();
  at::Tensor flat = at::empty({int64_t(getSize()) * inputs[0].numel()}, in.options());
  const auto type = typeOf(in, "all_gather");
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreAllGather(in.data_ptr(), flat.data_ptr(), gyreCount(in), type, comm, stream);
  };
  l.finishers.push_back(scatterInto(outputs[0], flat));
  l.outputs = outputs[0];
  l.keepAlive = {in, flat};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  checkCpu(input, "all_gather_into_tensor");
  checkCpu(output, "all_gather_into_tensor");
  TORCH_CHECK(
      output.numel() == input.numel() * getSize() && output.scalar_type() == input.scalar_type(),
      "gyre all_gather_into_tensor: the output must hold world size x the input's "
      "elements, of its dtype");
  Launch l{"all_gather_into_tensor"};
  l.synchronous = callerWaits(opts);
  at::Tensor in = input.contiguous();
  at::Tensor out = workspace(output, true, l.finishers);
  const auto type = typeOf(in, l.what);
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreAllGather(in.data_ptr(), out.data_ptr(), gyreCount(in), type, comm, stream);
  };
  l.outputs = {output};
  l.keepAlive = {in, out};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::allgather_coalesced(
    std::vector<Tensors>& outputs, Tensors& inputs, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == size_t(getSize()),
              "gyre all_gather_coalesced: expects one output list per rank");
  Launch l{"all_gather_coalesced"};
  l.synchronous = callerWaits(opts);
  Tensors ins, flats;
  std::vector<gyreDataType_t> types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkCpu(inputs[i], l.what);
    ins.push_back(inputs[i].contiguous());
    flats.push_back(at::empty({int64_t(getSize()) * inputs[i].numel()}, ins.back().options()));
    types.push_back(typeOf(ins.back(), l.what));
    Tensors parts;
    for (auto& perRank : outputs) {
      TORCH_CHECK(perRank.size() == inputs.size(),
                  "gyre all_gather_coalesced: output lists "
                  "must match the inputs");
      parts.push_back(perRank[i]);
    }
    l.finishers.push_back(scatterInto(parts, flats.back()));
  }
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    for (size_t i = 0; i < ins.size(); ++i) {
      const gyreResult_t r = gyreAllGather(ins[i].data_ptr(), flats[i].data_ptr(),
                                           gyreCount(ins[i]), types[i], comm, stream);
      if (r != gyreSuccess) return r;
    }
    return gyreSuccess;
  };
  for (auto& perRank : outputs) l.outputs.insert(l.outputs.end(), perRank.begin(), perRank.end());
  l.keepAlive = ins;
  l.keepAlive.insert(l.keepAlive.end(), flats.begin(), flats.end());
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::gather(std::vector<Tensors>& outputs, Tensors& inputs,
                                                   const c10d::GatherOptions& opts) {
  checkSingle(inputs, "gather");
  const int root = int(opts.rootRank);
  const bool isRoot = root == getRank();
  Launch l{"gather"};
  l.synchronous = callerWaits(opts);
  at::Tensor in = inputs[0].contiguous();
  at::Tensor flat;
  if (isRoot) {
    TORCH_CHECK(outputs.size() == 1, "gyre gather: expects one output list on the root");
    checkSameShape(outputs[0], inputs[0], size_t(getSize()), "gather");
    flat = at::empty({int64_t(getSize()) * in.numel()}, in.options());
    l.finishers.push_back(scatterInto(outputs[0], flat));
    l.outputs = outputs[0];
  }
  const auto type = typeOf(in, "gather");
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreGather(in.data_ptr(), isRoot ? flat.data_ptr() : nullptr, gyreCount(in), type, root,
                      comm, stream);
  };
  l.keepAlive = {in, flat};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::scatter(Tensors& outputs, std::vector<Tensors>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  checkSingle(outputs, "scatter");
  const int root = int(opts.rootRank);
  const bool isRoot = root == getRank();
  Launch l{"scatter"};
  l.synchronous = callerWaits(opts);
  at::Tensor out = workspace(outputs[0], true, l.finishers);
  at::Tensor flat;
  if (isRoot) {
    TORCH_CHECK(inputs.size() == 1, "gyre scatter: expects one input list on the root");
    checkSameShape(inputs[0], outputs[0], size_t(getSize()), "scatter");
    flat = concatenated(inputs[0]);
  }
  const auto type = typeOf(out, "scatter");
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreScatter(isRoot ? flat.data_ptr() : nullptr, out.data_ptr(), gyreCount(out), type,
                       root, comm, stream);
  };
  l.outputs = outputs;
  l.keepAlive = {out, flat};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::reduce_scatter(Tensors& outputs,
                                                           std::vector<Tensors>& inputs,
                                                           const c10d::ReduceScatterOptions& opts) {
  checkSingle(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "gyre reduce_scatter: expects one input list");
  checkSameShape(inputs[0], outputs[0], size_t(getSize()), "reduce_scatter");
  Launch l{"reduce_scatter"};
  l.synchronous = callerWaits(opts);
  at::Tensor out = workspace(outputs[0], true, l.finishers);
  const auto type = typeOf(out, l.what);
  const auto op = reduceOpOf(opts.reduceOp, out, l.what);
  at::Tensor flat = preMultiplied(opts.reduceOp, concatenated(inputs[0]), l.what);
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreReduceScatter(flat.data_ptr(), out.data_ptr(), gyreCount(out), type, op, comm,
                             stream);
  };
  l.outputs = outputs;
  l.keepAlive = {out, flat};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkCpu(input, "reduce_scatter_tensor");
  checkCpu(output, "reduce_scatter_tensor");
  TORCH_CHECK(
      input.numel() == output.numel() * getSize() && output.scalar_type() == input.scalar_type(),
      "gyre reduce_scatter_tensor: the input must hold world size x the output's "
      "elements, of its dtype");
  Launch l{"reduce_scatter_tensor"};
  l.synchronous = callerWaits(opts);
  at::Tensor out = workspace(output, true, l.finishers);
  const auto type = typeOf(out, l.what);
  const auto op = reduceOpOf(opts.reduceOp, out, l.what);
  at::Tensor in = preMultiplied(opts.reduceOp, input.contiguous(), l.what);
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreReduceScatter(in.data_ptr(), out.data_ptr(), gyreCount(out), type, op, comm, stream);
  };
  l.outputs = {output};
  l.keepAlive = {in, out};
  return launch(std::move(l));
}

namespace {

// Element counts and displacements of the blocks of `t` split along dim 0 by `splits`
// (empty: equal blocks).
void blocksOf(const at::Tensor& t, const std::vector<int64_t>& splits, int n,
              std::vector<size_t>& counts, std::vector<size_t>& displs, const char* what) {
  counts.assign(size_t(n), 0);
  displs.assign(size_t(n), 0);
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t rowElems = rows == 0 ? 0 : int64_t(gyreCount(t)) / rows;
  if (splits.empty()) {
    TORCH_CHECK(rows % n == 0, "gyre ", what, ": dim 0 (", rows,
                ") is not divisible by the world size ", n);
  } else {
    TORCH_CHECK(int(splits.size()) == n, "gyre ", what, ": ", splits.size(), " split sizes for ", n,
                " ranks");
    TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t(0)) == rows, "gyre ", what,
                ": split sizes do not add up to dim 0 (", rows, ")");
  }
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t r = splits.empty() ? rows / n : splits[size_t(i)];
    TORCH_CHECK(r >= 0, "gyre ", what, ": negative split size");
    counts[size_t(i)] = size_t(r * rowElems);
    displs[size_t(i)] = at;
    at += counts[size_t(i)];
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> GyreBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& outputSplits,
                                                          std::vector<int64_t>& inputSplits,
                                                          const c10d::AllToAllOptions& opts) {
  checkCpu(input, "all_to_all_single");
  checkCpu(output, "all_to_all_single");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(),
              "gyre all_to_all_single: input and output dtypes differ");
  Launch l{"all_to_all_single"};
  l.synchronous = callerWaits(opts);
  at::Tensor in = input.contiguous();
  at::Tensor out = workspace(output, true, l.finishers);
  const auto type = typeOf(in, l.what);
  std::vector<size_t> sc, sd, rc, rd;
  blocksOf(in, inputSplits, getSize(), sc, sd, l.what);
  blocksOf(out, outputSplits, getSize(), rc, rd, l.what);
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreAllToAllV(in.data_ptr(), sc.data(), sd.data(), out.data_ptr(), rc.data(), rd.data(),
                         type, comm, stream);
  };
  l.outputs = {output};
  l.keepAlive = {in, out};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::alltoall(Tensors& outputs, Tensors& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  const size_t n = size_t(getSize());
  TORCH_CHECK(inputs.size() == n && outputs.size() == n,
              "gyre all_to_all: expects one input and one output tensor per rank");
  Launch l{"all_to_all"};
  l.synchronous = callerWaits(opts);
  for (auto& t : inputs) checkCpu(t, l.what);
  for (auto& t : outputs) checkCpu(t, l.what);
  at::Tensor in = concatenated(inputs);
  int64_t total = 0;
  for (auto& t : outputs) total += t.numel();
  at::Tensor out = at::empty({total}, in.options());
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t s = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    TORCH_CHECK(
        inputs[i].scalar_type() == in.scalar_type() && outputs[i].scalar_type() == in.scalar_type(),
        "gyre all_to_all: every tensor must have one dtype");
    sc[i] = gyreCount(inputs[i]);
    sd[i] = s;
    s += sc[i];
    rc[i] = gyreCount(outputs[i]);
    rd[i] = r;
    r += rc[i];
  }
  const auto type = typeOf(in, l.what);
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreAllToAllV(in.data_ptr(), sc.data(), sd.data(), out.data_ptr(), rc.data(), rd.data(),
                         type, comm, stream);
  };
  l.finishers.push_back(scatterInto(outputs, out));
  l.outputs = outputs;
  l.keepAlive = {in, out};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::send(Tensors& tensors, int dstRank, int tag) {
  checkSingle(tensors, "send");
  TORCH_CHECK(tag == 0, "gyre send: tags are not supported (got tag ", tag,
              "); sends and receives between two ranks pair up in order");
  Launch l{"send"};
  at::Tensor in = tensors[0].contiguous();
  const auto type = typeOf(in, l.what);
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreSend(in.data_ptr(), gyreCount(in), type, dstRank, comm, stream);
  };
  l.keepAlive = {in};
  return launch(std::move(l));
}

c10::intrusive_ptr<c10d::Work> GyreBackend::recv(Tensors& tensors, int srcRank, int tag) {
  checkSingle(tensors, "recv");
  TORCH_CHECK(tag == 0, "gyre recv: tags are not supported (got tag ", tag,
              "); sends and receives between two ranks pair up in order");
  Launch l{"recv"};
  at::Tensor out = workspace(tensors[0], true, l.finishers);
  const auto type = typeOf(out, l.what);
  l.call = [=](gyreComm_t comm, gyreStream_t stream) {
    return gyreRecv(out.data_ptr(), gyreCount(out), type, srcRank, comm, stream);
  };
  l.outputs = tensors;
  l.keepAlive = {out};
  return launch(std::move(l));
}

#if TORCH_VERSION_MAJOR >= 2
// FSDP's coalesced all-gathers and reduce-scatters: one gyre group of calls.
c10::intrusive_ptr<c10d::Work> GyreBackend::allgather_into_tensor_coalesced(
    Tensors& outputs, Tensors& inputs, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "gyre all_gather_into_tensor_coalesced: ", outputs.size(), " outputs for ",
              inputs.size(), " inputs");
  startCoalescing();
  try {
    for (size_t i = 0; i < inputs.size(); ++i) _allgather_base(outputs[i], inputs[i], opts);
  } catch (...) {
    endCoalescing();  // what was queued runs; the refused call is reported
    throw;
  }
  return endCoalescing();
}

c10::intrusive_ptr<c10d::Work> GyreBackend::reduce_scatter_tensor_coalesced(
    Tensors& outputs, Tensors& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "gyre reduce_scatter_tensor_coalesced: ", outputs.size(), " outputs for ",
              inputs.size(), " inputs");
  startCoalescing();
  try {
    for (size_t i = 0; i < inputs.size(); ++i) _reduce_scatter_base(outputs[i], inputs[i], opts);
  } catch (...) {
    endCoalescing();  // what was queued runs; the refused call is reported
    throw;
  }
  return endCoalescing();
}
#endif

c10::intrusive_ptr<c10d::Work> GyreBackend::barrier(const c10d::BarrierOptions& opts) {
  Launch l{"barrier"};
  l.synchronous = callerWaits(opts);
  l.call = [](gyreComm_t comm, gyreStream_t) { return gyreBarrier(comm); };
  return launch(std::move(l));
}

}  // namespace gyre_torch
