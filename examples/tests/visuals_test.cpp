// The Learner's pictures and progress bar (<mpify/learner/pictures.hpp>, progress_bar.hpp).
#include <mpify/learner/learner.hpp>
#include <mpify/learner/pictures.hpp>
#include <mpify/learner/progress_bar.hpp>
#include <mpify/learner/tensor_image.hpp>

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <zlib.h>

#include <algorithm>
#include <string>

using namespace mpify::learner;
using namespace mpify_examples;
using Catch::Matchers::Contains;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

std::uint32_t big_endian(const std::string& bytes, std::size_t at) {
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value = value << 8 | static_cast<std::uint8_t>(bytes[at + i]);
    return value;
}

}  // namespace

TEST_CASE("base64 encodes RFC 4648's test vectors", "[visuals]") {
    CHECK(base64("") == "");
    CHECK(base64("f") == "Zg==");
    CHECK(base64("fo") == "Zm8=");
    CHECK(base64("foo") == "Zm9v");
    CHECK(base64("foobar") == "Zm9vYmFy");
}

TEST_CASE("encode_png writes a PNG whose pixels inflate back to the image", "[visuals]") {
    Image image{3, 2, {0, 100, 255, 7, 8, 9}};
    const std::string png = encode_png(image);
    REQUIRE(png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
    CHECK(png.compare(12, 4, "IHDR") == 0);
    CHECK(big_endian(png, 16) == 3);
    CHECK(big_endian(png, 20) == 2);
    const std::size_t idat = png.find("IDAT");
    REQUIRE(idat != std::string::npos);
    const std::uint32_t length = big_endian(png, idat - 4);
    std::string raw(2 * (1 + 3), '\0');
    uLongf raw_size = raw.size();
    REQUIRE(::uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size,
                         reinterpret_cast<const Bytef*>(png.data() + idat + 4), length) == Z_OK);
    CHECK(raw == std::string("\0\x00\x64\xff\0\x07\x08\x09", 8));
    CHECK(png.compare(png.size() - 8, 4, "IEND") == 0);
    CHECK_THROWS_WITH(encode_png(Image{3, 3, {1, 2}}), Contains("needs that many pixels"));
}

TEST_CASE("plot_losses draws every batch's loss and every epoch's validation loss", "[visuals]") {
    History history;
    history.world_size = 2;
    history.epochs = {{1, 3, 0.9, 0.8, {}, 1.0}, {2, 3, 0.5, 0.4, {}, 1.0}};
    history.batch_losses = {1.0, 0.9, 0.8, 0.6, 0.5, 0.4};
    const std::string svg = plot_losses(history).text;
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK_THAT(svg, Contains("losses (2 processes)"));
    const std::size_t line = svg.find("<polyline");
    const std::string train = svg.substr(line, svg.find("/>", line) - line);
    CHECK(count(train, ",") == 6);            // one point per batch
    CHECK(count(svg, "<circle") == 2 + 1);    // one per epoch, and the legend's
}

TEST_CASE("plot_losses puts its ticks on round numbers and names both axes", "[visuals]") {
    History history;
    history.world_size = 1;
    history.epochs = {{1, 20, 2.3, 1.9, {}, 1.0}, {2, 20, 1.1, 1.0, {}, 1.0}};
    history.batch_losses.assign(40, 1.0);
    history.batch_losses.front() = 2.31;  // the highest loss: the axis rounds up to 2.5
    const std::string svg = plot_losses(history).text;
    // Loss axis: 0, 0.5, ... 2.5 (not 2.31 * 1.1 / 4 steps: 0.63, 1.27, ...).
    for (const char* label : {">0.0</text>", ">0.5</text>", ">1.0</text>", ">1.5</text>", ">2.0</text>", ">2.5</text>"})
        CHECK_THAT(svg, Contains(label));
    CHECK_THAT(svg, !Contains(">0.64</text>") && !Contains(">1.27</text>"));
    // Batch axis: 0, 10, 20, 30, 40, not only the two epoch ends.
    for (const char* label : {">0</text>", ">10</text>", ">20</text>", ">30</text>", ">40</text>"})
        CHECK_THAT(svg, Contains(label));
    CHECK_THAT(svg, Contains(">batches trained</text>") && Contains(">loss</text>"));
}

TEST_CASE("show_results captions each image with the truth and the answer, green when right and red when wrong",
          "[visuals]") {
    const Image pixel{1, 1, {255}};
    const std::string svg =
        show_results({{pixel, "Bag", "Bag"}, {pixel, "Coat", "Shirt"}, {pixel, "A & B", "A & B"}}).text;
    CHECK(count(svg, "<image") == 3);
    // "truth → predicted", as the notebooks print predictions.
    CHECK_THAT(svg, Contains(">Bag \u2192 Bag</text>"));
    CHECK_THAT(svg, Contains("fill=\"#cf222e\">Coat \u2192 Shirt</text>"));
    CHECK_THAT(svg, Contains("A &amp; B \u2192 A &amp; B"));  // escaped
    CHECK_THAT(show_batch({}).text, Contains("(no images)"));
}

TEST_CASE("image_from_tensor stretches a plane to black..white", "[visuals]") {
    const Image image = image_from_tensor(torch::tensor({-1.0f, 0.0f, 1.0f, 3.0f}).reshape({1, 2, 2}));
    CHECK(image.width == 2);
    CHECK(image.height == 2);
    CHECK(image.pixels == std::vector<std::uint8_t>{0, 64, 128, 255});
}

namespace {

struct Shown {
    std::string html, id;
    bool update;
};
std::vector<Shown> shown;  // what the notebook display was given

}  // namespace

TEST_CASE("with a notebook display, each epoch's progress bar is shown and then updated in place", "[visuals]") {
    set_html_display([](const std::string& html, const std::string& id, bool update) {
        shown.push_back({html, id, update});
    });
    LearnerOptions options;
    options.max_batches = 3;
    const auto data = [](std::int64_t n) { return DataSet{torch::randn({n, 1}), torch::randn({n, 1})}; };
    Learner learn(
        {data(128), data(64), 32, 7}, std::make_shared<torch::nn::LinearImpl>(1, 1),
        [](const at::Tensor& out, const at::Tensor& y) { return torch::mse_loss(out, y); }, {}, options);
    learn.fit(2, 0.01);
    set_html_display(nullptr);

    REQUIRE(shown.size() >= 4);  // per epoch: the empty bar, then at least the full one
    CHECK_FALSE(shown.front().update);
    CHECK_THAT(shown.front().html, Contains("epoch 1/2  0/3 batches"));
    const auto second =
        std::find_if(shown.begin(), shown.end(), [](const Shown& s) { return !s.update && &s != &shown.front(); });
    REQUIRE(second != shown.end());
    CHECK(second->id != shown.front().id);  // a new bar for the new epoch
    CHECK_THAT((second - 1)->html, Contains("epoch 1/2  3/3 batches"));
    CHECK((second - 1)->id == shown.front().id);
    CHECK_THAT(shown.back().html, Contains("<progress value=\"3\" max=\"3\""));
    CHECK(std::all_of(second, shown.end(), [&](const Shown& s) { return s.id == second->id; }));
}
