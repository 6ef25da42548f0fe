#include "cascader/sim/stream_schedule.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <cstdint>
#include <cstdio>

#include "cascader/common/error.hpp"
#include "cascader/sim/byte_runs.hpp"
#include "cascader/sim/in_place_hazard.hpp"

namespace cascader::sim {

namespace {

constexpr int kInternalRegionBit = 0x100;  // a DMA region with this bit set is the SHRAM

// One write: an OFM, a DMA destination or a boundary IFM, at one step.
struct Write {
  int step = 0;
  int memory = 1;
  int64_t lo = 0, hi = 0;
  bool dma = false, operation = false, boundary = false;
  bool after_kernels = false;  // DMA: issued after a wait for every earlier NPU operation
};

constexpr uint32_t kKernelWait = 0x012;  // NPU_OP_KERNEL_WAIT (cmd0)

// Whether the stream waits for all outstanding NPU operations (KERNEL_WAIT 0) between the last
// NPU operation before DMA `i` and the DMA itself: then the DMA overlaps none of them.
bool waits_for_kernels(const CommandStream& stream, const uint32_t* words, size_t i) {
  const auto& ops = stream.operations;
  size_t w = 0;
  for (size_t p = i; p-- > 0;) {
    if (ops[p].kind != OpKind::Dma) {
      w = ops[p].word_offset + 1;
      break;
    }
  }
  while (w < ops[i].word_offset) {
    const uint32_t word = words[w];
    if (((word >> 14) & 3) == 1) {
      w += 2;
      continue;
    }
    if ((word & 0x3FF) == kKernelWait && (word >> 16) == 0) return true;
    ++w;
  }
  return false;
}

struct UnionFind {
  std::vector<int> parent;
  int add() {
    parent.push_back(static_cast<int>(parent.size()));
    return parent.back();
  }
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

// Per memory: disjoint byte intervals, each holding the write that last stored it.
class LastWriter {
 public:
  void store(int memory, const std::vector<ByteRun>& runs, int write) {
    auto& m = map_[memory];
    for (const ByteRun& r : runs) {
      auto it = m.lower_bound(r.begin);
      if (it != m.begin() && std::prev(it)->second.end > r.begin) --it;
      std::vector<std::pair<int64_t, Seg>> keep;
      while (it != m.end() && it->first < r.end) {
        if (it->first < r.begin) keep.push_back({it->first, {r.begin, it->second.write}});
        if (it->second.end > r.end) keep.push_back({r.end, {it->second.end, it->second.write}});
        it = m.erase(it);
      }
      for (const auto& k : keep) m.emplace(k.first, k.second);
      m.emplace(r.begin, Seg{r.end, write});
    }
  }
  // Every write whose bytes the runs reach (unsorted, may repeat).
  void reached(int memory, const std::vector<ByteRun>& runs, std::vector<int>& out) const {
    const auto found = map_.find(memory);
    if (found == map_.end()) return;
    const auto& m = found->second;
    for (const ByteRun& r : runs) {
      auto it = m.lower_bound(r.begin);
      if (it != m.begin() && std::prev(it)->second.end > r.begin) --it;
      for (; it != m.end() && it->first < r.end; ++it) out.push_back(it->second.write);
    }
  }

 private:
  struct Seg {
    int64_t end;
    int write;
  };
  std::map<int, std::map<int64_t, Seg>> map_;
};

// Tiles 0..3 a map of H x W elements uses (the hardware's tile choice in FeatureMap::address).
std::array<bool, 4> used_tiles(const FeatureMap& fm, int H, int W) {
  return {true, W > fm.width0, H > fm.height0, W > fm.width0 && H > fm.height1};
}

std::vector<ByteRun> box_runs(const FeatureMap& fm, int H, int W, int C) {
  std::vector<ByteRun> runs;
  append_byte_runs(fm, FeatureBox{0, H, 0, W, 0, C}, runs, 0);
  return runs;
}

struct Access {
  int memory = -1;
  std::vector<ByteRun> runs;
  std::vector<AddressField> fields;
  std::vector<uint64_t> addresses;
};

AddressField tile_field(AddressField base0, int tile) {
  return static_cast<AddressField>(static_cast<int>(base0) + tile);
}

class Deriver {
 public:
  Deriver(const std::array<int, 8>& memory_of_region, size_t operations)
      : memory_of_region_(memory_of_region), steps_(operations) {}

  // The command stream whose operations are being read (AddressUse::stream).
  void set_stream(size_t stream) { stream_ = stream; }

  // The memory of `region`, or -1 for flash; throws for anything else the stream cannot use.
  int memory(int region, size_t op, const char* what) const {
    if (region == 0) return -1;
    const int m = region >= 0 && region < 8 ? memory_of_region_[static_cast<size_t>(region)] : -1;
    if (m < 0) {
      throw BinaryError("operation " + std::to_string(op) + ": " + what + " uses region " + std::to_string(region) +
                        ", which is neither flash nor an arena (scratch 1, scratch_fast 2); it cannot be relocated");
    }
    return m;
  }

  Access feature_map(const FeatureMap& fm, int H, int W, int C, AddressField base0, size_t op, const char* what) const {
    Access a;
    a.memory = memory(fm.region, op, what);
    if (a.memory >= 0) a.runs = box_runs(fm, H, W, C);
    const auto tiles = used_tiles(fm, H, W);
    for (int t = 0; t < 4; ++t) {
      if (!tiles[static_cast<size_t>(t)]) continue;
      a.fields.push_back(tile_field(base0, t));
      a.addresses.push_back(fm.base[static_cast<size_t>(t)]);
    }
    return a;
  }

  // A weight, scale or DMA range; an empty one is not accessed (no address use at all).
  Access range(const AddressRange& r, AddressField field, size_t op, const char* what) const {
    Access a;
    if (!r.length) return a;
    a.fields.push_back(field);
    a.addresses.push_back(r.address);
    if (r.region & kInternalRegionBit) return a;  // the SHRAM: not memory we place
    a.memory = memory(r.region & 0x7, op, what);
    if (a.memory >= 0) a.runs.push_back({static_cast<int64_t>(r.address), static_cast<int64_t>(r.address + r.length)});
    return a;
  }

  // Address uses that stay where they are (flash, SHRAM).
  void fixed(const Access& a, size_t op) {
    for (size_t i = 0; i < a.fields.size(); ++i) pending_.push_back({stream_, op, a.fields[i], -1, a.addresses[i]});
  }

  void read(const Access& a, int step, size_t op, const char* what) {
    if (a.memory < 0) return fixed(a, op);
    std::vector<int> reached;
    last_.reached(a.memory, a.runs, reached);
    if (reached.empty()) {
      throw BinaryError("operation " + std::to_string(op) + " reads its " + what + " at region address 0x" +
                        hex(a.runs.front().begin) + ", which no earlier operation, DMA or IFM wrote");
    }
    for (int w : reached) uf_.join(w, reached.front());
    reads_.push_back({step, reached.front()});
    for (size_t i = 0; i < a.fields.size(); ++i) {
      pending_.push_back({stream_, op, a.fields[i], reached.front(), a.addresses[i]});
    }
  }

  int write(const Access& a, int step, size_t op, Write kind) {
    if (a.memory < 0) {
      fixed(a, op);
      return -1;
    }
    int64_t lo = a.runs.front().begin, hi = a.runs.front().end;
    for (const ByteRun& r : a.runs) lo = std::min(lo, r.begin), hi = std::max(hi, r.end);
    kind.step = step;
    kind.memory = a.memory;
    kind.lo = lo;
    kind.hi = hi;
    const int w = uf_.add();
    writes_.push_back(kind);
    if (kind.operation) {
      // An OFM over bytes the operation itself reads (Vela's in-place elementwise): remember
      // the pair; finish() makes it an in-place alias when the IFM is not used afterwards.
      std::vector<int> reached;
      last_.reached(a.memory, a.runs, reached);
      for (int r : reached) in_place_.push_back({step, w, r});
    }
    last_.store(a.memory, a.runs, w);
    for (size_t i = 0; i < a.fields.size(); ++i) pending_.push_back({stream_, op, a.fields[i], w, a.addresses[i]});
    return w;
  }

  // Classes whose hulls share bytes while both are live become one buffer. Vela interleaves
  // such writes (strided OFMs that transpose or interleave channels, e.g. a depth multiplier
  // lowered to strided pooling): as separate buffers each would take its whole hull. Merging
  // keeps Vela's relative layout, which is correct by construction, and covers both lifetimes.
  // (Two classes that meet at one step only are left apart.)
  // Repeats until no class changes (a merge widens hull and lifetime). O(rounds x n log n).
  void merge_interleaved() {
    for (bool changed = true; changed;) {
      changed = false;
      struct Hull {
        int root, memory;
        int64_t lo, hi, first, last;
      };
      std::map<int, Hull> hulls;
      for (size_t w = 0; w < writes_.size(); ++w) {
        const int root = uf_.find(static_cast<int>(w));
        const Write& x = writes_[w];
        auto [it, fresh] = hulls.emplace(root, Hull{root, x.memory, x.lo, x.hi, x.step, x.step});
        if (fresh) continue;
        Hull& h = it->second;
        h.lo = std::min(h.lo, x.lo), h.hi = std::max(h.hi, x.hi);
        h.first = std::min<int64_t>(h.first, x.step), h.last = std::max<int64_t>(h.last, x.step);
      }
      for (const auto& [step, w] : reads_) {
        Hull& h = hulls.at(uf_.find(w));
        h.first = std::min<int64_t>(h.first, step), h.last = std::max<int64_t>(h.last, step);
      }
      std::vector<Hull> sorted;
      for (const auto& [root, h] : hulls) sorted.push_back(h);
      std::sort(sorted.begin(), sorted.end(), [](const Hull& a, const Hull& b) {
        return std::tie(a.memory, a.lo) < std::tie(b.memory, b.lo);
      });
      for (size_t i = 0; i < sorted.size(); ++i) {
        for (size_t j = i + 1; j < sorted.size() && sorted[j].memory == sorted[i].memory && sorted[j].lo < sorted[i].hi;
             ++j) {
          const Hull &a = sorted[i], &b = sorted[j];
          // Sharing only one step is a hand-over (an in-place operation): add_in_place_aliases.
          if (a.first < b.last && b.first < a.last && uf_.find(a.root) != uf_.find(b.root)) {
            uf_.join(a.root, b.root);
            changed = true;
          }
        }
      }
    }
  }

  StreamSchedule finish(const std::vector<int>& boundary_write,
                        const std::vector<BoundaryTensor>& boundary) {
    merge_interleaved();
    StreamSchedule out;
    std::vector<int> buffer_of_root(writes_.size(), -1), buffer_of_write(writes_.size());
    struct Traits {
      bool dma = false, weights_read = false, boundary = false, concurrent_dma = false;
      int operation_writes = 0;
    };
    std::vector<Traits> traits;
    out.schedule.steps.resize(steps_);
    for (size_t w = 0; w < writes_.size(); ++w) {
      const int root = uf_.find(static_cast<int>(w));
      if (buffer_of_root[static_cast<size_t>(root)] < 0) {
        buffer_of_root[static_cast<size_t>(root)] = static_cast<int>(out.placed.size());
        out.placed.push_back({writes_[w].memory, static_cast<uint64_t>(writes_[w].lo), 0});
        out.schedule.buffers.push_back({});
        traits.push_back({});
        hull_hi_.push_back(writes_[w].hi);
      }
      const int b = buffer_of_root[static_cast<size_t>(root)];
      buffer_of_write[w] = b;
      StreamBuffer& p = out.placed[static_cast<size_t>(b)];
      if (p.memory != writes_[w].memory) {
        throw BinaryError("one base address reaches bytes in two memories (regions 1 and 2 are distinct arenas)");
      }
      p.address = std::min<uint64_t>(p.address, static_cast<uint64_t>(writes_[w].lo));
      hull_hi_[static_cast<size_t>(b)] = std::max(hull_hi_[static_cast<size_t>(b)], writes_[w].hi);
      Traits& t = traits[static_cast<size_t>(b)];
      t.dma |= writes_[w].dma;
      t.concurrent_dma |= writes_[w].dma && !writes_[w].after_kernels;
      t.boundary |= writes_[w].boundary;
      t.operation_writes += writes_[w].operation ? 1 : 0;
      out.schedule.steps[static_cast<size_t>(writes_[w].step)].writes.push_back(b);
    }
    for (const auto& [step, w] : reads_) {
      out.schedule.steps[static_cast<size_t>(step)].reads.push_back(buffer_of_write[static_cast<size_t>(w)]);
    }
    for (const AddressUse& u : pending_) {
      const int b = u.buffer < 0 ? -1 : buffer_of_write[static_cast<size_t>(u.buffer)];
      out.uses.push_back({u.stream, u.operation, u.field, b, u.address});
      const bool stream = u.field == AddressField::Weights || u.field == AddressField::Scales ||
                          u.field == AddressField::Weights1 || u.field == AddressField::Scales1;
      if (b >= 0 && stream) {
        traits[static_cast<size_t>(b)].weights_read = true;
      }
    }
    for (auto& s : out.schedule.steps) {
      for (auto* v : {&s.reads, &s.writes}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
      }
    }
    for (size_t b = 0; b < out.placed.size(); ++b) {
      StreamBuffer& p = out.placed[b];
      p.size = static_cast<uint64_t>(hull_hi_[b]) - p.address;
      ScheduledBuffer& s = out.schedule.buffers[b];
      const Traits& t = traits[b];
      // A DMA runs beside the NPU operations issued before it unless the stream waits for them
      // first: such a buffer is a Weights buffer (its range starts one step early), a DMA after
      // a kernel wait a Copy (it starts at the DMA).
      s.kind = t.dma ? (t.concurrent_dma ? BufferKind::Weights : BufferKind::Copy)
                     : (t.operation_writes > 1 && !t.boundary ? BufferKind::StripeBuffer : BufferKind::FeatureMap);
      s.size = static_cast<int64_t>(p.size);
      s.alignment = 16;
      s.name = std::string(t.weights_read ? "weights" : to_string(s.kind)) + "@" + std::to_string(p.memory) + ":0x" +
               hex(static_cast<int64_t>(p.address));
    }
    add_in_place_aliases(out, buffer_of_write);
    for (size_t i = 0; i < boundary.size(); ++i) {
      const int b = buffer_of_write[static_cast<size_t>(boundary_write[i])];
      out.boundary_buffer.push_back(b);
      if (out.schedule.buffers[static_cast<size_t>(b)].name.find(':') == 3) continue;  // named already
      out.schedule.buffers[static_cast<size_t>(b)].name = (boundary[i].input ? "ifm:" : "ofm:") + boundary[i].name;
    }
    return out;
  }

  // An OFM written over an IFM the same step reads, which nothing touches afterwards, shares
  // its memory at Vela's relative position (so the NPU's block order meets the same bytes, and
  // Vela's in-place hazard analysis carries over): an InPlace alias with shift = how far the
  // OFM starts below the IFM. An OFM starting above its IFM cannot be expressed as one and is
  // left a buffer of its own (correct, only larger).
  void add_in_place_aliases(StreamSchedule& out, const std::vector<int>& buffer_of_write) const {
    const size_t n = out.placed.size();
    std::vector<int64_t> first(n, INT64_MAX), last(n, -1), first_write(n, INT64_MAX);
    for (size_t t = 0; t < out.schedule.steps.size(); ++t) {
      const Step& st = out.schedule.steps[t];
      for (const auto* v : {&st.reads, &st.writes}) {
        for (int b : *v) {
          first[static_cast<size_t>(b)] = std::min<int64_t>(first[static_cast<size_t>(b)], static_cast<int64_t>(t));
          last[static_cast<size_t>(b)] = std::max<int64_t>(last[static_cast<size_t>(b)], static_cast<int64_t>(t));
        }
      }
      for (int b : st.writes) {
        int64_t& f = first_write[static_cast<size_t>(b)];
        f = std::min<int64_t>(f, static_cast<int64_t>(t));
      }
    }
    std::vector<bool> aliased(n, false);
    for (const InPlace& c : in_place_) {
      const auto ofm = static_cast<size_t>(buffer_of_write[static_cast<size_t>(c.ofm)]);
      const auto ifm = static_cast<size_t>(buffer_of_write[static_cast<size_t>(c.ifm)]);
      if (ofm == ifm || aliased[ofm] || first_write[ofm] != c.step || first[ofm] != c.step || last[ifm] != c.step) {
        continue;
      }
      if (out.placed[ofm].address > out.placed[ifm].address) continue;
      const auto shift = static_cast<int64_t>(out.placed[ifm].address - out.placed[ofm].address);
      if (shift % 16) continue;
      aliased[ofm] = true;
      out.schedule.aliases.push_back({static_cast<int>(ofm), static_cast<int>(ifm), 0, AliasKind::InPlace, shift});
    }
  }

  static std::string hex(int64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
  }

  int boundary_read_target(int memory, const std::vector<ByteRun>& runs) const {
    std::vector<int> reached;
    last_.reached(memory, runs, reached);
    return reached.empty() ? -1 : reached.front();
  }

  void join_all(int memory, const std::vector<ByteRun>& runs, int step) {
    std::vector<int> reached;
    last_.reached(memory, runs, reached);
    for (int w : reached) uf_.join(w, reached.front());
    if (!reached.empty()) reads_.push_back({step, reached.front()});
  }

 private:
  std::array<int, 8> memory_of_region_;
  size_t steps_;
  size_t stream_ = 0;
  LastWriter last_;
  UnionFind uf_;
  std::vector<Write> writes_;
  std::vector<std::pair<int, int>> reads_;  // (step, a write of the buffer read)
  std::vector<AddressUse> pending_;         // buffer = a write of it, until finish()
  std::vector<int64_t> hull_hi_;
  struct InPlace {
    int step, ofm, ifm;  // writes
  };
  std::vector<InPlace> in_place_;
};

}  // namespace

const char* name(AddressField f) {
  static const char* names[] = {"IFM_BASE0", "IFM_BASE1", "IFM_BASE2", "IFM_BASE3", "IFM2_BASE0", "IFM2_BASE1",
                                "IFM2_BASE2", "IFM2_BASE3", "OFM_BASE0", "OFM_BASE1", "OFM_BASE2", "OFM_BASE3",
                                "WEIGHT_BASE", "SCALE_BASE", "WEIGHT1_BASE", "SCALE1_BASE", "DMA0_SRC", "DMA0_DST"};
  return names[static_cast<int>(f)];
}

namespace {

// The arena bytes of a tensor outside the NPU, checked.
std::vector<ByteRun> tensor_runs(const BoundaryTensor& t, const std::array<int, 8>& memory_of_region, int& memory) {
  if (t.region != 1 && t.region != 2) {
    throw InvalidArgument("tensor " + t.name + " is in region " + std::to_string(t.region) +
                          "; feature maps live in the scratch arena (region 1) or scratch_fast (2)");
  }
  memory = memory_of_region[static_cast<size_t>(t.region)];
  if (memory < 0) throw InvalidArgument("tensor " + t.name + ": its region is not mapped to an arena");
  const auto end = static_cast<int64_t>(t.address + std::max<uint64_t>(t.size, 1));
  return {{static_cast<int64_t>(t.address), end}};
}

}  // namespace

StreamSchedule derive_schedule(const std::vector<SchedulePart>& parts, const std::array<int, 8>& memory_of_region) {
  size_t steps = 0;
  for (const SchedulePart& part : parts) steps += part.stream ? part.stream->operations.size() : 1;
  Deriver d(memory_of_region, steps);
  std::vector<BoundaryTensor> boundary;
  std::vector<int> boundary_write;
  int first_step = 0;
  size_t stream_index = 0;
  for (const SchedulePart& part : parts) {
    if (!part.stream) {
      // Reads first, as for an operation: a CPU operator reads its inputs, then writes.
      for (bool writes : {false, true}) {
        for (const BoundaryTensor& t : part.tensors) {
          if (t.input != writes) continue;
          int m = -1;
          Access a;
          a.runs = tensor_runs(t, memory_of_region, m);
          a.memory = m;
          int w = -1;
          if (writes) {
            Write kind;
            kind.boundary = true;
            w = d.write(a, first_step, 0, kind);
          } else {
            w = d.boundary_read_target(m, a.runs);
            if (w < 0) throw BinaryError("tensor " + t.name + ": nothing writes it before it is read");
            d.join_all(m, a.runs, first_step);
          }
          boundary.push_back(t);
          boundary_write.push_back(w);
        }
      }
      ++first_step;
      continue;
    }
    d.set_stream(stream_index++);
    const CommandStream& stream = *part.stream;
    const auto& ops = stream.operations;
    for (size_t i = 0; i < ops.size(); ++i) {
      const NpuOperation& op = ops[i];
      const int step = first_step + static_cast<int>(i);
      if (op.kind == OpKind::Dma) {
        d.read(d.range(op.dma_src, AddressField::DmaSrc, i, "DMA source"), step, i, "DMA source");
        Write kind;
        kind.dma = true;
        kind.after_kernels = waits_for_kernels(stream, part.words, i);
        d.write(d.range(op.dma_dst, AddressField::DmaDst, i, "DMA destination"), step, i, kind);
        continue;
      }
      // Reads first: an operation reads its operands before (or while) it writes its OFM.
      const TraversalShape s = traversal_shape(op);
      const auto source = [&](int extent) { return s.upscale == 2 ? (extent + 1) / 2 : extent; };
      d.read(d.feature_map(op.ifm, source(s.ifm_height), source(s.ifm_width), s.ifm_depth, AddressField::IfmBase0, i,
                           "IFM"),
             step, i, "IFM");
      if (s.has_ifm2 && !s.ifm2_scalar) {
        d.read(d.feature_map(op.ifm2, s.broadcast_h ? 1 : s.ofm_height, s.broadcast_w ? 1 : s.ofm_width,
                             s.broadcast_c ? 1 : s.ofm_depth, AddressField::Ifm2Base0, i, "IFM2"),
               step, i, "IFM2");
      }
      // Only convolutions stream weights and per-channel scales; pooling and elementwise
      // operations leave those registers as the last convolution set them, unread.
      const bool streams = op.kind == OpKind::Conv || op.kind == OpKind::Depthwise;
      if (streams) {
        d.read(d.range(op.weights, AddressField::Weights, i, "weights"), step, i, "weights");
        d.read(d.range(op.scales, AddressField::Scales, i, "scales"), step, i, "scales");
      }
      if (streams && op.parallel_mode) {
        d.read(d.range(op.weights1, AddressField::Weights1, i, "weights (core 1)"), step, i, "weights (core 1)");
        d.read(d.range(op.scales1, AddressField::Scales1, i, "scales (core 1)"), step, i, "scales (core 1)");
      }
      Write kind;
      kind.operation = true;
      d.write(d.feature_map(op.ofm, s.ofm_height, s.ofm_width, s.ofm_depth, AddressField::OfmBase0, i, "OFM"), step, i,
              kind);
    }
    first_step += static_cast<int>(ops.size());
  }
  return d.finish(boundary_write, boundary);
}

StreamSchedule derive_stream_schedule(const CommandStream& stream, const uint32_t* words,
                                      const std::array<int, 8>& memory_of_region,
                                      const std::vector<BoundaryTensor>& boundary) {
  SchedulePart ifms, ofms, npu;
  for (const BoundaryTensor& t : boundary) (t.input ? ifms : ofms).tensors.push_back(t);
  npu.stream = &stream;
  npu.words = words;
  StreamSchedule s = derive_schedule({ifms, npu, ofms}, memory_of_region);
  // boundary_buffer follows `boundary`'s order, not the parts' (IFMs, then OFMs).
  std::vector<int> by_order;
  size_t next_ifm = 0, next_ofm = ifms.tensors.size();
  for (const BoundaryTensor& t : boundary) by_order.push_back(s.boundary_buffer[t.input ? next_ifm++ : next_ofm++]);
  s.boundary_buffer = by_order;
  return s;
}

}  // namespace cascader::sim
