"""A character-level tokenizer saved in HF format, loadable by transformers and vLLM alike."""

from __future__ import annotations

from pathlib import Path

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]
# Digits and operators carry the addition task; the rest lets apps send JSON and plain text.
CHARACTERS = list("0123456789+-=*/\n ") + list("abcdefghijklmnopqrstuvwxyz") + list("{}[]\":,.?!()_'")
VOCAB = SPECIAL_TOKENS + CHARACTERS
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3


def vocab_size() -> int:
    """Vocabulary size padded to a multiple of 8."""
    return (len(VOCAB) + 7) // 8 * 8


def save_tokenizer(out_dir: Path, model_max_length: int) -> None:
    """Write tokenizer.json + tokenizer_config.json + special_tokens_map.json."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    # Every sequence starts with <s>, in training and at inference (HF and vLLM tokenize alike).
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", BOS_ID)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
    fast.save_pretrained(str(out_dir))
