#pragma once
// See ../../README.md. A transport's device, held by shared_ptr and identified by its dynamic
// type: the destructor is declared, not defined, so its typeinfo is LibTorch's.
namespace gloo {
namespace transport {

class UnboundBuffer;

class Device {
public:
    virtual ~Device() = 0;
};

}  // namespace transport
}  // namespace gloo
