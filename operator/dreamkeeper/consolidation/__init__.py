"""Consolidation engine: gating, clustering, proposals, safeguards, journal, report."""
