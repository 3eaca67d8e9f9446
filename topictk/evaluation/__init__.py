"""Held-out perplexity by document completion, topic coherence, diversity and topic lists."""
