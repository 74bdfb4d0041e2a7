#include "pictures.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace mpify_examples {
namespace {

std::string escaped(const std::string& text) {
    std::string out;
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string number(double value, const char* format = "%.4g") {
    char text[32];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

// Axis ticks on round numbers: a step of 1, 2 or 5 times a power of ten that cuts
// [0, top] into at most `most` parts, and the top rounded up to a whole step.
struct Ticks {
    double step = 1, top = 1;
    int decimals = 0;  // enough to tell the labels apart, no more
};

Ticks round_ticks(double top, int most) {
    if (!(top > 0) || !std::isfinite(top)) top = 1;
    const double magnitude = std::pow(10.0, std::floor(std::log10(top / most)));
    Ticks ticks;
    for (double factor : {1.0, 2.0, 5.0, 10.0}) {
        ticks.step = factor * magnitude;
        if (top / ticks.step <= most) break;
    }
    ticks.top = std::ceil(top / ticks.step - 1e-9) * ticks.step;
    ticks.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(ticks.step) + 1e-9)));
    return ticks;
}

std::string svg_open(int width, int height) {
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" width=\"" +
           std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
           std::to_string(width) + " " + std::to_string(height) +
           "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

std::string text_at(double x, double y, const std::string& text, const char* anchor = "middle",
                    const char* color = "#333") {
    return "<text x=\"" + number(x) + "\" y=\"" + number(y) + "\" text-anchor=\"" + anchor + "\" fill=\"" + color +
           "\">" + escaped(text) + "</text>\n";
}

// A grid of images scaled up `scale` times, each with one caption line under it.
Svg image_grid(const std::vector<LabeledImage>& images, int columns, bool with_predictions) {
    if (images.empty()) return Svg{svg_open(200, 30) + text_at(100, 20, "(no images)") + "</svg>\n"};
    columns = std::max(1, std::min<int>(columns, static_cast<int>(images.size())));
    const int scale = 3, gap = 8, caption = 18;
    auto caption_of = [&](const LabeledImage& item) {
        return with_predictions ? item.label + " \u2192 " + item.predicted : item.label;
    };
    int tile_width = 0, tile_height = 0;
    for (const LabeledImage& item : images) {
        // Room for the caption too: about 7 px a character at 12 px sans-serif.
        tile_width =
            std::max({tile_width, item.image.width * scale, static_cast<int>(caption_of(item).size()) * 7 + 8});
        tile_height = std::max(tile_height, item.image.height * scale);
    }
    const int rows = (static_cast<int>(images.size()) + columns - 1) / columns;
    const int width = columns * (tile_width + gap) + gap;
    const int height = rows * (tile_height + caption + gap) + gap;
    std::string svg = svg_open(width, height);
    for (std::size_t i = 0; i < images.size(); ++i) {
        const LabeledImage& item = images[i];
        const int x = gap + static_cast<int>(i % columns) * (tile_width + gap);
        const int y = gap + static_cast<int>(i / columns) * (tile_height + caption + gap);
        const int w = item.image.width * scale, h = item.image.height * scale;
        const std::string data = "data:image/png;base64," + base64(encode_png(item.image));
        svg += "<image x=\"" + std::to_string(x + (tile_width - w) / 2) + "\" y=\"" + std::to_string(y) +
               "\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) +
               "\" style=\"image-rendering:pixelated\" href=\"" + data + "\" xlink:href=\"" + data + "\"/>\n";
        const double middle = x + tile_width / 2.0, baseline = y + tile_height + 14;
        const char* color = !with_predictions ? "#333" : item.predicted == item.label ? "#1a7f37" : "#cf222e";
        svg += text_at(middle, baseline, caption_of(item), "middle", color);
    }
    return Svg{svg + "</svg>\n"};
}

// Where plot_losses draws: the picture, the plot area inside it (left, top, width,
// height), and the scales of its axes.
struct LossPlot {
    static constexpr int width = 520, height = 320;
    static constexpr double left = 60, right = 20, top = 30, bottom = 45;
    static constexpr double plot_width = width - left - right, plot_height = height - top - bottom;
    Ticks x_ticks, y_ticks;

    double px(double x) const { return left + x / x_ticks.top * plot_width; }
    double py(double y) const {
        return top + plot_height - std::clamp(y, 0.0, y_ticks.top) / y_ticks.top * plot_height;
    }
};

using Points = std::vector<std::pair<double, double>>;

// The losses as points. x: batches trained so far; the training loss of batch k is at
// k, an epoch's validation loss at the end of its batches.
struct LossPoints {
    Points train, valid;
    double batches_done = 0;
};

LossPoints loss_points(const History& history) {
    LossPoints points;
    std::size_t next_batch_loss = 0;
    for (const EpochRecord& epoch : history.epochs) {
        for (std::int64_t b = 0; b < epoch.batches && next_batch_loss < history.batch_losses.size(); ++b)
            points.train.emplace_back(++points.batches_done, history.batch_losses[next_batch_loss++]);
        if (history.batch_losses.empty()) {
            points.batches_done += static_cast<double>(epoch.batches);
            points.train.emplace_back(points.batches_done, epoch.train_loss);
        }
        points.valid.emplace_back(points.batches_done, epoch.valid_loss);
    }
    return points;
}

// Axes on round numbers that hold every finite loss and every batch.
LossPlot loss_plot(const LossPoints& points) {
    double y_highest = 0;
    for (const auto& series : {points.train, points.valid})
        for (const auto& [x, y] : series)
            if (std::isfinite(y)) y_highest = std::max(y_highest, y);
    LossPlot plot;
    plot.y_ticks = round_ticks(y_highest, 5);
    plot.x_ticks = round_ticks(std::max(1.0, points.batches_done), 6);
    return plot;
}

std::string line_at(double x1, double y1, double x2, double y2, const char* style) {
    return "<line x1=\"" + number(x1) + "\" y1=\"" + number(y1) + "\" x2=\"" + number(x2) + "\" y2=\"" + number(y2) +
           "\" " + style + "/>\n";
}

// The loss axis's grid and labels, the batch axis's ticks, the epochs' boundaries (at
// `epoch_ends`), both axes' names and the plot area's frame.
std::string loss_axes(const LossPlot& plot, const Points& epoch_ends) {
    const double left = LossPlot::left, top = LossPlot::top;
    const double plot_width = LossPlot::plot_width, plot_height = LossPlot::plot_height;
    const Ticks& x_ticks = plot.x_ticks;
    const Ticks& y_ticks = plot.y_ticks;
    std::string svg;
    const std::string y_format = "%." + std::to_string(y_ticks.decimals) + "f";
    for (int i = 0; i * y_ticks.step <= y_ticks.top + y_ticks.step / 2; ++i) {  // grid and labels of the loss axis
        const double y = i * y_ticks.step;
        svg += line_at(left, plot.py(y), left + plot_width, plot.py(y), "stroke=\"#ddd\"");
        svg += text_at(left - 6, plot.py(y) + 4, number(y, y_format.c_str()), "end");
    }
    for (int i = 0; i * x_ticks.step <= x_ticks.top + x_ticks.step / 2; ++i) {  // ticks of the batch axis
        const double x = i * x_ticks.step;
        svg += line_at(plot.px(x), top + plot_height, plot.px(x), top + plot_height + 4, "stroke=\"#888\"");
        svg += text_at(plot.px(x), top + plot_height + 16, number(x, "%.0f"));
    }
    for (const auto& [x, y] : epoch_ends)  // epoch boundaries, dotted
        svg += line_at(plot.px(x), top, plot.px(x), top + plot_height, "stroke=\"#bbb\" stroke-dasharray=\"3,3\"");
    svg += text_at(left + plot_width / 2, LossPlot::height - 8, "batches trained");
    svg += "<text x=\"14\" y=\"" + number(top + plot_height / 2) + "\" text-anchor=\"middle\" fill=\"#333\" " +
           "transform=\"rotate(-90 14 " + number(top + plot_height / 2) + ")\">loss</text>\n";
    svg += "<rect x=\"" + number(left) + "\" y=\"" + number(top) + "\" width=\"" + number(plot_width) + "\" height=\"" +
           number(plot_height) + "\" fill=\"none\" stroke=\"#888\"/>\n";
    return svg;
}

// One curve through `points`, with a dot on each when `dots`.
std::string loss_curve(const LossPlot& plot, const Points& points, const char* color, bool dots) {
    std::string line = "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"1.5\" points=\"";
    for (const auto& [x, y] : points) line += number(plot.px(x)) + "," + number(plot.py(y)) + " ";
    line += "\"/>\n";
    if (dots)
        for (const auto& [x, y] : points)
            line += "<circle cx=\"" + number(plot.px(x)) + "\" cy=\"" + number(plot.py(y)) + "\" r=\"3.5\" fill=\"" +
                    color + "\"/>\n";
    return line;
}

// What each curve is, in the plot area's top right corner.
std::string loss_legend() {
    const double legend_x = LossPlot::left + LossPlot::plot_width - 120, legend_y = LossPlot::top + 14;
    std::string svg = "<line x1=\"" + number(legend_x) + "\" x2=\"" + number(legend_x + 20) + "\" y1=\"" +
                      number(legend_y - 4) + "\" y2=\"" + number(legend_y - 4) +
                      "\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n";
    svg += text_at(legend_x + 26, legend_y, "train (per batch)", "start");
    svg += "<circle cx=\"" + number(legend_x + 10) + "\" cy=\"" + number(legend_y + 12) +
           "\" r=\"3.5\" fill=\"#ff7f0e\"/>\n";
    svg += text_at(legend_x + 26, legend_y + 16, "valid (per epoch)", "start");
    return svg;
}

}  // namespace

void Svg::save(const std::string& path) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write the picture " + path + " (does its folder exist?)");
}

Svg plot_losses(const History& history) {
    const LossPoints points = loss_points(history);
    const LossPlot plot = loss_plot(points);
    std::string svg = svg_open(LossPlot::width, LossPlot::height);
    svg +=
        text_at(LossPlot::width / 2.0, 18,
                "losses (" + std::to_string(history.world_size) + " process" + (history.world_size == 1 ? ")" : "es)"));
    svg += loss_axes(plot, points.valid);
    svg += loss_curve(plot, points.train, "#1f77b4", false);
    svg += loss_curve(plot, points.valid, "#ff7f0e", true);
    svg += loss_legend();
    return Svg{svg + "</svg>\n"};
}

Svg show_batch(const std::vector<LabeledImage>& images, int columns) { return image_grid(images, columns, false); }

Svg show_results(const std::vector<LabeledImage>& images, int columns) { return image_grid(images, columns, true); }

}  // namespace mpify_examples
