#include "cascader/sim/in_place_hazard.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "cascader/common/error.hpp"
#include "cascader/sim/byte_runs.hpp"

namespace cascader::sim {

namespace {

using Run = ByteRun;

// Byte runs per job: what it reads (through the operands that share the OFM's memory) and the
// OFM bytes it writes, each list split per job by offsets.
struct JobRuns {
  std::vector<TraversalBlock> jobs;
  std::vector<Run> reads, writes;
  std::vector<const char*> read_operand;
  std::vector<size_t> read_start{0}, write_start{0};  // job j: [start[j], start[j + 1])
};

// A hostile stream can declare a 1x1x1 block over a large map; the check's memory is bounded
// (real operations stay far below: a 112x112x512 map in 2x2x8 blocks is 200k jobs).
constexpr size_t kMaxJobs = size_t{1} << 20;

JobRuns job_runs(const NpuOperation& op, bool ifm, bool ifm2) {
  JobRuns r;
  const TraversalShape shape = traversal_shape(op);
  const auto blocks = [](int n, int b) { return static_cast<size_t>((n + b - 1) / b); };
  if (blocks(shape.ofm_height, shape.block_height) * blocks(shape.ofm_width, shape.block_width) *
          blocks(shape.ofm_depth, shape.block_depth) > kMaxJobs) {
    throw BinaryError("an in-place operation with too many OFM blocks to check");
  }
  r.jobs = block_traversal(shape);
  const bool with_ifm2 = ifm2 && shape.has_ifm2 && !shape.ifm2_scalar;
  for (const TraversalBlock& b : r.jobs) {
    const size_t read_first = r.reads.size();
    if (ifm) append_byte_runs(op.ifm, b.ifm, r.reads, read_first);
    r.read_operand.resize(r.reads.size(), "IFM");
    if (with_ifm2) append_byte_runs(op.ifm2, b.ifm2, r.reads, r.reads.size());
    r.read_operand.resize(r.reads.size(), "IFM2");
    r.read_start.push_back(r.reads.size());
    append_byte_runs(op.ofm, b.ofm, r.writes, r.writes.size());
    r.write_start.push_back(r.writes.size());
  }
  return r;
}

// The first read of a written byte, and how much further the OFM can move down with that
// read still hitting a written byte.
struct Conflict {
  InPlaceHazard hazard;
  int64_t clear_after = 1;
};

struct Written {
  int64_t end;
  size_t job;
};
using WrittenSet = std::map<int64_t, Written>;  // disjoint intervals by start

// Moving the OFM down by d moves every written interval [c, e) down by d: it overlaps the read
// [a, b) while c - b < d < e - a. Walking the intervals upward from the read, the shifts d in
// [0, cover) where some interval overlaps it form one run; the read conflicts all along it.
int64_t conflict_cover(const WrittenSet& written, const Run& read) {
  auto it = written.upper_bound(read.begin);
  if (it != written.begin() && std::prev(it)->second.end > read.begin) --it;
  int64_t cover = 0;
  for (; it != written.end(); ++it) {
    if (it->first - read.end >= cover) break;
    cover = std::max(cover, it->second.end - read.begin);
  }
  return cover;
}

// Replays the jobs with every OFM byte moved by `delta`; `work` counts the runs visited.
std::optional<Conflict> replay(const JobRuns& r, int64_t delta, uint64_t& work) {
  WrittenSet written;
  for (size_t j = 0; j < r.jobs.size(); ++j) {
    work += (r.read_start[j + 1] - r.read_start[j]) + (r.write_start[j + 1] - r.write_start[j]);
    std::optional<Conflict> c;
    for (size_t i = r.read_start[j]; i < r.read_start[j + 1]; ++i) {
      const Run& read = r.reads[i];
      auto it = written.lower_bound(read.end);
      if (it == written.begin()) continue;
      --it;  // the interval starting last before the read ends; disjointness makes it end last
      if (it->second.end <= read.begin) continue;
      if (!c) {
        c.emplace();
        InPlaceHazard& h = c->hazard;
        h.reader = j;
        h.writer = it->second.job;
        h.reader_ofm = r.jobs[j].ofm;
        h.writer_ofm = r.jobs[h.writer].ofm;
        h.operand = r.read_operand[i];
        h.address = static_cast<uint64_t>(std::max(read.begin, it->first));
      }
      c->clear_after = std::max(c->clear_after, conflict_cover(written, read));
    }
    if (c) return c;
    for (size_t i = r.write_start[j]; i < r.write_start[j + 1]; ++i) {
      int64_t begin = r.writes[i].begin + delta, end = r.writes[i].end + delta;
      size_t job = j;
      // Merge only overlapping intervals (an OFM that writes a byte twice), so the writer of
      // a byte stays exact in the common, disjoint case.
      auto it = written.lower_bound(begin);
      if (it != written.begin() && std::prev(it)->second.end > begin) --it;
      while (it != written.end() && it->first < end) {
        begin = std::min(begin, it->first);
        end = std::max(end, it->second.end);
        job = std::min(job, it->second.job);
        it = written.erase(it);
      }
      written.emplace(begin, Written{end, job});
    }
  }
  return std::nullopt;
}

// The lowest and one past the highest byte of an H x W x C map: strides are unsigned, so inside
// a tile addresses grow with y and x, and the last channel of the first or of the last brick
// (NHCWB16 with any brick stride) is the farthest.
Run span(const FeatureMap& fm, int H, int W, int C) {
  Run s{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  const auto corner = [&](int y0, int x0, int y1, int x1) {
    s.begin = std::min(s.begin, static_cast<int64_t>(fm.address(y0, x0, 0)));
    for (int c : {C - 1, std::min(C, 16) - 1}) {
      s.end = std::max(s.end, static_cast<int64_t>(fm.address(y1 - 1, x1 - 1, c)) + element_size(fm.dtype));
    }
  };
  const int w0 = std::min(W, fm.width0);
  corner(0, 0, std::min(H, fm.height0), w0);
  if (W > fm.width0) corner(0, fm.width0, std::min(H, fm.height1), W);
  if (H > fm.height0) corner(fm.height0, 0, H, w0);
  if (H > fm.height1 && W > fm.width0) corner(fm.height1, fm.width0, H, W);
  return s;
}

bool intersect(const Run& a, const Run& b) { return a.begin < b.end && b.begin < a.end; }

std::string box(const FeatureBox& b) {
  std::ostringstream s;
  s << "y " << b.y0 << ".." << b.y1 - 1 << ", x " << b.x0 << ".." << b.x1 - 1 << ", c " << b.c0 << ".." << b.c1 - 1;
  return s.str();
}

}  // namespace

std::string InPlaceHazard::describe() const {
  std::ostringstream s;
  s << "the OFM overwrites its " << operand << " before the NPU reads it: OFM block " << reader << " ("
    << box(reader_ofm) << ") reads " << operand << " byte 0x" << std::hex << address << std::dec << ", which OFM block " << writer << " ("
    << box(writer_ofm) << ") already wrote (the hardware would compute garbage; move the OFM at least "
    << "min_in_place_shift bytes below the " << operand << ", or out of it)";
  return s.str();
}

TraversalShape traversal_shape(const NpuOperation& op) {
  TraversalShape s;
  switch (op.kind) {
    case OpKind::Conv: s.op = TraversalOp::Convolution; break;
    case OpKind::Depthwise: s.op = TraversalOp::Depthwise; break;
    case OpKind::Pool:
      s.op = op.sub_op == static_cast<int>(PoolMode::ReduceSum) ? TraversalOp::ReduceSum : TraversalOp::Pooling;
      break;
    case OpKind::Elementwise: s.op = TraversalOp::Elementwise; break;
    case OpKind::Dma: throw InvalidArgument("a DMA has no block traversal");
    case OpKind::Resize: throw InvalidArgument("Ethos-U85 resize operations have no U55/U65 block traversal");
  }
  s.ofm_height = op.ofm.height;
  s.ofm_width = op.ofm.width;
  s.ofm_depth = op.ofm.depth;
  // The registers hold the dilated kernel extent; the traversal wants the taps.
  const cascader::Kernel k = {(op.kernel.height - 1) / op.kernel.dilation_y + 1,
                              (op.kernel.width - 1) / op.kernel.dilation_x + 1,
                              op.kernel.stride_y, op.kernel.stride_x, op.kernel.dilation_y, op.kernel.dilation_x};
  s.kernel = k;
  s.pad_top = op.padding.top;
  s.pad_left = op.padding.left;
  const bool elementwise = op.kind == OpKind::Elementwise;
  const Padding& p = op.padding;
  s.ifm_height = elementwise ? s.ofm_height : input_extent(s.ofm_height, k.stride_y, op.kernel.height, p.top, p.bottom);
  s.ifm_width = elementwise ? s.ofm_width : input_extent(s.ofm_width, k.stride_x, op.kernel.width, p.left, p.right);
  s.ifm_depth = s.op == TraversalOp::Convolution || s.op == TraversalOp::ReduceSum ? op.ifm.depth : s.ofm_depth;
  s.block_height = op.block_height;
  s.block_width = op.block_width;
  s.block_depth = op.block_depth;
  s.upscale = op.ifm_upscale ? 2 : 1;
  s.has_ifm2 = op.has_ifm2();
  s.ifm2_scalar = op.ifm2_is_scalar;
  s.broadcast_h = op.broadcast_h;
  s.broadcast_w = op.broadcast_w;
  s.broadcast_c = op.broadcast_c;
  return s;
}

std::optional<InPlaceHazard> find_in_place_hazard(const NpuOperation& op, bool ifm, bool ifm2) {
  // Most operations write far from what they read: two span tests spare them the replay.
  const TraversalShape s = traversal_shape(op);
  const Run out = span(op.ofm, s.ofm_height, s.ofm_width, s.ofm_depth);
  const auto source = [&](int extent) { return s.upscale == 2 ? (extent + 1) / 2 : extent; };
  ifm = ifm && intersect(out, span(op.ifm, source(s.ifm_height), source(s.ifm_width), s.ifm_depth));
  ifm2 = ifm2 && s.has_ifm2 && !s.ifm2_scalar &&
         intersect(out, span(op.ifm2, s.broadcast_h ? 1 : s.ofm_height, s.broadcast_w ? 1 : s.ofm_width,
                             s.broadcast_c ? 1 : s.ofm_depth));
  if (!ifm && !ifm2) return std::nullopt;
  uint64_t work = 0;
  const auto c = replay(job_runs(op, ifm, ifm2), 0, work);
  if (!c) return std::nullopt;
  return c->hazard;
}

InPlaceShift min_in_place_shift(const NpuOperation& op, uint64_t budget) {
  const JobRuns r = job_runs(op, true, false);
  if (r.reads.empty() || r.writes.empty()) return {};
  // The trailing shift: every job's lowest read above the highest byte written before it.
  const int64_t to_ifm = static_cast<int64_t>(op.ifm.base[0]) - static_cast<int64_t>(op.ofm.base[0]);
  int64_t trailing = 0, top = std::numeric_limits<int64_t>::min();
  for (size_t j = 0; j < r.jobs.size(); ++j) {
    for (size_t i = r.read_start[j]; i < r.read_start[j + 1]; ++i) {
      if (top != std::numeric_limits<int64_t>::min()) trailing = std::max(trailing, top + to_ifm - r.reads[i].begin);
    }
    for (size_t i = r.write_start[j]; i < r.write_start[j + 1]; ++i) top = std::max(top, r.writes[i].end);
  }
  const int64_t bound = (trailing + 15) / 16 * 16;
  uint64_t work = 0;
  for (int64_t shift = 0; shift < bound;) {
    if (work > budget) return {bound, false};
    const auto c = replay(r, to_ifm - shift, work);
    if (!c) return {shift, true};
    // Every shift before the conflicting read clears the written bytes has a hazard: skip them.
    shift = (shift + c->clear_after + 15) / 16 * 16;
  }
  return {bound, true};
}

}  // namespace cascader::sim
