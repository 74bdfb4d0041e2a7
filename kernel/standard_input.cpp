#include "standard_input.hpp"

#include <iostream>

namespace mpify_kernel {

StandardInput::StandardInput(std::function<std::optional<std::string>()> ask)
    : ask_(std::move(ask)), previous_(std::cin.rdbuf(this)) {}

StandardInput::~StandardInput() { std::cin.rdbuf(previous_); }

void StandardInput::begin_cell() {
    line_.clear();
    setg(nullptr, nullptr, nullptr);
    std::cin.clear();
}

StandardInput::int_type StandardInput::underflow() {
    if (gptr() != nullptr && gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const std::optional<std::string> typed = ask_();
    if (!typed) return traits_type::eof();
    line_ = *typed + "\n";
    setg(line_.data(), line_.data(), line_.data() + line_.size());
    return traits_type::to_int_type(*gptr());
}

}  // namespace mpify_kernel
