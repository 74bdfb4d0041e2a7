#pragma once
// mpify: run one C++ function on N fresh processes with one blocking call.
//
//   int add(int a, int b) { return a + b + mpify::local_rank(); }
//   MPIFY_REGISTER(add);
//   int main(int argc, char** argv) {
//       mpify::init(argc, argv);
//       std::vector<int> r = mpify::ranch(3, add, 1, 2);   // {3, 4, 5}
//   }
//
// Tensors travel too: include <mpify/tensor.hpp> (it brings in ATen).
#include <mpify/error.hpp>
#include <mpify/load_source.hpp>
#include <mpify/options.hpp>
#include <mpify/process.hpp>
#include <mpify/ranch.hpp>
#include <mpify/registry.hpp>
#include <mpify/std_types.hpp>
