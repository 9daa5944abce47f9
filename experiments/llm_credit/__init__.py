"""The LLM credit study: GRPO, GiGPO and MileGPO (and MVPO) training SmolLM2-135M-Instruct on one
long-horizon TextWorldExpress setting from a shared warm start (docs/results/llm-credit.md)."""
