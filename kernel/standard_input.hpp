#pragma once
// std::cin in a cell reads what the user types in the notebook: each line it needs is
// asked for with Jupyter's input_request (as in xeus-cling). When the front end allows
// no input (nbconvert, a silent execution), std::cin is at end of file.
#include <functional>
#include <optional>
#include <streambuf>
#include <string>

namespace mpify_kernel {

class StandardInput : public std::streambuf {
public:
    /// `ask` returns one line typed by the user (without its newline), or nothing.
    explicit StandardInput(std::function<std::optional<std::string>()> ask);
    /// Puts std::cin's own buffer back.
    ~StandardInput() override;
    StandardInput(const StandardInput&) = delete;
    StandardInput& operator=(const StandardInput&) = delete;

    /// A cell begins: what an earlier cell left unread is dropped, and std::cin is good.
    void begin_cell();

protected:
    int_type underflow() override;

private:
    std::function<std::optional<std::string>()> ask_;
    std::string line_;
    std::streambuf* previous_;
};

}  // namespace mpify_kernel
