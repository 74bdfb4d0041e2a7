#pragma once
// A fastai-style progress bar for each epoch, on rank 0: batches done of the epoch's
// total, time spent and left, the last batch's loss.
//
//   - in a notebook that called show_in_notebook() (notebook.hpp): an HTML bar,
//     updated in place while the epoch trains;
//   - on a terminal: one line rewritten with '\r', erased when the epoch ends;
//   - otherwise (a pipe, a CI log): nothing, so logs stay readable.
#include <mpify/abi.hpp>
#include <mpify/learner/callbacks.hpp>

#include <chrono>
#include <cstdint>
#include <string>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// Shows rich output in the front end: `html` as output `display_id`, replacing it when
/// `update`. A notebook sets one (show_in_notebook() in notebook.hpp).
using HtmlDisplay = void (*)(const std::string& html, const std::string& display_id, bool update);

/// Sets the function that progress bars use in this process (nullptr: none).
void set_html_display(HtmlDisplay display);

/// The progress bar: every Learner has one from the start (see the header's comment for
/// where it shows).
class ProgressBar : public Callback {
public:
    void before_fit(const Learner& learner, int epochs) override;
    void before_epoch(const Learner& learner, int epoch, std::int64_t batches) override;
    void after_batch(const Learner& learner, std::int64_t batch, double loss) override;

private:
    enum class Mode { none, html, terminal };
    void show(std::int64_t done, double loss, bool update);

    Mode mode_ = Mode::none;
    int epoch_ = 0, epochs_ = 0;
    std::int64_t batches_ = 0;
    std::chrono::steady_clock::time_point started_, shown_;
    std::string display_id_;
};

}  // namespace learner
MPIFY_END_NAMESPACE
