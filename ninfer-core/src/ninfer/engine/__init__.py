"""Scheduler-free batch-1 engine: model runner, sampler, generation loop, detokenizer."""
