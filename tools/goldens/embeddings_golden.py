#!/usr/bin/env python3
"""Expected /v1/embeddings vectors for a tiny random decoder model, from HF transformers (the
hidden states) and sentence-transformers (the pooling and normalization), for loom's C++ test
src/engine/embedding_test.cc (SentenceTransformersGolden).

Run on the GPU machine (torch + transformers 5; sentence-transformers if installed; no hub access
needed: the model is the checked-in qwen3 model golden):
    python3 tools/goldens/embeddings_golden.py tests/goldens/models/qwen3 \
        tests/goldens/embeddings/qwen3
It writes OUT_DIR/golden.json:
  {"script", "transformers", "torch", "sentence_transformers" (version, or null when the pooling
   below had to be computed here), "model": MODEL_DIR, "cases": [{"pooling": "last" | "mean",
   "inputs": [[token ids...], ...], "embeddings": [[f32...], ...]}]}
Each embedding is the L2-normalized pooled last_hidden_state (after the model's final norm) of its
input run alone (no padding), in float32 on the CPU with eager attention. Token ids are fed as is:
the tiny model has no tokenizer, so no special tokens are added (loom adds them only for text
inputs). As a cross-check the script also runs all inputs as one right-padded batch and asserts
the pooled vectors agree with the solo ones (attention masks must not leak).
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

try:
    import sentence_transformers
    from sentence_transformers.models import Normalize, Pooling
except ImportError:  # the math of sentence-transformers' Pooling / Normalize, written out
    sentence_transformers = None

# Inputs: the model golden's three sequences (1, 7 and 70 tokens) and a few more lengths.
EXTRA = [[1, 5, 9, 200, 17], [1] + list(range(3, 40)), [7, 7, 7, 7]]


def pool(token_embeddings, attention_mask, mode):
    """[B, T, D] f32, [B, T] → [B, D] normalized, through sentence-transformers when present."""
    features = {"token_embeddings": token_embeddings, "attention_mask": attention_mask}
    if sentence_transformers is not None:
        dim = token_embeddings.shape[-1]
        st_mode = {"last": "lasttoken", "mean": "mean"}[mode]
        features = Pooling(dim, pooling_mode=st_mode)(features)
        features = Normalize()(features)
        return features["sentence_embedding"]
    mask = attention_mask.to(token_embeddings.dtype)
    if mode == "mean":
        summed = (token_embeddings * mask.unsqueeze(-1)).sum(1)
        pooled = summed / mask.sum(1, keepdim=True).clamp(min=1e-9)
    else:  # right padding: the last token with mask 1
        last = attention_mask.sum(1) - 1
        pooled = token_embeddings[torch.arange(token_embeddings.shape[0]), last]
    return torch.nn.functional.normalize(pooled, p=2, dim=1)


def main():
    model_dir, out_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(model_dir, "golden.json")) as f:
        sequences = json.load(f)["sequences"] + EXTRA
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    base = model.model  # the decoder without lm_head: last_hidden_state is final-normed
    golden = {"script": "tools/goldens/embeddings_golden.py",
              "transformers": transformers.__version__, "torch": torch.__version__,
              "sentence_transformers": getattr(sentence_transformers, "__version__", None),
              "model": model_dir, "cases": []}
    with torch.no_grad():
        solo_hidden = [base(torch.tensor([ids])).last_hidden_state for ids in sequences]
        n_max = max(len(ids) for ids in sequences)
        padded = torch.zeros((len(sequences), n_max), dtype=torch.long)
        mask = torch.zeros((len(sequences), n_max), dtype=torch.long)
        for i, ids in enumerate(sequences):
            padded[i, :len(ids)] = torch.tensor(ids)
            mask[i, :len(ids)] = 1
        batch_hidden = base(padded, attention_mask=mask).last_hidden_state
        for mode in ("last", "mean"):
            solo = [pool(h, torch.ones(h.shape[:2], dtype=torch.long), mode)[0]
                    for h in solo_hidden]
            batched = pool(batch_hidden, mask, mode)
            for i, v in enumerate(solo):
                cos = float(torch.dot(v, batched[i]))
                assert cos > 0.99999, f"{mode} input {i}: solo vs padded batch cosine {cos}"
            golden["cases"].append({"pooling": mode, "inputs": sequences,
                                    "embeddings": [v.tolist() for v in solo]})
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f)
    print("wrote", os.path.join(out_dir, "golden.json"), "sentence-transformers",
          golden["sentence_transformers"])


if __name__ == "__main__":
    main()
