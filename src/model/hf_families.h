#pragma once
// The Hugging Face model families whose folders stepgraph reads (checkpoint/hf_import.cpp maps each config.json
// model_type), named once for every message, help text and key description that lists them. A string literal, so
// it joins the literals around it at compile time (CLI help, the configuration table's descriptions).
#define SG_HF_FAMILIES "Llama, Mistral, Phi-3, Qwen2, Qwen2-MoE, Qwen3, Qwen3-MoE, Mixtral or NemotronH"
