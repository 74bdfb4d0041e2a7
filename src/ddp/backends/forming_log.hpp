#pragma once
// With MPIFY_DEBUG: "rank R: <what> after N ms" from the start of a group's forming, so a
// slow start shows which round it waited in.
#include "common/clock.hpp"
#include "common/debug_log.hpp"

#include <chrono>
#include <string>

#include <fmt/format.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

class FormingLog {
public:
    explicit FormingLog(int rank) : rank_(rank) {}
    /// Notes that forming reached `what` (with MPIFY_DEBUG; else nothing).
    void reached(const std::string& what) const {
        if (!debug_wanted()) return;
        const auto elapsed = Clock::now() - start_;
        debug_line(fmt::format("rank {}: {} after {:.1f} ms", rank_, what,
                               std::chrono::duration<double, std::milli>(elapsed).count()));
    }

private:
    int rank_;
    Clock::time_point start_ = Clock::now();
};

MPIFY_END_DETAIL_NAMESPACE
