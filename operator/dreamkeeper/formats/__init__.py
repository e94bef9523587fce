"""Memory formats: how an agent keeps its memory on disk, and the units the engine consolidates."""
