"""fp32 against bf16/fp16 autocast, module by module (`compare_precision`)."""
