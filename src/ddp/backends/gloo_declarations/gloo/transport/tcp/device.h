#pragma once
// See ../../../README.md. Gloo's TCP device: its primary base is transport::Device (so a
// pointer to one is a pointer to the other), and registerDescriptor adds a descriptor to its
// event loop.
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/loop.h>

#include <memory>

namespace gloo {
namespace transport {
namespace tcp {

class Device : public ::gloo::transport::Device, public std::enable_shared_from_this<Device> {
public:
    ~Device() override;
    void registerDescriptor(int fd, int events, Handler* handler);
};

}  // namespace tcp
}  // namespace transport
}  // namespace gloo
