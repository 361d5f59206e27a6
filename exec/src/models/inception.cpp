// Inception-v3 as torchvision's inception_v3(aux_logits=True, transform_input=False), weights
// random: BasicConv2d = conv (no bias) + BatchNorm (eps 1e-3) + ReLU, input N x 3 x 299 x 299
// (any H, W >= 75 run), 1000 classes. The AuxLogits head is built (and listed after Mixed_6e,
// where it runs in training) but inference does not run it; training_outputs() runs it.

#include <vector>

#include "models/zoo_base.hpp"
#include "psw/common/error.hpp"

namespace psw::exec::detail {
namespace {

namespace nn = torch::nn;

constexpr double kInceptionBnEps = 1e-3;
constexpr std::int64_t kInceptionImage = 299;     // example_input
constexpr std::int64_t kInceptionMinImage = 75;   // forward: H, W >= 75, as torchvision says
// Training runs AuxLogits, whose 5 x 5 convolution after a 5 x 5 / 3 pooling needs Mixed_6e
// at least 17 x 17: images at least 291 x 291.
constexpr std::int64_t kMinTrainingImage = 291;

struct Basic {
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
};

struct BlockA {  // InceptionA
  Basic b1x1, b5x5_1, b5x5_2, b3dbl_1, b3dbl_2, b3dbl_3, pool;
};
struct BlockB {  // InceptionB
  Basic b3x3, b3dbl_1, b3dbl_2, b3dbl_3;
};
struct BlockC {  // InceptionC
  Basic b1x1, b7_1, b7_2, b7_3, b7dbl_1, b7dbl_2, b7dbl_3, b7dbl_4, b7dbl_5, pool;
};
struct BlockD {  // InceptionD
  Basic b3_1, b3_2, b7x3_1, b7x3_2, b7x3_3, b7x3_4;
};
struct BlockE {  // InceptionE
  Basic b1x1, b3_1, b3_2a, b3_2b, b3dbl_1, b3dbl_2, b3dbl_3a, b3dbl_3b, pool;
};
struct Aux {  // InceptionAux (training only)
  Basic conv0, conv1;
  nn::Linear fc{nullptr};
};

class InceptionV3 final : public ZooBase {
 public:
  InceptionV3() : ZooBase("inception_v3") {
    c1a_ = basic("Conv2d_1a_3x3", 3, 32, {3, 3}, {2, 2});
    c2a_ = basic("Conv2d_2a_3x3", 32, 32, {3, 3});
    c2b_ = basic("Conv2d_2b_3x3", 32, 64, {3, 3}, {1, 1}, {1, 1});
    c3b_ = basic("Conv2d_3b_1x1", 64, 80, {1, 1});
    c4a_ = basic("Conv2d_4a_3x3", 80, 192, {3, 3});
    m5b_ = block_a("Mixed_5b", 192, 32);
    m5c_ = block_a("Mixed_5c", 256, 64);
    m5d_ = block_a("Mixed_5d", 288, 64);
    m6a_ = block_b("Mixed_6a", 288);
    m6b_ = block_c("Mixed_6b", 768, 128);
    m6c_ = block_c("Mixed_6c", 768, 160);
    m6d_ = block_c("Mixed_6d", 768, 160);
    m6e_ = block_c("Mixed_6e", 768, 192);
    aux_.conv0 = basic("AuxLogits.conv0", 768, 128, {1, 1}, {1, 1}, {0, 0}, true);
    aux_.conv1 = basic("AuxLogits.conv1", 128, 768, {5, 5}, {1, 1}, {0, 0}, true);
    aux_.fc = linear("AuxLogits.fc", 768, 1000, true);
    m7a_ = block_d("Mixed_7a", 768);
    m7b_ = block_e("Mixed_7b", 1280);
    m7c_ = block_e("Mixed_7c", 2048);
    fc_ = linear("fc", 2048, 1000);
    initialise(/*embedding_std=*/0.0);
  }

  torch::Tensor example_input(int batch, std::uint64_t seed) const override {
    return random_images(batch, kInceptionImage, seed);
  }

  std::vector<torch::Tensor> outputs(const torch::Tensor& input, Cursor& c) override {
    check_image(input, c.training() ? kMinTrainingImage : kInceptionMinImage);
    if (c.training() && input.size(0) < 2) {
      // AuxLogits.conv1's BatchNorm sees 1 x 1 maps: batch statistics need two samples.
      throw InputError("inception_v3: training needs a batch of at least 2 (AuxLogits' BatchNorm on 1 x 1 maps)");
    }
    torch::Tensor x = run(c, c1a_, input);
    x = run(c, c2a_, x);
    x = run(c, c2b_, x);
    x = torch::max_pool2d(x, {3, 3}, {2, 2});
    x = run(c, c3b_, x);
    x = run(c, c4a_, x);
    x = torch::max_pool2d(x, {3, 3}, {2, 2});
    x = run(c, m5b_, x);
    x = run(c, m5c_, x);
    x = run(c, m5d_, x);
    x = run(c, m6a_, x);
    x = run(c, m6b_, x);
    x = run(c, m6c_, x);
    x = run(c, m6d_, x);
    x = run(c, m6e_, x);
    // AuxLogits: training only (in inference the cursor skips its layers).
    torch::Tensor aux;
    if (c.training()) {
      aux = torch::avg_pool2d(x, {5, 5}, {3, 3});
      aux = run(c, aux_.conv1, run(c, aux_.conv0, aux));
      aux = torch::adaptive_avg_pool2d(aux, {1, 1}).flatten(1);
      aux = step(c, aux_.fc, aux);
    }
    x = run(c, m7a_, x);
    x = run(c, m7b_, x);
    x = run(c, m7c_, x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);  // then dropout: identity in eval
    x = step(c, fc_, x);
    c.finish();
    if (aux.defined()) return {x, aux};
    return {x};
  }

 private:
  Basic basic(const std::string& path, std::int64_t in, std::int64_t out, Pair kernel,
              Pair stride = {1, 1}, Pair padding = {0, 0}, bool training_only = false) {
    Basic b;
    b.conv = conv(path + ".conv", in, out, kernel, stride, padding, training_only);
    b.bn = bn(path + ".bn", out, kInceptionBnEps, training_only);
    return b;
  }

  BlockA block_a(const std::string& p, std::int64_t in, std::int64_t pool_features) {
    BlockA b;
    b.b1x1 = basic(p + ".branch1x1", in, 64, {1, 1});
    b.b5x5_1 = basic(p + ".branch5x5_1", in, 48, {1, 1});
    b.b5x5_2 = basic(p + ".branch5x5_2", 48, 64, {5, 5}, {1, 1}, {2, 2});
    b.b3dbl_1 = basic(p + ".branch3x3dbl_1", in, 64, {1, 1});
    b.b3dbl_2 = basic(p + ".branch3x3dbl_2", 64, 96, {3, 3}, {1, 1}, {1, 1});
    b.b3dbl_3 = basic(p + ".branch3x3dbl_3", 96, 96, {3, 3}, {1, 1}, {1, 1});
    b.pool = basic(p + ".branch_pool", in, pool_features, {1, 1});
    return b;
  }

  BlockB block_b(const std::string& p, std::int64_t in) {
    BlockB b;
    b.b3x3 = basic(p + ".branch3x3", in, 384, {3, 3}, {2, 2});
    b.b3dbl_1 = basic(p + ".branch3x3dbl_1", in, 64, {1, 1});
    b.b3dbl_2 = basic(p + ".branch3x3dbl_2", 64, 96, {3, 3}, {1, 1}, {1, 1});
    b.b3dbl_3 = basic(p + ".branch3x3dbl_3", 96, 96, {3, 3}, {2, 2});
    return b;
  }

  BlockC block_c(const std::string& p, std::int64_t in, std::int64_t c7) {
    BlockC b;
    b.b1x1 = basic(p + ".branch1x1", in, 192, {1, 1});
    b.b7_1 = basic(p + ".branch7x7_1", in, c7, {1, 1});
    b.b7_2 = basic(p + ".branch7x7_2", c7, c7, {1, 7}, {1, 1}, {0, 3});
    b.b7_3 = basic(p + ".branch7x7_3", c7, 192, {7, 1}, {1, 1}, {3, 0});
    b.b7dbl_1 = basic(p + ".branch7x7dbl_1", in, c7, {1, 1});
    b.b7dbl_2 = basic(p + ".branch7x7dbl_2", c7, c7, {7, 1}, {1, 1}, {3, 0});
    b.b7dbl_3 = basic(p + ".branch7x7dbl_3", c7, c7, {1, 7}, {1, 1}, {0, 3});
    b.b7dbl_4 = basic(p + ".branch7x7dbl_4", c7, c7, {7, 1}, {1, 1}, {3, 0});
    b.b7dbl_5 = basic(p + ".branch7x7dbl_5", c7, 192, {1, 7}, {1, 1}, {0, 3});
    b.pool = basic(p + ".branch_pool", in, 192, {1, 1});
    return b;
  }

  BlockD block_d(const std::string& p, std::int64_t in) {
    BlockD b;
    b.b3_1 = basic(p + ".branch3x3_1", in, 192, {1, 1});
    b.b3_2 = basic(p + ".branch3x3_2", 192, 320, {3, 3}, {2, 2});
    b.b7x3_1 = basic(p + ".branch7x7x3_1", in, 192, {1, 1});
    b.b7x3_2 = basic(p + ".branch7x7x3_2", 192, 192, {1, 7}, {1, 1}, {0, 3});
    b.b7x3_3 = basic(p + ".branch7x7x3_3", 192, 192, {7, 1}, {1, 1}, {3, 0});
    b.b7x3_4 = basic(p + ".branch7x7x3_4", 192, 192, {3, 3}, {2, 2});
    return b;
  }

  BlockE block_e(const std::string& p, std::int64_t in) {
    BlockE b;
    b.b1x1 = basic(p + ".branch1x1", in, 320, {1, 1});
    b.b3_1 = basic(p + ".branch3x3_1", in, 384, {1, 1});
    b.b3_2a = basic(p + ".branch3x3_2a", 384, 384, {1, 3}, {1, 1}, {0, 1});
    b.b3_2b = basic(p + ".branch3x3_2b", 384, 384, {3, 1}, {1, 1}, {1, 0});
    b.b3dbl_1 = basic(p + ".branch3x3dbl_1", in, 448, {1, 1});
    b.b3dbl_2 = basic(p + ".branch3x3dbl_2", 448, 384, {3, 3}, {1, 1}, {1, 1});
    b.b3dbl_3a = basic(p + ".branch3x3dbl_3a", 384, 384, {1, 3}, {1, 1}, {0, 1});
    b.b3dbl_3b = basic(p + ".branch3x3dbl_3b", 384, 384, {3, 1}, {1, 1}, {1, 0});
    b.pool = basic(p + ".branch_pool", in, 192, {1, 1});
    return b;
  }

  static torch::Tensor run(Cursor& c, Basic& b, const torch::Tensor& x) {
    return torch::relu(step(c, b.bn, step(c, b.conv, x)));
  }

  static torch::Tensor avg3(const torch::Tensor& x) {  // avg_pool2d(3, stride 1, padding 1)
    return torch::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1});
  }

  static torch::Tensor run(Cursor& c, BlockA& b, const torch::Tensor& x) {
    torch::Tensor b1 = run(c, b.b1x1, x);
    torch::Tensor b5 = run(c, b.b5x5_2, run(c, b.b5x5_1, x));
    torch::Tensor b3 = run(c, b.b3dbl_3, run(c, b.b3dbl_2, run(c, b.b3dbl_1, x)));
    torch::Tensor bp = run(c, b.pool, avg3(x));
    return torch::cat({b1, b5, b3, bp}, 1);
  }

  static torch::Tensor run(Cursor& c, BlockB& b, const torch::Tensor& x) {
    torch::Tensor b3 = run(c, b.b3x3, x);
    torch::Tensor bd = run(c, b.b3dbl_3, run(c, b.b3dbl_2, run(c, b.b3dbl_1, x)));
    torch::Tensor bp = torch::max_pool2d(x, {3, 3}, {2, 2});
    return torch::cat({b3, bd, bp}, 1);
  }

  static torch::Tensor run(Cursor& c, BlockC& b, const torch::Tensor& x) {
    torch::Tensor b1 = run(c, b.b1x1, x);
    torch::Tensor b7 = run(c, b.b7_3, run(c, b.b7_2, run(c, b.b7_1, x)));
    torch::Tensor bd = run(c, b.b7dbl_1, x);
    bd = run(c, b.b7dbl_2, bd);
    bd = run(c, b.b7dbl_3, bd);
    bd = run(c, b.b7dbl_4, bd);
    bd = run(c, b.b7dbl_5, bd);
    torch::Tensor bp = run(c, b.pool, avg3(x));
    return torch::cat({b1, b7, bd, bp}, 1);
  }

  static torch::Tensor run(Cursor& c, BlockD& b, const torch::Tensor& x) {
    torch::Tensor b3 = run(c, b.b3_2, run(c, b.b3_1, x));
    torch::Tensor b7 = run(c, b.b7x3_1, x);
    b7 = run(c, b.b7x3_2, b7);
    b7 = run(c, b.b7x3_3, b7);
    b7 = run(c, b.b7x3_4, b7);
    torch::Tensor bp = torch::max_pool2d(x, {3, 3}, {2, 2});
    return torch::cat({b3, b7, bp}, 1);
  }

  static torch::Tensor run(Cursor& c, BlockE& b, const torch::Tensor& x) {
    torch::Tensor b1 = run(c, b.b1x1, x);
    torch::Tensor b3 = run(c, b.b3_1, x);
    torch::Tensor b3a = run(c, b.b3_2a, b3);
    torch::Tensor b3b = run(c, b.b3_2b, b3);
    b3 = torch::cat({b3a, b3b}, 1);
    torch::Tensor bd = run(c, b.b3dbl_2, run(c, b.b3dbl_1, x));
    torch::Tensor bda = run(c, b.b3dbl_3a, bd);
    torch::Tensor bdb = run(c, b.b3dbl_3b, bd);
    bd = torch::cat({bda, bdb}, 1);
    torch::Tensor bp = run(c, b.pool, avg3(x));
    return torch::cat({b1, b3, bd, bp}, 1);
  }

  Basic c1a_, c2a_, c2b_, c3b_, c4a_;
  BlockA m5b_, m5c_, m5d_;
  BlockB m6a_;
  BlockC m6b_, m6c_, m6d_, m6e_;
  Aux aux_;
  BlockD m7a_;
  BlockE m7b_, m7c_;
  nn::Linear fc_{nullptr};
};

}  // namespace

std::unique_ptr<ZooModel> build_inception_v3() { return std::make_unique<InceptionV3>(); }

}  // namespace psw::exec::detail
