// A decoded command stream read back as the memory planner's input: the schedule a real
// scheduler (Vela) produced, with the buffers it implies and every address that points into them.
//
// Steps are the stream's operations in order (NPU operations and DMAs), between a step 0 that
// writes the subgraph's IFMs and a last step that reads its OFMs. Per arena memory (scratch,
// scratch_fast; flash is read-only and stays put) the derivation tracks, per byte, the write
// that last stored it:
//   - an operation's OFM writes (exact byte runs of its OFM box) and a DMA's destination are
//     new writes; a later write over the same bytes starts a new version, so one address range
//     reused over time gives one buffer per version;
//   - an operation's IFM / IFM2 footprint (the box the block traversal reads, as exact byte
//     runs), its weights / scales and a DMA's source are reads; every write whose bytes one
//     read reaches joins that read's buffer (union-find), because one base address reaches
//     them all and they must move together (stripes of a cascaded OFM, rolling-buffer rows,
//     slices of a concatenation).
// A buffer is such a class of writes; its extent is the hull of its writes, its steps those of
// its writes and reads. Classes whose hulls share bytes while both are live (Vela interleaves
// strided writes) merge into one. An OFM written over an IFM the same operation reads last
// (Vela's in-place elementwise operations) becomes an in-place alias of it, at Vela's relative
// offset. Every address register an operation uses (used IFM/IFM2/OFM tiles, weights, scales,
// DMA source / destination) is recorded with its buffer, so moving a buffer moves every
// address into it: relocation (sim/relocate.hpp) needs nothing else. A whole inference is one
// schedule: every `ethos-u` operator's stream and a step per CPU operator (derive_schedule).
//
// Complexity: O(byte runs of all accesses x log(live writes)), near-linear union-find, and
// O(rounds x n^2) at worst for merging n interleaved classes (a sweep by address in practice).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cascader/memory/buffer_schedule.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::sim {

// Address registers an operation reads. Relocation rewrites these (cmd1 opcodes in the .cpp).
enum class AddressField : uint8_t {
  IfmBase0, IfmBase1, IfmBase2, IfmBase3,
  Ifm2Base0, Ifm2Base1, Ifm2Base2, Ifm2Base3,
  OfmBase0, OfmBase1, OfmBase2, OfmBase3,
  Weights, Scales, Weights1, Scales1,
  DmaSrc, DmaDst,
};

const char* name(AddressField f);

// A tensor outside the NPU at its place in an arena region: an IFM written (input = true)
// before a stream, or an OFM read (input = false) after it.
struct BoundaryTensor {
  std::string name;
  int region = 1;
  uint64_t address = 0;
  uint64_t size = 0;
  bool input = true;
};

// Per buffer of the schedule: which memory it is in and where the stream put it.
struct StreamBuffer {
  int memory = 1;        // the region number the memory is addressed through first (1 or 2)
  uint64_t address = 0;  // lowest byte (the hull of its writes)
  uint64_t size = 0;
};

struct AddressUse {
  size_t stream = 0;     // which command stream (in the order of the parts)
  size_t operation = 0;  // index into CommandStream::operations
  AddressField field = AddressField::IfmBase0;
  int buffer = 0;         // -1: flash or SHRAM, stays where it is
  uint64_t address = 0;  // the register's value in the stream
};

struct StreamSchedule {
  BufferSchedule schedule;           // steps: 0 IFMs, 1..n operations, n + 1 OFMs
  std::vector<StreamBuffer> placed;  // parallel to schedule.buffers
  std::vector<AddressUse> uses;      // every address register each operation uses
  std::vector<int> boundary_buffer;  // per BoundaryTensor: the buffer holding it
};

// One part of an inference, in order: an `ethos-u` operator's command stream, or one step
// outside the NPU (the model's inputs, a CPU operator, the outputs) that reads the tensors
// with input = false and then writes those with input = true.
struct SchedulePart {
  const CommandStream* stream = nullptr;  // null: a step outside the NPU
  const uint32_t* words = nullptr;        // the words `stream` was decoded from
  std::vector<BoundaryTensor> tensors;
};

// The schedule of a whole inference: every stream's operations and every outside step, with one
// last-writer map across them, so feature maps passing between `ethos-u` operators through the
// arena (named or not) are buffers like any other. `boundary_buffer` follows the outside steps'
// tensors in order (reads of a step before its writes).
StreamSchedule derive_schedule(const std::vector<SchedulePart>& parts, const std::array<int, 8>& memory_of_region);

// One stream between a step writing its IFMs and one reading its OFMs (boundary_buffer follows
// `boundary`). `words` is the stream `stream` was decoded from (its waits say which DMAs run beside earlier
// operations: those buffers start a step early, as BufferKind::Weights).
// `memory_of_region[r]` names the memory region r addresses: 1 or 2 for the arenas (region 2
// is given 1 when the scratch tensor is passed again as scratch_fast), -1 for memory that is
// not relocated (flash, or a region the stream must not use). Throws BinaryError when an
// operation uses a region mapped to -1 other than 0 (flash) for anything but a read of
// constants, or reads arena bytes that nothing wrote, and InvalidArgument for a boundary
// tensor outside regions 1/2.
StreamSchedule derive_stream_schedule(const CommandStream& stream, const uint32_t* words,
                                      const std::array<int, 8>& memory_of_region,
                                      const std::vector<BoundaryTensor>& boundary);

}  // namespace cascader::sim
