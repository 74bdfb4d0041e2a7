#pragma once
// A bounded wait for a c10 future: the future of this LibTorch can only be waited for
// without a bound, and a collective's wait must look up now and then (for an interrupt,
// or for a caller's timeout).
#include <ATen/core/ivalue.h>

#include <chrono>
#include <memory>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Watches one future from its construction on (through a callback the future runs when
/// it ends, with a value or an error) and lets a thread wait for that end with a bound.
class FutureEnd {
public:
    explicit FutureEnd(c10::ivalue::Future& future);

    /// True when the future has ended, at once or within `bound`; false when it has not.
    bool wait_for(std::chrono::milliseconds bound);

private:
    struct State;
    std::shared_ptr<State> state_;  ///< shared with the callback, which may outlive this
};

MPIFY_END_DETAIL_NAMESPACE
