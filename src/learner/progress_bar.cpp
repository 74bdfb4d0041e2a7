#include <mpify/learner/progress_bar.hpp>

#include <mpify/learner/learner.hpp>

#include <mpify/process.hpp>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>

MPIFY_BEGIN_NAMESPACE
namespace learner {
namespace {

std::atomic<HtmlDisplay> html_display{nullptr};
std::atomic<int> bars_shown{0};

}  // namespace

void set_html_display(HtmlDisplay display) { html_display = display; }

void ProgressBar::before_fit(const Learner& learner, int epochs) {
    epochs_ = epochs;
    mode_ = Mode::none;
    if (learner.rank() != 0) return;
    // A worker's display function would be the notebook's, copied by fork: only the
    // kernel process itself may talk to the front end.
    if (html_display.load() != nullptr && !mpify::is_worker()) mode_ = Mode::html;
    else if (::isatty(STDOUT_FILENO)) mode_ = Mode::terminal;
}

void ProgressBar::before_epoch(const Learner&, int epoch, std::int64_t batches) {
    if (mode_ == Mode::none) return;
    epoch_ = epoch;
    batches_ = batches;
    started_ = std::chrono::steady_clock::now();
    display_id_ = "mpify-progress-" + std::to_string(::getpid()) + "-" + std::to_string(bars_shown.fetch_add(1));
    show(0, NAN, false);
}

void ProgressBar::after_batch(const Learner&, std::int64_t batch, double loss) {
    if (mode_ == Mode::none) return;
    const bool last = batch + 1 == batches_;
    // A few updates a second are enough to watch; more would flood the front end.
    if (!last && std::chrono::steady_clock::now() - shown_ < std::chrono::milliseconds(200)) return;
    show(batch + 1, loss, true);
}

void ProgressBar::show(std::int64_t done, double loss, bool update) {
    shown_ = std::chrono::steady_clock::now();
    const double spent = std::chrono::duration<double>(shown_ - started_).count();
    const double left = done > 0 ? spent / static_cast<double>(done) * static_cast<double>(batches_ - done) : NAN;
    const std::string times = minutes_seconds(spent) + "<" + (done > 0 ? minutes_seconds(left) : "--:--");
    const std::string loss_text = std::isfinite(loss) ? std::to_string(loss).substr(0, 6) : "-";
    char counts[96];
    std::snprintf(counts, sizeof counts, "epoch %d/%d  %lld/%lld batches", epoch_, epochs_,
                  static_cast<long long>(done), static_cast<long long>(batches_));
    if (mode_ == Mode::html) {
        const std::string html = "<div style=\"font-family:monospace\"><progress value=\"" + std::to_string(done) +
                                 "\" max=\"" + std::to_string(batches_) +
                                 "\" style=\"width:300px;vertical-align:middle\"></progress> " + counts + " [" + times +
                                 ", loss " + loss_text + "]</div>";
        if (HtmlDisplay display = html_display.load()) display(html, display_id_, update);
        return;
    }
    const int width = 30;
    const int filled = batches_ > 0 ? static_cast<int>(width * done / batches_) : 0;
    std::printf("\r%s |%s%s| [%s, loss %s]", counts, std::string(filled, '#').c_str(),
                std::string(width - filled, '.').c_str(), times.c_str(), loss_text.c_str());
    if (done == batches_) std::printf("\r\033[K");  // the epoch's table line takes its place
    std::fflush(stdout);
}

}  // namespace learner
MPIFY_END_NAMESPACE
