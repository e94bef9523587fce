"""Built-in word lists of the coverage check: RockBot's baseline stoplist and the small fixed vocabularies.

These ship in code on purpose: a shipped vocabulary *file* never reaches an existing agent volume (the init
container seeds only missing files), so improvements to the defaults must travel with the program.
"""

from __future__ import annotations

from typing import Final


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of a literal block (keeps long lists readable)."""
    return frozenset(text.split())


# RockBot's common-word baseline, 238 words (reference §3.2), lowercase. Applies to capitalised words only at
# sentence start, and to all-caps acronyms anywhere. Deliberately absent: personal, class, benefit, extended,
# power, social, code (load-bearing in "OneDrive Personal", "Blazor Online Class", "MVP Azure Extended Benefit").
BASELINE_COMMON_WORDS: Final[frozenset[str]] = word_set(
    """
    the this that these those there then than and but not are was were has have had its his her their
    they them also only just such each both all any one two three new now use uses used using should
    must may can will would could note example include includes including prefer prefers avoid does did
    set get save send read write run when what where while with from for into over under about after
    before during between because however instead since until upon user agent detail details task tasks
    item items entry entries memory working long term data time date day days week weeks month months
    year years ago per via context current currently still already always never other another same
    different first second last next previous some most many much more less very rather quite adding
    candidate candidates flagged validated recurring repeated correct corrected short topic topics
    attempts attempted recommend recommended confirmed verified known unknown successful failed failing
    pending active inactive enabled disabled created updated deleted removed added changed applied
    review reviewed summary status result results reason reasons issue issues error errors warning
    warnings notes given based across within without although though unless overall specifically
    particularly typically generally likely ids enjoys downloading valid invalid direct directly
    alternative alternatively through throughout call calls multiple relevant existing lowering raising
    several additional overdue upcoming marking browsing accessing together similar earlier later
    immediately brief briefly web high low add
    """
)

# dreamkeeper's addition, position-scoped exactly like the baseline (so only at sentence start): imperative
# verbs that open memories ("Email Allen at ...", "Ask Trish before ..."). Chosen to exclude words that are also
# common given names or surnames (no "Bill", "Chase", "Mark", "Ping", "Will"). Not counted in the "common words"
# of the vocabulary INFO line, which keeps RockBot's meaning (baseline + extraCommonWords).
SENTENCE_OPENERS: Final[frozenset[str]] = word_set(
    """
    email emails text message contact ask tell remind check confirm forward reply schedule reschedule book
    cancel follow keep make try share invite notify mention track ensure verify remember store log open
    """
)

# Names that are also dictionary words: at sentence start an ordinary word is not a specific ("Met Tomasz...",
# "Repo moved...", "She prefers..."), but these stay protected there, because memories open with people's names
# ("Rose prefers tea") and products ("Slack is down"). Given names and surnames, pets' names, companies and
# products. A deployment adds its own through the vocabulary's ``alwaysSpecificWords``; a word written
# capitalised mid-sentence in the same text is protected at its start too.
NAMES_THAT_ARE_WORDS: Final[frozenset[str]] = word_set(
    """
    abbey amber angel art august autumn barb baker basil bell belle berry bill birdie blake bob bonnie brook
    bud buddy bunny butch candy cap carol carter cash chance chase cherry chip chuck cliff clay coco cole cook
    cooper coral crystal daisy dale dash dawn dean destiny dick dolly don dot drew duke dusty earl eve faith
    fern flora ford fox frank gage gale gay gene ginger glen goldie grace grant gray guy hale hall harmony
    hazel heath heather hector holly honey hope hunter iris ivy jack jade jasmine jay jean jewel joy june
    kelly king kit lace lance lark laurel lily lou luck mac mae mark marsh mason matt max may mercy miles mike
    mint misty molly moody myrtle nick noble olive opal pat patience patsy peach pearl peg penny pepper
    percy peter pierce pip polly poppy porter price prince rich rick river rob robin rock rocky rod rodger
    roger rogers rose rosemary ruby rush rusty sage sandy scout shadow sherry sky smith sonny spike star
    sterling storm sue summer sunny tab tad taffy tanner terry tiger tina tom trinity troy tucker victor
    violet wade walker ward warren webb wells will willow winter wolf wood woody wren young
    amazon apple chrome delta discord edge excel frontier gap notion office oracle outlook safari shell
    signal slack spirit square subway target teams united visa windows word zoom
    """
)

# Irregular past forms that open a memory before a name ("Met Tomasz", "Told Allen"): ordinary at sentence start
# even when a capitalised word follows (regular -ed forms are recognised by the lexicon).
IRREGULAR_PAST_OPENERS: Final[frozenset[str]] = word_set(
    """
    met told said saw sent spoke wrote gave took brought bought paid heard held kept left lost made found got
    had ran rang sold taught caught led read won began went came knew thought drove flew rode
    """
)

# A "." after these does not end a sentence (reference §3.3), so "St. Paul" and "Dr. May" stay mid-sentence.
NON_TERMINAL_ABBREVIATIONS: Final[frozenset[str]] = word_set(
    """
    st dr mr mrs ms jr sr prof rev hon gen col sgt lt capt inc ltd co corp no vs etc eg ie fig approx dept est
    """
)

# Two-letter capitalised words that are ordinary English or abbreviations. Any *other* capitalised two-letter
# word ("Al", "Ed", "Jo", "Li", "Wu") is protected as a name -- RockBot dropped every word of two letters.
TWO_LETTER_COMMON_WORDS: Final[frozenset[str]] = word_set(
    """
    ad ah am an as at aw ax be by do eh go ha he hi ho id if in is it lo me my no of oh ok on or ow ox so to
    uh um up us we ya ye yo dr mr ms st jr sr co lt mt ft vs pp nb eg ie re
    """
)

# Categories whose numbers are telemetry, not facts (reference §3.6). Built in and cannot be removed.
BUILTIN_NUMERIC_EXEMPT_CATEGORIES: Final[tuple[str, ...]] = ("anti-patterns/routing",)

# Month names and the abbreviations RockBot accepts (full, three letters, "Sept"), lowercase -> month number.
MONTHS: Final[dict[str, int]] = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
