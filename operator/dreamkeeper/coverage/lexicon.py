"""The lowercase English lexicon: how the check tells "mailbox" (ordinary) from "rockyl" (an account id).

RockBot protected only capitalised words, so lowercase identifiers ("marimer-work", "xebia", "rockyl") could be
dropped by any merge. A lowercase word is ordinary language only if a dictionary knows it (or one of its simple
inflections); anything else written in lowercase is treated as a name or code and protected. The dictionary is
SCOWL (see data/coverage/NOTICE-english-words.txt), lowercase entries only, plus a short list of everyday
technical words newer than it. A deployment adds more through the vocabulary's ``extraCommonWords``.
"""

from __future__ import annotations

import gzip
from functools import cache
from importlib import resources

from dreamkeeper.coverage.stoplist import word_set

# Everyday words newer than the 2020 SCOWL list. Product and company names are deliberately absent: they are
# names and stay protected ("github", "kubernetes", "docker").
_SUPPLEMENT = word_set(
    """
    todo todos config configs repo repos api apis json yaml url urls http https webhook webhooks dedupe
    dedupes deduped deduping dedup deduplicate deduplicated deduplication async backend backends frontend
    frontends metadata subfolder subfolders lookups signup signups ok okay hmm eg ie wifi chatbot chatbots
    livestream livestreams livestreaming dropdown dropdowns checkbox checkboxes refactor refactors refactored
    refactoring codebase codebases runtime runtimes subagent subagents llm llms sql cli gui ui ux devops html
    css pdf pdfs csv txt png jpg jpeg gif sms faq faqs tbd asap fyi pm ai auth oauth ssh vpn dns cdn ip tcp
    udp cpu cpus gpu gpus ssd usb hdmi serverless microservice microservices endpoint endpoints middleware
    dataset datasets reupload preload onboarding offboarding standup standups cofounder cofounders ecommerce
    fintech telehealth rideshare carpool carpooling webpage webpages fulltime parttime timezones realtime
    stakeholder stakeholders roadmap roadmaps walkthrough walkthroughs tradeoff tradeoffs rollout rollouts
    failover hotfix hotfixes changelog changelogs readme subtask subtasks preorder preorders email emails
    emailed emailing inbox inboxes online offline app apps
    """
)

# Suffixes whose removal (optionally restoring an "e" or undoubling a consonant) leaves a known word.
_INFLECTIONS = ("s", "es", "ed", "d", "ing", "er", "ers", "ly")


@cache
def _words() -> frozenset[str]:
    data = resources.files("dreamkeeper").joinpath("data/coverage/english-words.txt.gz").read_bytes()
    return frozenset(gzip.decompress(data).decode("ascii").split()) | _SUPPLEMENT


@cache
def is_english_word(word: str) -> bool:
    """True when a lowercase ASCII ``word`` is ordinary English (a dictionary word or a simple inflection)."""
    words = _words()
    if word in words:
        return True
    for suffix in _INFLECTIONS:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            stem = word[: -len(suffix)]
            if stem in words or stem + "e" in words:
                return True
            if len(stem) > 2 and stem[-1] == stem[-2] and stem[:-1] in words:
                return True
    return False


# Regular inflections only, for `is_plain_english_word`: what a capitalised sentence opener must be to count as
# ordinary language. The loose rule above also reads "james" as jam+es and "anders" as and+ers, which is harmless
# for lowercase words (an unknown lowercase word is protected anyway) but would demote names at sentence start.
_SIBILANT_ENDINGS = ("s", "x", "z", "ch", "sh")


@cache
def is_plain_english_word(word: str) -> bool:
    """True when a lowercase ASCII ``word`` is a dictionary word or a regular inflection of one: +s, +es after a
    sibilant, +ed / +ing (also after a silent e, "merged", or a doubled consonant). ("met", "merged", "asked",
    "repos", "boxes", "booking"; not "james", "anders".)"""
    words = _words()
    if word in words:
        return True
    if word.endswith("es") and word[:-2] in words and word[:-2].endswith(_SIBILANT_ENDINGS):
        return True
    if word.endswith("s") and not word.endswith("ss") and word[:-1] in words:
        return True
    for suffix in ("ed", "ing"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= 2:
            if stem in words or stem + "e" in words:
                return True
            if len(stem) > 2 and stem[-1] == stem[-2] and stem[:-1] in words:
                return True
    return False


def lexicon_size() -> int:
    return len(_words())
