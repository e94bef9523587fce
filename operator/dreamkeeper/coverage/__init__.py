"""coverage."""
