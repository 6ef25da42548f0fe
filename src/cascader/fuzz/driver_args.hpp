// The command line of the differential fuzz drivers: CASES SEED (tests/test_sanitizers.py).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>

namespace cascader::fuzz {

struct DriverArgs {
  long cases;
  std::mt19937_64 rng;  // every case is drawn from it: a seed replays a run
};

// The parsed arguments, or nothing after printing the usage (the driver then exits 2).
inline std::optional<DriverArgs> driver_args(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CASES SEED\n", argv[0]);
    return std::nullopt;
  }
  return DriverArgs{std::atol(argv[1]), std::mt19937_64(std::strtoull(argv[2], nullptr, 10))};
}

}  // namespace cascader::fuzz
