"""Convert a GGUF file into a Hugging Face model directory vLLM can load.

Runs inside the target's own venv (never golive's): `python convert_gguf.py GGUF OUT_DIR`.
vLLM 0.32 has no GGUF loader, so the weights are dequantized once with transformers.
"""

import os
import sys


def main() -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    gguf_path, out_dir = sys.argv[1], sys.argv[2]
    folder, name = os.path.split(os.path.abspath(gguf_path))
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.bfloat16,
    )
    # Without this, save_pretrained refuses: "The model is quantized with
    # QuantizationMethod.GGUF and is not serializable".
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    print(f"converted {gguf_path} -> {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
