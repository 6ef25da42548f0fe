#include "cascader/sim/driver_payload.hpp"

#include <cstring>
#include <string>

#include "cascader/common/error.hpp"

namespace cascader::sim {

namespace {

enum Action : uint32_t { Reserved = 0, Config = 1, CmdStream = 2, ReadApb = 3, DumpShram = 4, Nop = 5 };

[[noreturn]] void fail(size_t word, const std::string& what) {
  throw BinaryError("driver payload word " + std::to_string(word) + ": " + what);
}

}  // namespace

const char* NpuConfig::accelerator() const {
  if (product == 1) return macs_per_cc >= 512 ? "ethos-u65-512" : "ethos-u65-256";
  switch (macs_per_cc) {
    case 32: return "ethos-u55-32";
    case 64: return "ethos-u55-64";
    case 128: return "ethos-u55-128";
    default: return "ethos-u55-256";
  }
}

DriverPayload parse_driver_payload(const uint8_t* data, size_t size) {
  if (size % 4 != 0) {
    throw BinaryError("driver payload size " + std::to_string(size) + " is not a multiple of 4 bytes");
  }
  const size_t n = size / 4;
  std::vector<uint32_t> w(n);
  if (n) std::memcpy(w.data(), data, n * 4);  // little-endian host assumed, as the NPU is
  if (n == 0 || w[0] != 0x31504F43u) fail(0, "missing the 'COP1' fourcc");
  DriverPayload p;
  size_t i = 1;
  bool have_stream = false;
  while (i < n) {
    const size_t at = i;
    const uint32_t tag = w[i++];
    const uint32_t id = tag & 0xFF;
    switch (id) {
      case Config: {
        if (i + 2 > n) fail(at, "truncated config action");
        p.config.config_word = w[i];
        p.config.id_word = w[i + 1];
        i += 2;
        const uint32_t c = p.config.config_word;
        p.config.macs_per_cc = 1 << (c & 0xF);
        p.config.cmd_stream_version = (c >> 4) & 0xF;
        p.config.shram_kib = (c >> 8) & 0xFF;
        p.config.product = (c >> 28) & 0xF;
        if (p.config.product > 1) fail(at + 1, "unknown product " + std::to_string(p.config.product));
        if (p.config.shram_kib == 0) fail(at + 1, "config word gives a SHRAM size of 0");
        p.has_config = true;
        break;
      }
      case CmdStream: {
        if (have_stream) fail(at, "a second command stream");
        const size_t len = ((tag >> 16) & 0xFFFF) | (((tag >> 8) & 0xFF) << 16);
        if (i + len > n) {
          fail(at, "command stream of " + std::to_string(len) + " words overruns the payload (" +
                       std::to_string(n - i) + " words left)");
        }
        p.command_stream.assign(w.begin() + static_cast<std::ptrdiff_t>(i),
                                w.begin() + static_cast<std::ptrdiff_t>(i + len));
        p.command_stream_word = i;
        i += len;
        have_stream = true;
        break;
      }
      case ReadApb: case DumpShram: case Nop:
        break;
      default:
        fail(at, "unknown driver action " + std::to_string(id));
    }
  }
  if (!have_stream) fail(n, "no command stream action");
  if (!p.has_config) fail(n, "no config action");
  return p;
}

}  // namespace cascader::sim
