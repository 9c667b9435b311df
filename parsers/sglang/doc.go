// Package sglang parses SGLang's native generate API. A request carries its
// prompt as text or as pre-tokenized input_ids (a batch's first entry is used:
// a batch goes to one endpoint). The API has no model field: the model is
// the "model" member when a gateway added one, else the LoRA adapter
// (lora_path), else empty. SGLang reports usage in meta_info.
package sglang
