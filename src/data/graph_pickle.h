// A minimal reader of Python pickles (protocols 0 to 4), enough for the Planetoid files: NumPy
// arrays, SciPy CSR matrices and dicts of int lists. It never imports or runs anything: globals
// stay names, REDUCE/NEWOBJ/BUILD build inert Object values that the caller interprets. Input is
// untrusted; a fault throws an ignis::Error naming `what` and the byte offset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ignis/tensor.h"

namespace ignis::data::pickle {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum Kind { None, Bool, Int, Float, Bytes, Str, Tuple, List, Dict, Global, Object } kind = None;
  int64_t i = 0;                                       // Bool, Int
  double f = 0;                                        // Float
  std::string s;                                       // Bytes, Str (UTF-8); Global: "module.name"
  std::vector<ValuePtr> items;                         // Tuple, List; Object: its args
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // Dict; Object: items set on it
  ValuePtr callable;               // Object: the class or function it was made by
  ValuePtr state;                  // Object: the BUILD state
  std::vector<ValuePtr> appended;  // Object: items appended to it
  int depth = 1;                   // nesting depth (bounded, so that destruction cannot overflow)
  bool contained = false;  // already inside another value: then it is never modified (no cycles)
};

/// Parses a whole pickle.
ValuePtr load(const uint8_t* data, size_t size, const std::string& what);
ValuePtr load_file(const std::string& path);

/// Interpreters of the loaded values (each throws naming `what` when the value is not one).
/// A NumPy array (numeric dtype) as a float64 or int64 tensor of its shape.
Tensor to_array(const ValuePtr& v, const std::string& what);
/// A SciPy CSR (or CSC/COO given as csr_matrix state) matrix as a dense float32 tensor.
Tensor csr_to_dense(const ValuePtr& v, const std::string& what);
/// A dict (or defaultdict) of int -> list of ints, as pairs (key, each listed value).
std::vector<std::pair<int64_t, int64_t>> adjacency_dict(const ValuePtr& v, const std::string& what);

}  // namespace ignis::data::pickle
