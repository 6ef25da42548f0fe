// The Ethos-U driver payload ("COP1"): the blob an `ethos-u` custom operator carries as its
// command-stream tensor. It is a fourcc followed by driver actions (config, NOPs, register
// reads, SHRAM dumps) and the command stream itself. Both directions of the format live
// here, so that the decoder (simulator) and the encoder (packager) share one set of
// constants. Complexity: O(words) either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cascader::sim {

// Driver action tags (low byte of an action word) and the payload's fixed words.
enum class DriverAction : uint32_t { Reserved = 0, Config = 1, CmdStream = 2, ReadApb = 3, DumpShram = 4, Nop = 5 };
constexpr uint32_t kCop1Fourcc = 0x31504F43u;  // "COP1", little-endian
// The config action's parameter: release 0, patch 1 ((patch << 4) | release), as Vela writes.
constexpr uint32_t kConfigActionParam = 0x10;
// The ID register value Vela 5.2 writes is each product's TargetFamily::id_word (fields, LSB
// first: status 4, minor 4, major 4, product 4, arch patch 4, arch minor 8, arch major 4 bits);
// the driver compares the arch fields with the NPU's.
// The command stream action's length field is 24 bits (8 in the tag's reserved byte, 16 high).
constexpr size_t kMaxCommandStreamWords = (size_t{1} << 24) - 1;

struct NpuConfig {
  uint32_t config_word = 0;
  uint32_t id_word = 0;
  int macs_per_cc = 0;    // 2^log2 from the config word
  int shram_kib = 0;      // U55/U65
  int product = 0;        // 0 Ethos-U55, 1 Ethos-U65, 2 Ethos-U85 (cascader::Product)
  int cmd_stream_version = 0;
  int axi_sram_ports_log2 = 0, axi_ext_ports_log2 = 0, weight_decoders = 1;  // U85

  // The config for a named accelerator ("ethos-u55-128"): MACs and SHRAM summed over cores,
  // as the driver checks them against the NPU's CONFIG register. id_word 0 takes the
  // product's own (TargetFamily::id_word). Throws InvalidArgument for an unknown name.
  static NpuConfig for_accelerator(const std::string& name, uint32_t id_word = 0);
  // Fills the fields from config_word (the inverse of pack()).
  void unpack();
  // The config word from the fields. Every product: MACs log2 bits 0-3, stream version 4-7,
  // product 28-31. U55/U65: SHRAM KiB in 8-15. U85: AXI SRAM ports log2 in 8-9, AXI external
  // ports log2 in 10, weight decoders log2 in 12-13.
  uint32_t pack() const;

  // Accelerator name in Vela's spelling ("ethos-u55-128"), derived from product and MACs;
  // "" when no known accelerator matches.
  std::string accelerator() const;
  int ofm_ublock_depth() const { return macs_per_cc == 32 ? 4 : 8; }
  // Ethos-U65-512 is two 256-MAC cores; the config word's SHRAM size is their sum, while DMA
  // addresses (the LUTs) are within one core's SHRAM.
  int cores() const { return product == 1 && macs_per_cc >= 512 ? 2 : 1; }
  size_t shram_bytes_per_core() const { return static_cast<size_t>(shram_kib) * 1024 / static_cast<size_t>(cores()); }
  int ifm_ublock_depth() const { return 8; }
  // The internal memory a DMA reaches through region 0x103: a core's SHRAM on the U55/U65, the
  // 2 KiB LUT RAM on the U85.
  size_t internal_dma_bytes() const { return product == 2 ? 2048 : shram_bytes_per_core(); }
};

struct DriverPayload {
  NpuConfig config;
  bool has_config = false;
  std::vector<uint32_t> command_stream;
  size_t command_stream_word = 0;  // offset of the first command word within the payload
};

// Parses a driver payload. Throws BinaryError naming the word offset when the fourcc, an
// action tag or a length is wrong, or the config names no known accelerator.
DriverPayload parse_driver_payload(const uint8_t* data, size_t size);

// Builds a driver payload as Vela does: fourcc, config action, NOPs so that the command
// stream starts on a 16-byte boundary, the command stream action and the words. Returns
// little-endian bytes. Throws InvalidArgument when the stream is empty or longer than the
// 24-bit length field allows.
std::vector<uint8_t> encode_driver_payload(const std::vector<uint32_t>& command_stream, const NpuConfig& config);

}  // namespace cascader::sim
