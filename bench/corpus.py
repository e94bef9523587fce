"""A small deterministic generator of realistic agent memories: people, their contacts, accounts, events.

Every memory is built from *facts*. A fact knows the specific values it states (a name, an e-mail, a date...)
and can be rendered in several wordings and spellings (ISO or month-name dates, phone formats, possessives).
That is what lets an evaluation build merges whose ground truth is known: a merge that renders every fact of its
sources (in any wording) keeps everything; a merge that leaves a fact out loses exactly that fact.

Reusable: `generate_corpus(seed, people=...)` gives people and entries (content + category); nothing here
depends on dreamkeeper, and the same seed always gives the same corpus.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

FIRST_NAMES = [
    "Allen", "Trish", "Rockford", "Carl", "Lacey", "Matt", "Priya", "Tomasz", "Ingrid", "Mateo", "Aisha",
    "Dmitri", "Yuki", "Olusegun", "Fiona", "Hector", "Greta", "Rajesh", "Chloe", "Bjorn", "Rose", "Will",
    "Mark", "Eve", "Ray", "Al", "Ed", "Jo",
]  # fmt: skip
MIDDLE_NAMES = ["Duane", "Marie", "James", "Elena", "Kofi", "Louise", "Anand", "Pilar"]
LAST_NAMES = [
    "Conway", "Roberts", "Lhotka", "Franklin", "Nakamura", "Okonkwo", "Kowalski", "Lindqvist", "Fernandez",
    "Haddad", "Petrov", "Sato", "Adeyemi", "MacLeod", "Delgado", "Brandt", "Raman", "Dubois", "Sorensen",
    "Whitfield", "Castellanos", "Oyelaran", "Vasquez", "Ferreira",
]  # fmt: skip
COMPANIES = [
    ("Xebia", "xebia.com"), ("Marimer LLC", "lhotka.net"), ("Northwind Traders", "northwind.io"),
    ("Contoso", "contoso.com"), ("Fabrikam", "fabrikam.net"), ("PWOP Productions", "pwop.com"),
    ("Tailspin Toys", "tailspin.dev"), ("Wingtip Analytics", "wingtip.ai"),
]  # fmt: skip
ROLES = ["Principal Consultant", "Staff Engineer", "Program Manager", "Developer Advocate", "Data Architect"]
CITIES = ["Austin", "St. Paul", "New Orleans", "Las Vegas", "Minneapolis", "Atlanta", "Lisbon", "Kraków", "Osaka"]
EVENTS = ["VS Live", "Blazor Summit", "NDC Oslo", "KubeCon", "DevIntersection", "Build", "Techorama"]
MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
    "November", "December",
]  # fmt: skip
MODELS = ["gpt-4o", "gpt-4.1-mini", "claude-3-5-sonnet", "llama-3.1-70b", "o3-mini"]
CLOUD = ["S3", "EC2", "R2", "GCS", "B2"]
FORMS = ["W-9", "I-9", "W-2", "1099-K", "DS-160"]
CJK_NAMES = ["王小明", "李华", "陈静", "田中太郎", "佐藤花子"]
RTL_NAMES = ["أحمد", "سارة", "ליאור", "נועה", "يوسف"]
PREFERENCES = [
    "prefers concise status updates",
    "likes agendas sent the day before",
    "wants replies in plain text",
    "dislikes early morning calls",
    "asks for summaries with bullet points",
]
# Trap words: ordinary words containing a name or number (RockBot's substring check lets them cover it).
TRAPS = {
    "Rose": "The newsletter team writes prose for every issue.",
    "Will": "Everyone is willing to cover the weekend rota.",
    "Mark": "The market update goes out on Fridays.",
    "Eve": "Everything for the offsite is booked.",
    "Ray": "The array of dashboards was cleaned up.",
    "Al": "Also, the badge office moved upstairs.",
    "Ed": "The edited agenda was circulated.",
    "Jo": "The job board was refreshed.",
}


@dataclass(frozen=True)
class Person:
    key: str
    first: str
    middle: str
    last: str
    company: str
    domain: str
    role: str
    city: str
    email: str
    personal_email: str
    phone: str  # digits only, national significant number
    country_code: str
    account: str
    handle: str
    native_name: str | None

    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"

    @property
    def formal(self) -> str:
        return f"{self.first} {self.middle} {self.last}"


@dataclass(frozen=True)
class Fact:
    """One statement about a subject. `render(rng)` returns a wording; every wording states `values`."""

    id: str
    kind: str
    subject: str
    values: tuple[str, ...]
    wordings: tuple[Callable[[random.Random], str], ...] = field(compare=False, repr=False)
    category: str = "people/contacts"
    altered: Callable[[random.Random], str] | None = field(default=None, compare=False, repr=False)
    """A wording that states a *wrong* value (a day off by one, a digit changed): what a careless merge writes."""

    def render(self, rng: random.Random) -> str:
        return rng.choice(self.wordings)(rng)


@dataclass(frozen=True)
class Entry:
    """A memory entry as an agent would have saved it: content, category and the facts it states."""

    id: str
    content: str
    category: str
    facts: tuple[Fact, ...]


@dataclass
class Corpus:
    people: list[Person]
    facts: dict[str, list[Fact]]  # subject key -> facts about it
    entries: list[Entry]


# --- formatting variants (all state the same value) ---------------------------------------------------------


def date_spellings(year: int, month: int, day: int) -> list[str]:
    name = MONTHS[month - 1]
    suffix = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return [
        f"{year:04d}-{month:02d}-{day:02d}",
        f"{name} {day}, {year}",
        f"{day} {name} {year}",
        f"{name[:3]} {day}, {year}",
        f"{name} {day}{suffix}, {year}",
    ]


def phone_spellings(phone: str, country_code: str) -> list[str]:
    if country_code == "1":
        a, b, c = phone[:3], phone[3:6], phone[6:]
        return [f"{a}-{b}-{c}", f"({a}) {b}-{c}", f"{a}.{b}.{c}", f"+1 {a}-{b}-{c}", f"+1 ({a}) {b}-{c}"]
    a, b, c = phone[:2], phone[2:6], phone[6:]
    return [f"+{country_code} {a} {b} {c}", f"+{country_code} {a}-{b}-{c}", f"+{country_code} {a} {b}{c}"]


def amount_spellings(amount: int) -> list[str]:
    return [f"${amount:,}", f"${amount}", f"{amount:,} dollars"]


def _pick(options: Sequence[str]) -> Callable[[random.Random], str]:
    return lambda rng: rng.choice(options)


# --- people and facts ---------------------------------------------------------------------------------------


def _person(rng: random.Random, index: int, used: set[str]) -> Person:
    for _ in range(100):  # unique names while the pools last, then namesakes (as in any large address book)
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        if f"{first} {last}" not in used:
            break
    used.add(f"{first} {last}")
    company, domain = rng.choice(COMPANIES)
    international = rng.random() < 0.25
    country_code = rng.choice(["44", "33", "49"]) if international else "1"
    phone = (
        "".join(str(rng.randint(0, 9)) for _ in range(10))
        if international
        else f"{rng.randint(201, 989)}555{rng.randint(0, 9999):04d}"
    )
    account = rng.choice(
        [
            f"{first[0].lower()}{last.lower()[:6]}",
            f"{company.split()[0].lower()}-{rng.choice(['work', 'ops', 'main', 'billing'])}",
            f"{first.lower()}{rng.randint(10, 99)}",
        ]
    )
    native = rng.choice(CJK_NAMES + RTL_NAMES) if rng.random() < 0.15 else None
    return Person(
        key=f"p{index:03d}",
        first=first,
        middle=rng.choice(MIDDLE_NAMES),
        last=last,
        company=company,
        domain=domain,
        role=rng.choice(ROLES),
        city=rng.choice(CITIES),
        email=f"{first.lower()}.{last.lower()}@{domain}",
        personal_email=f"{first[0].lower()}{last.lower()}{rng.randint(1, 99)}@gmail.com",
        phone=phone,
        country_code=country_code,
        account=account,
        handle=f"@{first.lower()}{last.lower()[:3]}",
        native_name=native,
    )


def _facts(rng: random.Random, p: Person) -> list[Fact]:
    facts: list[Fact] = []

    def add(
        kind: str,
        values: Sequence[str],
        *wordings: Callable[[random.Random], str],
        category: str = "people/contacts",
        altered: Callable[[random.Random], str] | None = None,
    ) -> None:
        facts.append(Fact(f"{p.key}-{len(facts):02d}-{kind}", kind, p.key, tuple(values), wordings, category, altered))

    first, full = p.first, p.full
    add(
        "role",
        [p.first, p.last, p.company, p.role],
        lambda r: f"{full} works at {p.company} as {p.role}.",
        lambda r: f"{full} is a {p.role} at {p.company}.",
        lambda r: f"At {p.company}, {full} holds the {p.role} title.",
    )
    wrong_email = p.email.replace(".", "_", 1)
    add(
        "email",
        [p.email],
        lambda r: f"{first}'s work email is {p.email}.",
        lambda r: f"Email {first} at {p.email}.",
        lambda r: f"The work address for {first} is {p.email.upper() if r.random() < 0.1 else p.email}.",
        altered=lambda r: f"{first}'s work email is {wrong_email}.",
    )
    add(
        "personal-email",
        [p.personal_email],
        lambda r: f"For personal matters {first} uses {p.personal_email}.",
        lambda r: f"{first}'s personal address is {p.personal_email}.",
    )
    # Spellings a merge may switch between without losing anything (adding a "+1" is fine, dropping one is not).
    phones = phone_spellings(p.phone, p.country_code)
    source_phones = phones if p.country_code != "1" else phones[:3]
    wrong = p.phone[:-1] + str((int(p.phone[-1]) + 1) % 10)
    add(
        "phone",
        [p.phone],
        lambda r: f"{first}'s mobile is {r.choice(source_phones)}.",
        lambda r: f"Call {first} on {r.choice(source_phones)}.",
        altered=lambda r: f"{first}'s mobile is {phone_spellings(wrong, p.country_code)[0]}.",
    )
    add(
        "account",
        [p.account],
        lambda r: f"{first} uses the account {p.account}.",
        lambda r: f"The account id for {first} is {p.account}.",
        lambda r: f"{first} signs in as {p.account}.",
        category="agent-knowledge/accounts",
        altered=lambda r: f"{first} uses the account {p.account}2.",
    )
    add(
        "alias",
        [p.first, p.middle, p.last],
        lambda r: f"In travel and calendar data {first} appears as {p.formal}.",
        lambda r: f"{first}'s calendar entries use the full name {p.formal}.",
        category="user-preferences/identity",
    )
    add(
        "handle",
        [p.handle],
        lambda r: f"{first} posts as {p.handle}.",
        lambda r: f"On social media {first} is {p.handle}.",
    )
    year, month, day = rng.choice([2025, 2026, 2027]), rng.randint(1, 12), rng.randint(1, 28)
    event, city = rng.choice(EVENTS), p.city
    dates = date_spellings(year, month, day)
    wrong_dates = date_spellings(year, month, day % 28 + 1)
    add(
        "event",
        [event, city, f"{year}-{month:02d}-{day:02d}"],
        lambda r: f"{first} presents at {event} in {city} on {r.choice(dates)}.",
        lambda r: f"On {r.choice(dates)} {first} speaks at {event} in {city}.",
        category="active-plans/events",
        altered=lambda r: f"{first} presents at {event} in {city} on {r.choice(wrong_dates)}.",
    )
    invoice, amount = f"INV-{rng.randint(10000, 99999)}", rng.choice([450, 1250, 2400, 7800, 12500])
    due = date_spellings(year, rng.randint(1, 12), rng.randint(1, 28))
    add(
        "invoice",
        [invoice, str(amount)],
        lambda r: f"Invoice {invoice} for {r.choice(amount_spellings(amount))} to {p.company} is due {due[0]}.",
        lambda r: f"{p.company} owes {r.choice(amount_spellings(amount))} on invoice {invoice}, due {due[0]}.",
        category="project-context/billing",
        altered=lambda r: f"Invoice {invoice} for {amount_spellings(amount * 2)[0]} to {p.company} is due {due[0]}.",
    )
    url = f"https://{p.domain}/talks/{event.lower().replace(' ', '-')}-{year}"
    add(
        "url",
        [url],
        lambda r: f"{first}'s slides are at {url}.",
        lambda r: f"The slides from {first} live at {url}.",
    )
    path = rng.choice([f"/data/agent/notes/{p.last.lower()}.md", f"~/Documents/{p.company.split()[0]}/contract.pdf"])
    add(
        "path",
        [path],
        lambda r: f"Notes about {first} are kept in {path}.",
        lambda r: f"{first}'s file is {path}.",
        category="agent-knowledge/infrastructure",
    )
    model, cloud, form = rng.choice(MODELS), rng.choice(CLOUD), rng.choice(FORMS)
    add(
        "tooling",
        [model, cloud],
        lambda r: f"{first}'s team summarises with {model} and stores backups in {cloud}.",
        lambda r: f"Backups for {first}'s team go to {cloud}; summaries use {model}.",
        category="agent-knowledge/infrastructure",
    )
    add(
        "form",
        [form],
        lambda r: f"{first} filed the {form} for {p.company}.",
        lambda r: f"The {form} from {first} is on file with {p.company}.",
        category="project-context/billing",
    )
    hour, minute = rng.randint(1, 11), rng.choice(["00", "15", "30", "45"])
    room = rng.randint(11, 40)
    add(
        "meeting",
        [f"{hour}:{minute}", str(room)],
        lambda r: f"The weekly sync with {first} is at {hour}:{minute} PM in room {room}.",
        lambda r: f"{first} meets the team at {hour}:{minute} PM each week, room {room}.",
        category="active-plans/meetings",
        altered=lambda r: f"The weekly sync with {first} is at {hour + 1}:{minute} PM in room {room}.",
    )
    count = rng.randint(2, 9)
    words = ["two", "three", "four", "five", "six", "seven", "eight", "nine"][count - 2]
    add(
        "preference",
        [p.first],
        *((lambda r, text=text: f"{first} {text}.") for text in rng.sample(PREFERENCES, 2)),
        category="user-preferences/communication",
    )
    add(
        "count",
        [p.first],
        lambda r: f"{first} has run {count} workshops this year.",
        lambda r: f"{first} ran {words} workshops this year.",
        category="project-context/workshops",
    )
    if p.native_name:
        add(
            "native-name",
            [p.native_name],
            lambda r: f"{first}'s name in native script is {p.native_name}.",
            lambda r: f"{first} writes their name as {p.native_name}.",
        )
    if p.first in TRAPS:
        trap = TRAPS[p.first]
        facts.append(Fact(f"{p.key}-trap", "trap", p.key, (), (lambda r: trap,), "project-context/team"))
    return facts


def generate_corpus(seed: int = 7, people: int = 60) -> Corpus:
    """People, their facts, and memory entries of one to three facts each, as an agent would accumulate."""
    rng = random.Random(seed)
    used: set[str] = set()
    persons = [_person(rng, i, used) for i in range(people)]
    facts = {p.key: _facts(rng, p) for p in persons}
    entries: list[Entry] = []
    for person in persons:
        pool = list(facts[person.key])
        rng.shuffle(pool)
        while pool:
            size = min(len(pool), rng.choice([1, 1, 2, 2, 3]))
            chosen, pool = pool[:size], pool[size:]
            content = " ".join(f.render(rng) for f in chosen)
            entries.append(Entry(f"{person.key}-e{len(entries):04d}", content, chosen[0].category, tuple(chosen)))
    return Corpus(persons, facts, entries)
