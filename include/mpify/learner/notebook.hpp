#pragma once
// For notebooks: shows the Learner's pictures and progress bars through the kernel's
// rich output, with xeus-cling's API (mpify's kernel provides the same), so it works in
// both kernels:
//
//   #include <mpify/learner/notebook.hpp>
//   mpify::learner::show_in_notebook();                 // live progress bars from now on
//   xcpp::display(mpify::learner::plot_losses(result.history));
//
// Only notebooks include this (it needs nlohmann/json and xcpp/xdisplay.hpp); compiled
// programs use pictures.hpp and save the pictures as files.
#include <mpify/abi.hpp>
#include <mpify/learner/pictures.hpp>
#include <mpify/learner/progress_bar.hpp>

#include <xcpp/xdisplay.hpp>

#include <string>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// An SVG shows as an image (found by xcpp::display through ADL).
inline nl::json mime_bundle_repr(const Svg& picture) { return nl::json{{"image/svg+xml", picture.text}}; }

/// HTML to show as it is (the progress bars).
struct Html {
    std::string text;  ///< the HTML, shown as it is
};
/// HTML shows as HTML (found by xcpp::display through ADL).
inline nl::json mime_bundle_repr(const Html& html) { return nl::json{{"text/html", html.text}}; }

/// Progress bars of the learners in this process show in the notebook from now on.
inline void show_in_notebook() {
    set_html_display([](const std::string& html, const std::string& display_id, bool update) {
        xcpp::display(Html{html}, display_id.c_str(), update);
    });
}

}  // namespace learner
MPIFY_END_NAMESPACE
