#pragma once
// See ../../../README.md. The TCP device's event loop calls a Handler for each registered
// descriptor with an event; this is the Handler of the Gloo inside LibTorch 2.x (since 2025 it
// is given the loop as well as the events).
namespace gloo {
namespace transport {
namespace tcp {

class Loop;

class Handler {
public:
    virtual ~Handler() = default;
    virtual void handleEvents(Loop& loop, int events) = 0;
};

}  // namespace tcp
}  // namespace transport
}  // namespace gloo
