"""dreamkeeper: dream consolidation of agent memory that never loses a memory."""

__version__ = "0.1.0"
