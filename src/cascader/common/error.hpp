// Typed errors of the core. Each one crosses into Python as the class of the same name in
// cascader.errors (see bindings/module.cpp), so callers can catch them precisely.
#pragma once

#include <stdexcept>
#include <string>

namespace cascader {

// Base of every error the core raises on purpose.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A caller passed values that break a documented precondition (negative size, bad index...).
struct InvalidArgument : Error {
  using Error::Error;
};

// A memory budget cannot be met; the message names the smallest budget that works if known.
struct BudgetError : Error {
  using Error::Error;
};

// An Ethos-U command stream or driver payload is malformed.
struct BinaryError : Error {
  using Error::Error;
};

}  // namespace cascader
