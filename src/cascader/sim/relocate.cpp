#include "cascader/sim/relocate.hpp"

#include <array>
#include <optional>
#include <string>

#include "cascader/common/error.hpp"

namespace cascader::sim {

namespace {

constexpr int kFields = static_cast<int>(AddressField::DmaDst) + 1;

// The cmd1 opcode of each AddressField (Ethos-U55/U65 register map).
constexpr std::array<uint32_t, kFields> kOpcode = {
    0x000, 0x001, 0x002, 0x003,  // IFM_BASE0..3
    0x080, 0x081, 0x082, 0x083,  // IFM2_BASE0..3
    0x010, 0x011, 0x012, 0x013,  // OFM_BASE0..3
    0x020, 0x022, 0x090, 0x092,  // WEIGHT_BASE, SCALE_BASE, WEIGHT1_BASE, SCALE1_BASE
    0x030, 0x031,                // DMA0_SRC, DMA0_DST
};

constexpr uint64_t kAddressLimit = uint64_t{1} << 40;

std::optional<int> field_of(uint32_t opcode) {
  for (int f = 0; f < kFields; ++f) {
    if (kOpcode[static_cast<size_t>(f)] == opcode) return f;
  }
  return std::nullopt;
}

}  // namespace

std::vector<uint32_t> relocate_command_stream(const uint32_t* words, size_t count, const CommandStream& stream,
                                              const StreamSchedule& derived, const std::vector<uint64_t>& new_address,
                                              size_t stream_index) {
  if (new_address.size() != derived.placed.size()) {
    throw InvalidArgument("relocation needs one new address per buffer: got " + std::to_string(new_address.size()) +
                          " for " + std::to_string(derived.placed.size()) + " buffers");
  }
  // Per operation (by its command word): the address registers it uses, with their new values.
  std::vector<std::vector<std::pair<int, uint64_t>>> needed(stream.operations.size());
  for (const AddressUse& u : derived.uses) {
    if (u.stream != stream_index) continue;
    if (u.operation >= needed.size()) throw InvalidArgument("relocation given a stream other than the derived one");
    uint64_t moved = u.address;
    if (u.buffer >= 0) {
      const StreamBuffer& p = derived.placed[static_cast<size_t>(u.buffer)];
      moved = u.address - p.address + new_address[static_cast<size_t>(u.buffer)];
      if (u.address < p.address || moved >= kAddressLimit) {
        throw InvalidArgument("operation " + std::to_string(u.operation) + ": " + name(u.field) +
                              " would move outside the 40-bit address space");
      }
    }
    needed[u.operation].push_back({static_cast<int>(u.field), moved});
  }
  std::vector<uint32_t> out;
  out.reserve(count + 8 * stream.operations.size());
  std::array<std::optional<uint64_t>, kFields> written{};  // what the new stream last wrote
  size_t op = 0;
  for (size_t i = 0; i < count;) {
    const uint32_t w = words[i];
    const uint32_t mode = (w >> 14) & 3, opcode = w & 0x3FF;
    if (mode == 1) {
      if (i + 1 >= count) throw BinaryError("truncated cmd1 at word " + std::to_string(i));
      if (!field_of(opcode)) {  // address words are written before the operations that use them
        out.push_back(w);
        out.push_back(words[i + 1]);
      }
      i += 2;
      continue;
    }
    if (op < stream.operations.size() && stream.operations[op].word_offset == i) {
      for (const auto& [f, value] : needed[op]) {
        if (written[static_cast<size_t>(f)] == value) continue;
        out.push_back((static_cast<uint32_t>(value >> 32) << 16) | (1u << 14) | kOpcode[static_cast<size_t>(f)]);
        out.push_back(static_cast<uint32_t>(value));
        written[static_cast<size_t>(f)] = value;
      }
      ++op;
    }
    out.push_back(w);
    ++i;
  }
  return out;
}

}  // namespace cascader::sim
