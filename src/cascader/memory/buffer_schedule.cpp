#include "cascader/memory/buffer_schedule.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "cascader/common/error.hpp"

namespace cascader {

const char* to_string(BufferKind kind) {
  switch (kind) {
    case BufferKind::FeatureMap: return "feature_map";
    case BufferKind::StripeBuffer: return "stripe_buffer";
    case BufferKind::Weights: return "weights";
    case BufferKind::DoubleWeights: return "double_weights";
    case BufferKind::Copy: return "copy";
    case BufferKind::Lut: return "lut";
    case BufferKind::Scratch: return "scratch";
  }
  return "unknown";
}

namespace {

std::string describe(const BufferSchedule& s, int b) {
  return "buffer " + std::to_string(b) + " (" + s.buffers[static_cast<size_t>(b)].name + ")";
}

}  // namespace

ScheduleLiveRanges build_live_ranges(const BufferSchedule& schedule) {
  const auto n = static_cast<int>(schedule.buffers.size());
  const auto n_steps = static_cast<int64_t>(schedule.steps.size());
  const auto check_index = [&](int b, const std::string& where) {
    if (b < 0 || b >= n) {
      throw InvalidArgument(where + " names buffer " + std::to_string(b) + ", but there are " +
                            std::to_string(n) + " buffers");
    }
  };
  for (int b = 0; b < n; ++b) {
    const ScheduledBuffer& buf = schedule.buffers[static_cast<size_t>(b)];
    if (buf.size < 0 || buf.alignment < 1) {
      throw InvalidArgument(describe(schedule, b) + " has size " + std::to_string(buf.size) + " and alignment " +
                            std::to_string(buf.alignment) + "; need size >= 0 and alignment >= 1");
    }
  }
  // First and last touching step per buffer, and first write (for in-place legality).
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> first(static_cast<size_t>(n), kNever), last(static_cast<size_t>(n), -1);
  std::vector<int64_t> first_write(static_cast<size_t>(n), kNever);
  for (int64_t t = 0; t < n_steps; ++t) {
    const Step& step = schedule.steps[static_cast<size_t>(t)];
    for (const auto* operands : {&step.reads, &step.writes}) {
      for (int b : *operands) {
        check_index(b, "step " + std::to_string(t));
        first[static_cast<size_t>(b)] = std::min(first[static_cast<size_t>(b)], t);
        last[static_cast<size_t>(b)] = std::max(last[static_cast<size_t>(b)], t);
      }
    }
    for (int b : step.writes) first_write[static_cast<size_t>(b)] = std::min(first_write[static_cast<size_t>(b)], t);
  }
  // Resolve aliases to (root, offset).
  std::vector<int> parent(static_cast<size_t>(n), -1);
  std::vector<int64_t> parent_offset(static_cast<size_t>(n), 0);
  std::vector<const Alias*> staircases;
  for (const Alias& a : schedule.aliases) {
    check_index(a.buffer, "an alias");
    check_index(a.target, "an alias");
    if (a.kind == AliasKind::Staircase) {
      const int64_t align =
          std::max(schedule.buffers[size_t(a.buffer)].alignment, schedule.buffers[size_t(a.target)].alignment);
      if (a.buffer == a.target || a.offset != 0 || a.shift < 0 || a.shift % align != 0) {
        throw InvalidArgument("staircase " + describe(schedule, a.buffer) + " over " + describe(schedule, a.target) +
                              " needs two buffers, offset 0 and a non-negative shift, a multiple of both alignments");
      }
      staircases.push_back(&a);
      continue;
    }
    const ScheduledBuffer& buf = schedule.buffers[static_cast<size_t>(a.buffer)];
    const ScheduledBuffer& target = schedule.buffers[static_cast<size_t>(a.target)];
    if (a.buffer == a.target || parent[static_cast<size_t>(a.buffer)] >= 0) {
      throw InvalidArgument(describe(schedule, a.buffer) + " is aliased to itself or twice");
    }
    if (a.kind != AliasKind::InPlace && a.shift != 0) {
      throw InvalidArgument("only an in-place alias has a shift; " + describe(schedule, a.buffer) + " has " +
                            std::to_string(a.shift));
    }
    if (a.kind == AliasKind::InPlace) {
      if (a.offset != 0) {
        throw InvalidArgument("in-place alias " + describe(schedule, a.buffer) + " needs offset 0 (a shift below " +
                              "its target is the in-place form)");
      }
      if (a.shift < 0 || a.shift % buf.alignment != 0 || a.shift % target.alignment != 0) {
        throw InvalidArgument("in-place alias " + describe(schedule, a.buffer) + " has shift " +
                              std::to_string(a.shift) + "; it needs a non-negative multiple of both alignments");
      }
    } else if (a.offset < 0 || a.offset + buf.size > target.size || a.offset % buf.alignment != 0) {
      throw InvalidArgument(describe(schedule, a.buffer) + " (" + std::to_string(buf.size) + " B at offset " +
                            std::to_string(a.offset) + ") does not fit, aligned, inside " +
                            describe(schedule, a.target) + " (" + std::to_string(target.size) + " B)");
    }
    if (a.kind == AliasKind::Reshape && (a.offset != 0 || buf.size != target.size)) {
      throw InvalidArgument("reshape alias " + describe(schedule, a.buffer) + " must have the size of " +
                            describe(schedule, a.target) + " and offset 0");
    }
    if (a.kind == AliasKind::InPlace) {
      // The op reads the IFM and writes the OFM over it in the same step; any later use of the
      // IFM would read overwritten bytes.
      if (last[static_cast<size_t>(a.target)] > first_write[static_cast<size_t>(a.buffer)]) {
        throw InvalidArgument("in-place alias " + describe(schedule, a.buffer) + " overwrites " +
                              describe(schedule, a.target) + " at step " +
                              std::to_string(first_write[static_cast<size_t>(a.buffer)]) + ", but it is used until step " +
                              std::to_string(last[static_cast<size_t>(a.target)]));
      }
    }
    parent[static_cast<size_t>(a.buffer)] = a.target;
    parent_offset[static_cast<size_t>(a.buffer)] = a.kind == AliasKind::InPlace ? -a.shift : a.offset;
  }
  ScheduleLiveRanges out;
  out.buffer_range.assign(static_cast<size_t>(n), -1);
  out.buffer_offset.assign(static_cast<size_t>(n), 0);
  std::vector<int> root(static_cast<size_t>(n));
  for (int b = 0; b < n; ++b) {
    int r = b;
    int64_t offset = 0;
    for (int hops = 0; parent[static_cast<size_t>(r)] >= 0; ++hops) {
      if (hops > n) throw InvalidArgument("the aliases of " + describe(schedule, b) + " form a cycle");
      offset += parent_offset[static_cast<size_t>(r)];
      r = parent[static_cast<size_t>(r)];
    }
    root[static_cast<size_t>(b)] = r;
    out.buffer_offset[static_cast<size_t>(b)] = offset;
  }
  for (int b = 0; b < n; ++b) {
    if (root[static_cast<size_t>(b)] != b) continue;
    const ScheduledBuffer& buf = schedule.buffers[static_cast<size_t>(b)];
    out.buffer_range[static_cast<size_t>(b)] = static_cast<int>(out.ranges.size());
    out.range_buffer.push_back(b);
    out.ranges.push_back({first[static_cast<size_t>(b)], last[static_cast<size_t>(b)] + 1, buf.size, buf.alignment});
  }
  // Bytes of each range below its root (shifted in-place aliases) and past its end.
  std::vector<int64_t> below(out.ranges.size(), 0), extent(out.ranges.size(), 0);
  for (size_t r = 0; r < out.ranges.size(); ++r) extent[r] = out.ranges[r].size;
  for (int b = 0; b < n; ++b) {
    const int r = out.buffer_range[static_cast<size_t>(root[static_cast<size_t>(b)])];
    out.buffer_range[static_cast<size_t>(b)] = r;
    LiveRange& range = out.ranges[static_cast<size_t>(r)];
    range.start = std::min(range.start, first[static_cast<size_t>(b)]);
    range.end = std::max(range.end, last[static_cast<size_t>(b)] + 1);
    range.alignment = std::max(range.alignment, schedule.buffers[static_cast<size_t>(b)].alignment);
    const int64_t offset = out.buffer_offset[static_cast<size_t>(b)];
    below[static_cast<size_t>(r)] = std::max(below[static_cast<size_t>(r)], -offset);
    extent[static_cast<size_t>(r)] =
        std::max(extent[static_cast<size_t>(r)], offset + schedule.buffers[static_cast<size_t>(b)].size);
  }
  for (size_t r = 0; r < out.ranges.size(); ++r) out.ranges[r].size = below[r] + extent[r];
  for (int b = 0; b < n; ++b) {
    out.buffer_offset[static_cast<size_t>(b)] += below[static_cast<size_t>(out.buffer_range[static_cast<size_t>(b)])];
  }
  // A staircase ties the two ranges: the target's sits `shift` above the buffer's, each
  // measured from its own range's base (an in-place alias may have put either above its root,
  // so the lower range may be either's).
  for (const Alias* a : staircases) {
    const int lower = out.buffer_range[size_t(a->buffer)], upper = out.buffer_range[size_t(a->target)];
    const int64_t offset = out.buffer_offset[size_t(a->buffer)] + a->shift - out.buffer_offset[size_t(a->target)];
    if (lower == upper) {
      throw InvalidArgument("staircase " + describe(schedule, a->buffer) + " over " + describe(schedule, a->target) +
                            ": the two already share one range");
    }
    out.ties.push_back(offset >= 0 ? Tie{lower, upper, offset} : Tie{upper, lower, -offset});
  }
  for (size_t r = 0; r < out.ranges.size(); ++r) {
    const int b = out.range_buffer[r];
    const ScheduledBuffer& buf = schedule.buffers[static_cast<size_t>(b)];
    LiveRange& range = out.ranges[r];
    // A root may be touched only through its aliases (a concat output its producers fill).
    if (range.start == kNever) throw InvalidArgument(describe(schedule, b) + " is touched by no step, nor are its aliases");
    if (buf.kind == BufferKind::Weights || buf.kind == BufferKind::DoubleWeights) {
      range.start = std::max<int64_t>(range.start - 1, 0);
    }
    if (buf.kind == BufferKind::DoubleWeights) range.size = 2 * buf.size;
    if (buf.kind == BufferKind::Lut || buf.persistent) {
      range.start = 0;
      range.end = std::max<int64_t>(n_steps, 1);
    }
  }
  validate(out.ties, out.ranges);
  return out;
}

}  // namespace cascader
