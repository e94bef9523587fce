"""Merge coverage: which specifics (names, numbers, codes, dates...) a text holds and whether a merge keeps them.

Imports nothing from the rest of dreamkeeper but ``memory.files`` (reading the vocabulary file safely): it works on
plain strings and categories.
"""

from dreamkeeper.coverage.check import (
    SourceText,
    find_missing_specifics,
    keep_inventory,
    known_inventory,
    merged_inventory,
    missing_from,
    offer_inventory,
    required_specifics,
)
from dreamkeeper.coverage.index import CoverageIndex
from dreamkeeper.coverage.invention import find_invented_specifics
from dreamkeeper.coverage.inventory import Inventory
from dreamkeeper.coverage.specifics import IDENTITY_KINDS, Specific, SpecificKind, extract_specifics
from dreamkeeper.coverage.text import fold
from dreamkeeper.coverage.vocabulary import (
    DEFAULT_VOCABULARY,
    VOCABULARY_FILE,
    Vocabulary,
    VocabularyLoad,
    load_vocabulary,
)

__all__ = [
    "DEFAULT_VOCABULARY",
    "IDENTITY_KINDS",
    "VOCABULARY_FILE",
    "CoverageIndex",
    "Inventory",
    "SourceText",
    "Specific",
    "SpecificKind",
    "Vocabulary",
    "VocabularyLoad",
    "extract_specifics",
    "find_invented_specifics",
    "find_missing_specifics",
    "fold",
    "keep_inventory",
    "known_inventory",
    "load_vocabulary",
    "merged_inventory",
    "missing_from",
    "offer_inventory",
    "required_specifics",
]
