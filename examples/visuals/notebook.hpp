#pragma once
// For notebooks: shows the examples' pictures and progress bars through the kernel's
// rich output, with xeus-cling's API (mpify's kernel provides the same), so it works in
// both kernels:
//
//   #include <visuals/notebook.hpp>
//   mpify_examples::show_in_notebook();                 // live progress bars from now on
//   xcpp::display(mpify_examples::plot_losses(result.history));
//
// Only notebooks include this (it needs nlohmann/json and xcpp/xdisplay.hpp); compiled
// programs use visuals/pictures.hpp and save the pictures as files.
#include <visuals/pictures.hpp>
#include <visuals/progress_bar.hpp>

#include <xcpp/xdisplay.hpp>

#include <string>

namespace mpify_examples {

/// An SVG shows as an image (found by xcpp::display through ADL).
inline nl::json mime_bundle_repr(const Svg& picture) { return nl::json{{"image/svg+xml", picture.text}}; }

/// HTML to show as it is (the progress bars).
struct Html {
    std::string text;
};
inline nl::json mime_bundle_repr(const Html& html) { return nl::json{{"text/html", html.text}}; }

/// Progress bars of the learners in this process show in the notebook from now on.
inline void show_in_notebook() {
    set_html_display([](const std::string& html, const std::string& display_id, bool update) {
        xcpp::display(Html{html}, display_id.c_str(), update);
    });
}

}  // namespace mpify_examples
