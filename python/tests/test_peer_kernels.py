"""benchmarks/peer_kernels.py sorts PyTorch's kernels into kinds by name and sums them
per inference; the GPU run itself needs CUDA, these parts do not."""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import peer_kernels  # noqa: E402


def test_kernel_names_fall_into_their_kinds():
    kinds = {
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize2x2x1": "GEMM",
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)": "attention",
        "triton_poi_fused__scaled_dot_product_efficient_attention_addmm_clone_3": "attention",
        "void cudnn::engines_precompiled::nhwcToNchwKernel<float>": "convolution",
        "conv2d_c1_k1_nhwc": "convolution",
        "triton_poi_fused_addmm_gelu_view_7": "Inductor (generated)",
        "void at::native::vectorized_elementwise_kernel<4>": "other",
    }
    assert {name: peer_kernels.kind_of(name) for name in kinds} == kinds


def test_the_report_sums_per_inference_and_shows_the_idle_share(capsys):
    # two inferences of two kernels: 10 + 30 us busy each, over a span of 100 us in all
    kernels = [("ampere_sgemm_128x64_tn", 0.0, 10.0), ("triton_poi_fused_gelu_0", 20.0, 30.0),
               ("ampere_sgemm_128x64_tn", 50.0, 10.0), ("triton_poi_fused_gelu_0", 70.0, 30.0)]
    peer_kernels.report("net", kernels, 2, 5)
    out = capsys.readouterr().out
    assert "## net: 2 kernels, 40.0 us busy per inference (span 50.0 us, idle 20%)" in out
    assert "| GEMM | 10.0 | 25% |" in out
    assert "| Inductor (generated) | 30.0 | 75% |" in out
    assert "| triton_poi_fused_gelu_0 | Inductor (generated) | 1 | 30.0 |" in out
