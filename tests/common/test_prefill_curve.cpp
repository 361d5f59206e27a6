// Note [Prefill curve] (model_profile.hpp): a decoder profile's forward at other prompt
// lengths, parsed strictly, written back, and the factor it puts on the layers' times; the
// switch costs it scales (switch_costs.hpp).
#include <gtest/gtest.h>

#include <string>

#include "input_error.hpp"
#include "psw/common/config.hpp"
#include "psw/common/model_profile.hpp"
#include "psw/common/switch_costs.hpp"

namespace psw {
namespace {

using test_support::input_error_of;

// A decoder measured at a 512-token prompt, its whole forward at 128, 512 and 2048 tokens.
std::string decoder_profile(const std::string& curve, const std::string& prompt = "prompt_tokens: 512\n") {
  return "name: dec\nbatch: 1\ndtype: bf16\n" + prompt +
         "source: {kind: measured, device: X}\n" + curve +
         "layers:\n"
         "  - {name: embed, kind: embedding, param_bytes: 1000, forward_ns: 1000}\n"
         "  - {name: block, kind: linear, param_bytes: 9000, forward_ns: 9000}\n";
}

const std::string kCurve =
    "prefill_curve:\n"
    "  - {tokens: 128, forward_ns: 4000}\n"
    "  - {tokens: 512, forward_ns: 10000}\n"
    "  - {tokens: 2048, forward_ns: 40000}\n";

TEST(PrefillCurve, ParsesAndRoundTrips) {
  const ModelProfile model = parse_model_profile(decoder_profile(kCurve), "dec.yaml");
  EXPECT_EQ(model.prompt_tokens, 512);
  ASSERT_EQ(model.prefill_curve.size(), 3u);
  EXPECT_EQ(model.prefill_curve[2].tokens, 2048);
  EXPECT_EQ(model.prefill_curve[2].forward, nanoseconds(40'000));
  const std::string written = to_yaml(model);
  const ModelProfile again = parse_model_profile(written, "dec.yaml (to_yaml)");
  EXPECT_EQ(again.prompt_tokens, 512);
  ASSERT_EQ(again.prefill_curve.size(), 3u);
  EXPECT_EQ(again.prefill_curve[0].forward, nanoseconds(4'000));
  EXPECT_EQ(to_yaml(again), written);
  // A profile without either writes neither.
  ModelProfile plain = model;
  plain.prompt_tokens = 0;
  plain.prefill_curve.clear();
  EXPECT_EQ(to_yaml(plain).find("prompt_tokens"), std::string::npos);
  EXPECT_EQ(to_yaml(plain).find("prefill_curve"), std::string::npos);
}

// Note [Decode in the simulator]: a decoder's decode step, parsed, written back, and refused for a
// profile that is not a decoder's.
TEST(DecodeStep, ParsesRoundTripsAndNeedsADecoder) {
  const ModelProfile model = parse_model_profile(decoder_profile("decode_step_ns: 7000\n"), "dec.yaml");
  EXPECT_EQ(model.decode_step, nanoseconds(7000));
  EXPECT_EQ(parse_model_profile(to_yaml(model), "dec.yaml (to_yaml)").decode_step, nanoseconds(7000));
  EXPECT_FALSE(parse_model_profile(decoder_profile(""), "dec.yaml").decode_step.has_value());
  EXPECT_NE(input_error_of([] { parse_model_profile(decoder_profile("decode_step_ns: 7000\n", ""), "dec.yaml"); })
                .find("key 'decode_step_ns': a decode step is a decoder's: it needs prompt_tokens"),
            std::string::npos);
  EXPECT_NE(input_error_of([] { parse_model_profile(decoder_profile("decode_step_ns: 0\n"), "dec.yaml"); })
                .find("decode_step_ns"),
            std::string::npos);
}

TEST(PrefillCurve, ScalesByTheCurveRelativeToTheProfilesPrompt) {
  const ModelProfile model = parse_model_profile(decoder_profile(kCurve), "dec.yaml");
  EXPECT_DOUBLE_EQ(prefill_scale(model, 0), 1.0);    // the profile's own prompt
  EXPECT_DOUBLE_EQ(prefill_scale(model, 512), 1.0);
  EXPECT_DOUBLE_EQ(prefill_scale(model, 2048), 4.0);  // at a point
  EXPECT_DOUBLE_EQ(prefill_scale(model, 128), 0.4);
  EXPECT_DOUBLE_EQ(prefill_scale(model, 320), 0.7);   // halfway between 128 and 512: 7000 ns
  EXPECT_DOUBLE_EQ(prefill_scale(model, 1280), 2.5);  // halfway between 512 and 2048: 25000 ns
  EXPECT_DOUBLE_EQ(prefill_scale(model, 16), 0.4);    // flat below the first point
  EXPECT_DOUBLE_EQ(prefill_scale(model, 4096), 8.0);  // the last segment's slope beyond it
  // Without a curve every prompt costs the profile's.
  ModelProfile flat = model;
  flat.prefill_curve.clear();
  EXPECT_DOUBLE_EQ(prefill_scale(flat, 2048), 1.0);
  // A curve measured with noise that falls past its end never goes below its first point.
  ModelProfile dipping = model;
  dipping.prefill_curve = {{128, nanoseconds(4'000)}, {512, nanoseconds(10'000)}, {1024, nanoseconds(5'000)}};
  EXPECT_DOUBLE_EQ(prefill_scale(dipping, 100'000), 0.4);
}

TEST(PrefillCurve, BadCurvesAreRefusedNamingTheKey) {
  EXPECT_NE(input_error_of([&] { parse_model_profile(decoder_profile(kCurve, ""), "dec.yaml"); })
                .find("key 'prefill_curve': a prefill curve needs prompt_tokens"),
            std::string::npos);
  const std::string decreasing =
      "prefill_curve:\n  - {tokens: 512, forward_ns: 4000}\n  - {tokens: 128, forward_ns: 1000}\n";
  EXPECT_NE(input_error_of([&] { parse_model_profile(decoder_profile(decreasing), "dec.yaml"); })
                .find("dec.yaml:8: key 'prefill_curve[1].tokens': the curve's prompt lengths must increase"),
            std::string::npos);
  const std::string without_own = "prefill_curve:\n  - {tokens: 128, forward_ns: 4000}\n  - {tokens: 256, forward_ns: 5000}\n";
  EXPECT_NE(input_error_of([&] { parse_model_profile(decoder_profile(without_own), "dec.yaml"); })
                .find("at least two points, one of them at prompt_tokens (512)"),
            std::string::npos);
  const std::string one = "prefill_curve:\n  - {tokens: 512, forward_ns: 4000}\n";
  EXPECT_NE(input_error_of([&] { parse_model_profile(decoder_profile(one), "dec.yaml"); }).find("at least two points"),
            std::string::npos);
  const std::string zero_time = "prefill_curve:\n  - {tokens: 512, forward_ns: 0}\n  - {tokens: 600, forward_ns: 1}\n";
  EXPECT_NE(input_error_of([&] { parse_model_profile(decoder_profile(zero_time), "dec.yaml"); })
                .find("prefill_curve[0].forward_ns"),
            std::string::npos);
}

TEST(PrefillCurve, ScaledSwitchCostsKeepTheBytesAndTheLink) {
  const LinkCost link{nanoseconds(1'000), Bandwidth::bytes_per_second(1'000'000'000)};
  const SwitchCosts costs({1000, 9000}, {nanoseconds(1'000), nanoseconds(9'001)}, link, nanoseconds(50), nanoseconds(7));
  const SwitchCosts doubled = costs.with_compute_scaled(2.5);
  EXPECT_EQ(doubled.layer_compute(0), nanoseconds(2'500));
  EXPECT_EQ(doubled.layer_compute(1), nanoseconds(22'503));  // 22502.5, rounded
  EXPECT_EQ(doubled.total_bytes(), costs.total_bytes());
  EXPECT_EQ(doubled.transfer_time(0, 1), costs.transfer_time(0, 1));
  EXPECT_EQ(doubled.group_sync(), costs.group_sync());
  EXPECT_EQ(doubled.tail(), nanoseconds(7));
  EXPECT_NE(input_error_of([&] { costs.with_compute_scaled(-1.0); }).find("non-negative"), std::string::npos);
}

}  // namespace
}  // namespace psw
