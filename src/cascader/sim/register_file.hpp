// The register file a command-stream decoder replays: cmd0 parameters (16 bits) and cmd1
// payloads (32 bits, with the 16-bit parameter above them, which holds an address's high bits).
// Shared by every product's decoder, with the one error format they report in.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace cascader::sim {

struct RegisterFile {
  std::array<uint16_t, 1024> r0{};
  std::array<uint64_t, 1024> r1{};

  int s16(uint32_t op) const { return static_cast<int16_t>(r0[op]); }
  int u16(uint32_t op) const { return r0[op]; }
  uint32_t lo(uint32_t op) const { return static_cast<uint32_t>(r1[op] & 0xFFFFFFFFu); }
  uint32_t hi(uint32_t op) const { return static_cast<uint32_t>(r1[op] >> 32); }
};

struct FeatureMap;
struct NpuOperation;

// A feature map's region, tile bases, strides, tile sizes and zero point, from the registers
// that start at the given opcodes; addresses keep the bits `address_mask` allows (the product's
// address width).
void read_feature_map(const RegisterFile& r, FeatureMap& fm, uint32_t region, uint32_t base0, uint32_t height0,
                      uint32_t height1, uint32_t width0, uint32_t zero_point, uint64_t address_mask);

// The OFM shape, padding, IFM upscale and kernel, whose opcodes and bit positions every product
// shares; the stride's MSB field is `stride_msb_bits` wide (3 on the U55/U65, 1 on the U85).
// An elementwise operation gets no kernel or padding.
void read_geometry(const RegisterFile& r, NpuOperation& op, int stride_msb_bits, size_t offset);

// The DMA the registers describe at an NPU_OP_DMA_START (source and destination region, with
// the internal-memory bit, address and length); every product shares these opcodes. Checking
// the stride modes is the product's.
NpuOperation read_dma(const RegisterFile& r, size_t offset, uint64_t address_mask);

// Replays a stream's words into `r`: cmd1 payloads and cmd0 register writes (opcode >= 0x100)
// are stored, and each other cmd0 (an operation, a wait) is handed to `command(opcode, param,
// offset)` with the registers as they stand, until NPU_OP_STOP. Opcodes are checked with the
// product's `known_cmd0`/`known_cmd1`. Returns the words read, NPU_OP_STOP included. Throws
// BinaryError for reserved bits, unknown opcodes, a truncated cmd1 or a missing NPU_OP_STOP.
size_t replay_command_stream(const uint32_t* words, size_t count, RegisterFile& r, bool (*known_cmd0)(uint32_t),
                             bool (*known_cmd1)(uint32_t),
                             const std::function<void(uint32_t opcode, uint32_t param, size_t offset)>& command);

// Throws BinaryError "command stream word <offset>: <what>".
[[noreturn]] void command_stream_error(size_t offset, const std::string& what);
std::string hex_word(uint32_t v);

}  // namespace cascader::sim
