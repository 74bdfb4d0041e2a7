#include <mpify/learner/pictures.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

MPIFY_BEGIN_NAMESPACE
namespace learner {
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

// "<image .../>" of `image` scaled `scale` times with its top left corner at (x, y).
std::string embedded_image(const Image& image, int x, int y, int scale) {
    const std::string data = "data:image/png;base64," + base64(encode_png(image));
    return "<image x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
           std::to_string(image.width * scale) + "\" height=\"" + std::to_string(image.height * scale) +
           "\" style=\"image-rendering:pixelated\" href=\"" + data + "\" xlink:href=\"" + data + "\"/>\n";
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
        svg += embedded_image(item.image, x + (tile_width - item.image.width * scale) / 2, y, scale);
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

Svg plot_confusion_matrix(const ConfusionMatrix& matrix) {
    const int classes = static_cast<int>(matrix.class_names.size());
    std::size_t longest = 0;
    for (const std::string& name : matrix.class_names) longest = std::max(longest, name.size());
    const int cell = 40, label = static_cast<int>(longest) * 7 + 12;  // about 7 px a character
    const int left = label + 24, top = 34;
    const int width = left + classes * cell + 20, height = top + classes * cell + label + 30;
    std::int64_t most = 1;
    for (const auto& row : matrix.counts)
        for (std::int64_t count : row) most = std::max(most, count);
    std::string svg = svg_open(width, height);
    svg += text_at(width / 2.0, 20, "confusion matrix (accuracy " + number(matrix.accuracy() * 100, "%.1f") + " %)");
    for (int actual = 0; actual < classes; ++actual) {
        for (int predicted = 0; predicted < classes; ++predicted) {
            const std::int64_t count =
                matrix.counts[static_cast<std::size_t>(actual)][static_cast<std::size_t>(predicted)];
            const double shade = static_cast<double>(count) / static_cast<double>(most);  // 0 white .. 1 dark blue
            const int red = static_cast<int>(247 - shade * (247 - 8)),
                      green = static_cast<int>(251 - shade * (251 - 48)),
                      blue = static_cast<int>(255 - shade * (255 - 107));
            const int x = left + predicted * cell, y = top + actual * cell;
            svg += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
                   std::to_string(cell) + "\" height=\"" + std::to_string(cell) + "\" fill=\"rgb(" +
                   std::to_string(red) + "," + std::to_string(green) + "," + std::to_string(blue) +
                   ")\" stroke=\"#fff\"/>\n";
            svg += text_at(x + cell / 2.0, y + cell / 2.0 + 4, std::to_string(count), "middle",
                           shade > 0.5 ? "#fff" : "#333");
        }
        svg += text_at(left - 6, top + actual * cell + cell / 2.0 + 4,
                       matrix.class_names[static_cast<std::size_t>(actual)], "end");
    }
    for (int predicted = 0; predicted < classes; ++predicted) {  // the answers' names, slanted under their columns
        const double x = left + predicted * cell + cell / 2.0, y = top + classes * cell + 8;
        svg += "<text x=\"" + number(x) + "\" y=\"" + number(y) + "\" text-anchor=\"end\" fill=\"#333\" " +
               "transform=\"rotate(-45 " + number(x) + " " + number(y) + ")\">" +
               escaped(matrix.class_names[static_cast<std::size_t>(predicted)]) + "</text>\n";
    }
    svg += text_at(left + classes * cell / 2.0, height - 8, "predicted");
    svg += "<text x=\"14\" y=\"" + number(top + classes * cell / 2.0) + "\" text-anchor=\"middle\" fill=\"#333\" " +
           "transform=\"rotate(-90 14 " + number(top + classes * cell / 2.0) + ")\">actual</text>\n";
    return Svg{svg + "</svg>\n"};
}

Svg plot_top_losses(const std::vector<TopLoss>& items, int columns) {
    if (items.empty()) return Svg{svg_open(200, 30) + text_at(100, 20, "(no items)") + "</svg>\n"};
    columns = std::max(1, std::min<int>(columns, static_cast<int>(items.size())));
    const int scale = 3, gap = 10, captions = 34;
    auto first_line = [](const TopLoss& item) { return item.predicted + " / " + item.actual; };
    auto second_line = [](const TopLoss& item) {
        return "loss " + number(item.loss, "%.2f") + " / p " + number(item.probability, "%.2f");
    };
    int tile_width = 0, tile_height = 0;
    for (const TopLoss& item : items) {
        tile_width = std::max({tile_width, item.image.width * scale, static_cast<int>(first_line(item).size()) * 7 + 8,
                               static_cast<int>(second_line(item).size()) * 7 + 8});
        tile_height = std::max(tile_height, item.image.height * scale);
    }
    const int rows = (static_cast<int>(items.size()) + columns - 1) / columns;
    const int width = columns * (tile_width + gap) + gap;
    const int height = 28 + rows * (tile_height + captions + gap) + gap;
    std::string svg = svg_open(width, height);
    svg += text_at(width / 2.0, 18, "predicted / actual, loss / probability");
    for (std::size_t i = 0; i < items.size(); ++i) {
        const TopLoss& item = items[i];
        const int x = gap + static_cast<int>(i % static_cast<std::size_t>(columns)) * (tile_width + gap);
        const int y = 28 + static_cast<int>(i / static_cast<std::size_t>(columns)) * (tile_height + captions + gap);
        if (item.image.width > 0)
            svg += embedded_image(item.image, x + (tile_width - item.image.width * scale) / 2, y, scale);
        const char* color = item.predicted == item.actual ? "#1a7f37" : "#cf222e";
        svg += text_at(x + tile_width / 2.0, y + tile_height + 14, first_line(item), "middle", color);
        svg += text_at(x + tile_width / 2.0, y + tile_height + 29, second_line(item), "middle", "#555");
    }
    return Svg{svg + "</svg>\n"};
}

Svg plot_lr_find(const LrFinderResult& result) {
    const int width = 520, height = 320;
    const double left = 60, right = 20, top = 30, bottom = 45;
    const double plot_width = width - left - right, plot_height = height - top - bottom;
    std::string svg = svg_open(width, height);
    svg += text_at(width / 2.0, 18, "learning rate finder");
    std::vector<std::pair<double, double>> points;  // (log10 lr, loss), finite ones
    for (std::size_t i = 0; i < std::min(result.lrs.size(), result.losses.size()); ++i)
        if (result.lrs[i] > 0 && std::isfinite(result.losses[i]))
            points.emplace_back(std::log10(result.lrs[i]), result.losses[i]);
    if (points.empty()) return Svg{svg + text_at(width / 2.0, height / 2.0, "(no losses)") + "</svg>\n"};
    double x_low = std::floor(points.front().first), x_high = std::ceil(points.back().first);
    if (x_high <= x_low) x_high = x_low + 1;
    double y_low = points.front().second, y_high = y_low;
    for (const auto& [x, y] : points) {
        y_low = std::min(y_low, y);
        y_high = std::max(y_high, y);
    }
    // A diverging tail would flatten the rest: show up to twice the curve's first loss.
    y_high = std::min(y_high, std::max(points.front().second * 2, y_low * 1.5));
    if (y_high <= y_low) y_high = y_low + 1;
    const double margin = (y_high - y_low) * 0.05;
    y_low -= margin;
    y_high += margin;
    auto px = [&](double x) { return left + (x - x_low) / (x_high - x_low) * plot_width; };
    auto py = [&](double y) {
        return top + plot_height - (std::clamp(y, y_low, y_high) - y_low) / (y_high - y_low) * plot_height;
    };
    for (int decade = static_cast<int>(x_low); decade <= static_cast<int>(x_high); ++decade) {
        svg += line_at(px(decade), top, px(decade), top + plot_height, "stroke=\"#eee\"");
        svg += text_at(px(decade), top + plot_height + 16, "1e" + std::to_string(decade));
    }
    for (int i = 0; i <= 4; ++i) {
        const double y = y_low + (y_high - y_low) * i / 4;
        svg += line_at(left, py(y), left + plot_width, py(y), "stroke=\"#ddd\"");
        svg += text_at(left - 6, py(y) + 4, number(y, "%.3g"), "end");
    }
    svg += text_at(left + plot_width / 2, height - 8, "learning rate (log scale)");
    svg += "<text x=\"14\" y=\"" + number(top + plot_height / 2) + "\" text-anchor=\"middle\" fill=\"#333\" " +
           "transform=\"rotate(-90 14 " + number(top + plot_height / 2) + ")\">loss</text>\n";
    svg += "<rect x=\"" + number(left) + "\" y=\"" + number(top) + "\" width=\"" + number(plot_width) + "\" height=\"" +
           number(plot_height) + "\" fill=\"none\" stroke=\"#888\"/>\n";
    std::string line = "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"";
    for (const auto& [x, y] : points) line += number(px(x)) + "," + number(py(y)) + " ";
    svg += line + "\"/>\n";
    // The suggestions: a dot on the curve at each, its rate beside it.
    auto mark = [&](double lr, const std::string& label, const char* color, double dy) {
        if (!(lr > 0)) return;
        const double x = std::log10(lr);
        auto nearest = std::min_element(points.begin(), points.end(), [&](const auto& a, const auto& b) {
            return std::abs(a.first - x) < std::abs(b.first - x);
        });
        svg += "<circle cx=\"" + number(px(x)) + "\" cy=\"" + number(py(nearest->second)) + "\" r=\"5\" fill=\"" +
               color + "\"/>\n";
        svg += text_at(px(x) + 8, py(nearest->second) + dy, label + " " + number(lr, "%.2g"), "start", color);
    };
    mark(result.suggested_lr, "valley", "#cf222e", -8);
    mark(result.minimum_lr, "minimum", "#9a6700", 16);
    return Svg{svg + "</svg>\n"};
}

}  // namespace learner
MPIFY_END_NAMESPACE
