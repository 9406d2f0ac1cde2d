# Evidence script for docs/judges.md "A prebuilt llama.cpp for the first run?" (paths as run on 2026-12-02).
from llama_cpp_py_sync._cffi_bindings import get_ffi, get_lib

ffi = get_ffi(); lib = get_lib()
lib.llama_backend_init()
print(ffi.string(lib.llama_print_system_info()).decode())
for f in ["llama_decode","llama_batch_init","llama_batch_free","llama_get_logits_ith","llama_get_logits","llama_tokenize","llama_model_load_from_file","llama_init_from_model","llama_memory_seq_rm","llama_get_memory","llama_vocab_n_tokens","llama_model_get_vocab","llama_token_to_piece","llama_memory_clear","llama_context_default_params","llama_model_default_params","llama_chat_apply_template","llama_set_n_threads"]:
    print(f, hasattr(lib, f))
