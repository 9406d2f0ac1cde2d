"""A vision judge of a real architecture with random weights, built in code (nothing downloaded).

LLaVA (a CLIP vision tower, a projector, a Llama language model) at a tiny size: 2 layers of width 32, 32x32
images in 8x8 patches (16 image tokens), a byte-level BPE tokenizer trained here on a few sentences, and a
chat template that renders image content parts as ``<image>``. Its verdicts mean nothing: it tests the
plumbing (image processing, the chat template, label positions, store keys, both orders) for real.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for p in m['content'] %}{% if p['type'] == 'image' %}<image>{% else %}{{ p['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")

_CORPUS = ["Judge how well the response answers the question. Score: [1] [2] [3] [4] [5] [10] [100]",
           "Compare two responses. Verdict: [A] [B] [C] Answer: [YES] [NO] <question> <response> </response>",
           "Rate the plot 0-100 against the task and the reference figure; a bar chart, a line, a legend."]


def build_tiny_llava(folder: Path, seed: int = 0) -> Path:
    """Save the tiny model and its processor in ``folder`` (a model folder ``hf//folder`` loads)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>", "<image>", "<|user|>",
                                                                   "<|assistant|>", "<|system|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS * 3, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="</s>")
    fast.add_special_tokens({"additional_special_tokens": ["<image>", "<|user|>", "<|assistant|>", "<|system|>"]})
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              image_size=32, patch_size=8, projection_dim=32)
    text = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096)
    config = LlavaConfig(vision_config=vision, text_config=text,
                         image_token_index=fast.convert_tokens_to_ids("<image>"), vision_feature_layer=-1)
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    with torch.no_grad():  # random weights of a larger spread: distributions far from uniform
        for p in model.parameters():
            p.mul_(4.0)
    processor = LlavaProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": 32},
                                                                  crop_size={"height": 32, "width": 32}),
                               tokenizer=fast, chat_template=CHAT_TEMPLATE, patch_size=8,
                               vision_feature_select_strategy="full", num_additional_image_tokens=0)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
