#pragma once
// See ../../README.md. ProcessGroupGloo.hpp defines GlooStore, an adapter of c10d's store to
// this interface, which LibTorch constructs inside its own code; mpify never does, so only the
// functions GlooStore overrides without the newer "v2" extensions are declared (and
// GLOO_STORE_HAS_STORE_V2 stays undefined).
#include <chrono>
#include <string>
#include <vector>

namespace gloo {
namespace rendezvous {

class Store {
public:
    virtual ~Store() = default;
    virtual void set(const std::string& key, const std::vector<char>& data) = 0;
    virtual std::vector<char> get(const std::string& key) = 0;
    virtual void wait(const std::vector<std::string>& keys) = 0;
    virtual void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) = 0;
};

}  // namespace rendezvous
}  // namespace gloo
