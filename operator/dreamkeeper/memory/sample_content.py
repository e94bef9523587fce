"""The invented world behind the sample agent: people, places, projects and the facts an agent would remember.

Everything here is fictional (example domains, 555 phone numbers, Microsoft's sample company names). Each
:class:`Family` is one fact as the agent might have written it several times: a canonical wording, restatements
that carry the same specifics, and elaborations that add specifics. sample.py decides how many copies land on disk.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

# The sample's "now": fixed so the generator is deterministic; archive ages are relative to it.
ANCHOR = datetime(2026, 9, 14, 6, 0, tzinfo=UTC)

USER_FIRST = "Jordan"
USER_FULL = "Jordan Ellery"
USER_LEGAL = "Jordan Michael Ellery"

FIRST_NAMES = [
    "Dana", "Marcus", "Priya", "Tomasz", "Elena", "Kwame", "Sofia", "Hiroshi", "Grace", "Mateo", "Ingrid", "Ravi",
    "Chloe", "Desmond", "Yuki", "Olivia", "Farid", "Hannah", "Luca", "Amara", "Nikolai", "Beatriz", "Owen", "Leila",
    "Jonas", "Tessa", "Anders", "Imogen", "Caleb", "Noor",
]  # fmt: skip
LAST_NAMES = [
    "Whitfield", "Oyelaran", "Castellano", "Nakamura", "Brandt", "Okafor", "Lindqvist", "Haddad", "Moreau",
    "Kowalczyk", "Fairbanks", "Achterberg", "Sorensen", "Delgado", "Petrakis", "Quint", "Valdez", "Ashworth",
    "Iverson", "Thorne", "Abernathy", "Rasmussen", "Ferreira", "Kimura", "Osei", "Larkin", "Benedetti", "Halloran",
    "Voss", "Marchetti",
]  # fmt: skip
COMPANIES = [
    ("Northwind Traders", "northwind.example"),
    ("Fabrikam", "fabrikam.example"),
    ("Contoso", "contoso.example"),
    ("Tailspin Toys", "tailspin.example"),
    ("Woodgrove Bank", "woodgrove.example"),
    ("Adventure Works", "adventure-works.example"),
    ("Litware", "litware.example"),
    ("Proseware", "proseware.example"),
    ("Wide World Importers", "wideworld.example"),
    ("Fourth Coffee", "fourthcoffee.example"),
    ("Coho Winery", "cohowinery.example"),
    ("Lucerne Publishing", "lucernepublishing.example"),
    ("Trey Research", "treyresearch.example"),
]
ROLES = [
    "Principal Consultant", "Engineering Manager", "Staff Engineer", "Product Owner", "CFO", "Account Executive",
    "Developer Advocate", "Solutions Architect", "Program Manager", "Managing Editor", "Producer", "Office Manager",
]  # fmt: skip
CITIES = [
    ("Minneapolis", "MSP"), ("Atlanta", "ATL"), ("Seattle", "SEA"), ("Las Vegas", "LAS"), ("Orlando", "MCO"),
    ("Denver", "DEN"), ("Chicago", "ORD"), ("Boston", "BOS"), ("Austin", "AUS"), ("Portland", "PDX"),
    ("St. Paul", "MSP"), ("Oslo", "OSL"), ("Lisbon", "LIS"), ("Toronto", "YYZ"),
]  # fmt: skip
CONFERENCES = ["VS Live", "NDC Oslo", "Build", "KubeCon", "Dev Intersection", "That Conference", "Techorama"]
TOPICS = [
    "the Blazor Online Class syllabus", "moving the build to GitHub Actions", "a co-authored conference talk",
    "licensing for the workshop videos", "the Q4 consulting renewal", "Kubernetes cost reporting",
    "the podcast guest schedule", "an MVP Azure Extended Benefit question",
]  # fmt: skip
PROJECTS = [
    ("blazor-online-class", "Blazor Online Class"),
    ("northwind-portal", "Northwind Portal rewrite"),
    ("deep-stack-podcast", "Deep Stack podcast"),
    ("home-lab", "home lab"),
    ("workshop-videos", "Workshop Videos"),
    ("book-second-edition", "second edition of the book"),
]
MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip


@dataclass
class Person:
    first: str
    last: str
    company: str
    domain: str
    role: str
    city: str
    phone: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"

    @property
    def email(self) -> str:
        return f"{self.first}.{self.last}@{self.domain}".lower()


@dataclass
class Family:
    """One fact and the ways the agent wrote it down. ``variants[0]`` is the canonical wording."""

    key: str
    category: str
    variants: list[str]
    importance: float
    tags: list[str] = field(default_factory=list)
    subject_time: str | None = None
    ephemeral: bool = False
    # Restatements carry exactly the canonical's specifics; elaborations add some (a merge must keep them).
    elaborations: list[str] = field(default_factory=list)
    reinforcement: int | None = None


def _date(rng: random.Random, start_days: int, end_days: int) -> datetime:
    return ANCHOR + timedelta(days=rng.randint(start_days, end_days), minutes=rng.randint(0, 24 * 60 - 1))


def _phone(rng: random.Random) -> str:
    return f"+1 {rng.choice(['612', '651', '404', '206', '702', '407', '303'])}-555-{rng.randint(100, 199):04d}"


def _long_date(value: datetime) -> str:
    return f"{MONTHS[value.month - 1]} {value.day}, {value.year}"


def make_people(rng: random.Random, count: int) -> list[Person]:
    names = [(f, last) for f in FIRST_NAMES for last in LAST_NAMES]
    rng.shuffle(names)
    people = []
    for first, last in names[:count]:
        company, domain = rng.choice(COMPANIES)
        people.append(Person(first, last, company, domain, rng.choice(ROLES), rng.choice(CITIES)[0], _phone(rng)))
    return people


def fixed_families() -> list[Family]:
    """The entries every sample has: the high-value ones from RockBot's forensic table and the user's identity."""
    return [
        Family(
            "self-model",
            "agent-knowledge/self-model",
            [
                f"I am {USER_FIRST}'s personal assistant agent. I run dream consolidation twice a day (00:00 and "
                "12:00 America/Chicago) and must never delete a memory without a replacement that keeps every "
                "name, date and number.",
            ],
            0.99,
            ["self", "identity"],
            reinforcement=214,
        ),
        Family(
            "routing-fast-tier",
            "anti-patterns/routing",
            [
                "Routing multi-step calendar reconciliation to the Fast model tier truncated the plan on 2026-07-18; "
                "always route it to the Balanced tier.",
                "Calendar reconciliation with several steps must go to the Balanced tier — the Fast tier truncated "
                "the plan on 2026-07-18.",
            ],
            1.0,
            ["routing", "model-tier"],
            reinforcement=106,
        ),
        Family(
            "infrastructure",
            "agent-knowledge/infrastructure",
            [
                "The agent runs in namespace agents on cluster homelab-k3s; its memory PVC agent-data is 20Gi on "
                "Longhorn with nightly backups at 02:00 to the NAS at 10.0.40.12.",
            ],
            0.99,
            ["infrastructure", "kubernetes"],
            elaborations=[
                "The agent runs in namespace agents on cluster homelab-k3s; its memory PVC agent-data is 20Gi on "
                "Longhorn with nightly backups at 02:00 to the NAS at 10.0.40.12 (retention 14 days, restore tested "
                "2026-06-30).",
            ],
            reinforcement=80,
        ),
        Family(
            "identity",
            "user-preferences/identity",
            [
                f"{USER_FULL} goes by {USER_FIRST}. Accounts: personal jordan@ellery.example, work "
                "jordan.ellery@fabrikam.example, GitHub jellery, Bluesky @jordan.ellery.example.",
            ],
            0.99,
            ["identity", "accounts"],
            elaborations=[
                f"{USER_FULL} goes by {USER_FIRST}. Accounts: personal jordan@ellery.example, work "
                "jordan.ellery@fabrikam.example, GitHub jellery, Bluesky @jordan.ellery.example. "
                f"{USER_FIRST} also appears in travel and calendar data as {USER_LEGAL}.",
            ],
            reinforcement=73,
        ),
        Family(
            "class-launch",
            "project-context/blazor-online-class",
            [
                "The Blazor Online Class launches on 2026-10-05; registration opens 2026-09-21 at $499, with an "
                "early-bird price of $399 until 2026-09-28.",
                "Registration for the Blazor Online Class opens 2026-09-21 ($499; early-bird $399 until 2026-09-28) "
                "and the class launches on 2026-10-05.",
            ],
            0.97,
            ["blazor", "class", "pricing"],
            reinforcement=41,
        ),
        Family(
            "family-rose",
            "people/family",
            [
                f"Rose is {USER_FIRST}'s sister; she lives in Portland and her birthday is May 14.",
                f"{USER_FIRST}'s sister Rose lives in Portland. Her birthday is May 14.",
            ],
            0.9,
            ["family"],
            reinforcement=12,
        ),
        Family(
            "family-will",
            "people/family",
            [f"Will is {USER_FIRST}'s son; he starts at the University of Minnesota on 2026-09-02."],
            0.88,
            ["family"],
            elaborations=[
                f"Will is {USER_FIRST}'s son; he starts at the University of Minnesota on 2026-09-02 and moves into "
                "Pioneer Hall on 2026-08-28.",
            ],
            reinforcement=9,
        ),
        Family(
            "neighbour-may",
            "people/neighbours",
            [f"May Lindqvist is {USER_FIRST}'s neighbour; she waters the plants and collects mail during trips."],
            0.6,
            ["neighbours"],
        ),
        Family(
            "comm-style",
            "user-preferences/communication",
            [
                f"{USER_FIRST} prefers concise replies: the answer first, details after.",
                f"{USER_FIRST} likes short answers — lead with the answer, then the details.",
                f"Keep replies to {USER_FIRST} concise; answer first, details second.",
            ],
            0.85,
            ["communication"],
            reinforcement=27,
        ),
        Family(
            "fridays",
            "user-preferences/scheduling",
            [f"{USER_FIRST} keeps Friday afternoons free for deep work; never book meetings after 12:30 on Fridays."],
            0.82,
            ["calendar"],
            elaborations=[
                f"{USER_FIRST} keeps Friday afternoons free for deep work; never book meetings after 12:30 on "
                "Fridays, except the monthly Fabrikam steering call at 1:30 PM.",
            ],
        ),
        Family(
            "invites",
            "user-preferences/communication",
            [f"Send calendar invites to {USER_FIRST}'s work address jordan.ellery@fabrikam.example, never personal."],
            0.8,
            ["calendar", "email"],
        ),
        Family(
            "food",
            "user-preferences/food",
            [f"{USER_FIRST} is vegetarian and avoids mushrooms."],
            0.7,
            ["food"],
        ),
        Family(
            "travel-seat",
            "user-preferences/travel",
            [f"{USER_FIRST} prefers aisle seats and flies out of MSP; TSA PreCheck number KTN 98431207."],
            0.75,
            ["travel"],
        ),
        Family(
            "podcast-day",
            "feedback/corrections",
            [f"{USER_FIRST} corrected me: the Deep Stack podcast records on Tuesdays at 10:00, not Thursdays."],
            0.65,
            ["podcast", "correction"],
        ),
        Family(
            "tools-utc",
            "agent-knowledge/tools",
            [f"The calendar tool returns times in UTC; convert to America/Chicago before showing {USER_FIRST}."],
            0.86,
            ["tools", "calendar"],
            reinforcement=18,
        ),
        Family(
            "dns-plan",
            "active-plans/home-lab",
            [
                "Plan: move home lab DNS from Pi-hole to AdGuard Home by 2026-10-15. Step 2 of 5 done (config "
                "exported); next: stand up the AdGuard pod on node rpi-04.",
            ],
            0.85,
            ["plan", "home-lab"],
        ),
    ]


def person_families(rng: random.Random, person: Person, index: int) -> list[Family]:
    """Several facts about one person; the identity fact carries the contact specifics."""
    met = _date(rng, -300, -5)
    conference = rng.choice(CONFERENCES)
    topic = rng.choice(TOPICS)
    key = f"person-{index}"
    families = [
        Family(
            f"{key}-identity",
            "people/colleagues",
            [
                f"{person.name} is a {person.role} at {person.company}; email {person.email}, phone {person.phone}.",
                f"{person.name} ({person.role}, {person.company}) — {person.email}, {person.phone}.",
            ],
            round(rng.uniform(0.55, 0.85), 2),
            ["contact", person.company.lower().replace(" ", "-")],
            elaborations=[
                f"{person.name} is a {person.role} at {person.company}, based in {person.city}; email "
                f"{person.email}, phone {person.phone}.",
            ],
        ),
        Family(
            f"{key}-met",
            "episodes/meetings",
            [f"Met {person.name} at {conference} in {rng.choice(CITIES)[0]} on {met:%Y-%m-%d}; discussed {topic}."],
            round(rng.uniform(0.3, 0.6), 2),
            ["meeting"],
            subject_time=f"{met:%Y-%m-%d}",
            elaborations=[
                f"Met {person.name} at {conference} on {met:%Y-%m-%d} ({_long_date(met)}); discussed {topic} and "
                f"agreed to follow up by email at {person.email}.",
            ],
        ),
    ]
    if rng.random() < 0.5:
        channel = rng.choice(["Teams", "Signal", "email", "a phone call"])
        families.append(
            Family(
                f"{key}-pref",
                "people/colleagues",
                [
                    f"{person.first} {person.last} prefers {channel} for quick questions.",
                    f"For quick questions, {person.name} would rather use {channel}.",
                ],
                round(rng.uniform(0.35, 0.6), 2),
                ["contact"],
            )
        )
    return families


def project_families(rng: random.Random, people: list[Person]) -> list[Family]:
    families = []
    for slug, name in PROJECTS:
        owner = rng.choice(people)
        due = _date(rng, 5, 120)
        repo = slug.replace("-", "")
        families += [
            Family(
                f"project-{slug}-owner",
                f"project-context/{slug}",
                [f"{owner.name} from {owner.company} is the main contact for the {name}."],
                round(rng.uniform(0.6, 0.9), 2),
                [slug],
                elaborations=[
                    f"{owner.name} from {owner.company} is the main contact for the {name}; reach them at "
                    f"{owner.email}.",
                ],
            ),
            Family(
                f"project-{slug}-repo",
                f"project-context/{slug}",
                [
                    f"The {name} code lives at github.com/ellery-labs/{repo}; main deploys to staging via GitHub "
                    "Actions.",
                    f"Repo for the {name}: github.com/ellery-labs/{repo} (main → staging through GitHub Actions).",
                ],
                round(rng.uniform(0.5, 0.8), 2),
                [slug, "repo"],
            ),
            Family(
                f"project-{slug}-deadline",
                f"project-context/{slug}",
                [f"The next {name} milestone is due {due:%Y-%m-%d} ({_long_date(due)})."],
                round(rng.uniform(0.5, 0.85), 2),
                [slug, "deadline"],
                subject_time=f"{due:%Y-%m-%d}",
            ),
        ]
    return families


def trip_families(rng: random.Random, count: int) -> list[Family]:
    families = []
    for index in range(count):
        city, code = rng.choice(CITIES[1:])
        depart = _date(rng, -200, 90)
        conference = rng.choice(CONFERENCES)
        confirmation = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6))
        flight = f"DL{rng.randint(100, 2999)}"
        families.append(
            Family(
                f"trip-{index}",
                "travel/trips",
                [
                    f"{USER_FIRST} flies MSP→{code} on {depart:%Y-%m-%d} ({flight}) for {conference} in {city}; "
                    f"confirmation {confirmation}.",
                    f"Trip: {city} for {conference}, flight {flight} MSP→{code} on {depart:%Y-%m-%d}, "
                    f"confirmation {confirmation}.",
                ],
                round(rng.uniform(0.35, 0.7), 2),
                ["travel", "tripit"],
                subject_time=f"{depart:%Y-%m-%d}",
                elaborations=[
                    f"{USER_FIRST} flies MSP→{code} on {depart:%Y-%m-%d} ({flight}) for {conference} in {city}; "
                    f"confirmation {confirmation}, hotel booked under {USER_LEGAL}.",
                ],
            )
        )
    return families


def ephemeral_families(rng: random.Random, people: list[Person], count: int) -> list[Family]:
    """Present-tense status notes: the only thing consolidation may prune standalone."""
    families = []
    for index in range(count):
        person = rng.choice(people)
        project = rng.choice(PROJECTS)[1]
        text = rng.choice(
            [
                f"{USER_FIRST} is currently on a call with {person.name}.",
                f"The {project} build is running right now.",
                f"{USER_FIRST} is waiting for {person.first} to reply about {rng.choice(TOPICS)}.",
                f"{USER_FIRST} is at the dentist this morning.",
                f"Currently drafting a reply to {person.name} about the {project}.",
            ]
        )
        families.append(
            Family(f"ephemeral-{index}", "episodes/status", [text], round(rng.uniform(0.08, 0.3), 2), ephemeral=True)
        )
    return families


def misc_families(rng: random.Random, count: int) -> list[Family]:
    """Uncategorised odds and ends (RockBot puts these at the memory root)."""
    pool = [
        f"{USER_FIRST} mentioned enjoying the Ferrante novels.",
        f"{USER_FIRST}'s car is due for service at 45,000 miles.",
        f"The Wi-Fi password for the cabin is in {USER_FIRST}'s 1Password vault under 'Cabin 2026'.",
        f"{USER_FIRST} renewed the PWOP Productions domain for 3 years on 2026-05-11.",
        f"{USER_FIRST}'s library card number is 21234009876543.",
        f"{USER_FIRST} wants a reminder to rotate the backup drives on the first Sunday of each month.",
    ]
    rng.shuffle(pool)
    return [
        Family(f"misc-{index}", "", [text], round(rng.uniform(0.2, 0.6), 2)) for index, text in enumerate(pool[:count])
    ]


def fragment_family(rng: random.Random, person: Person) -> Family:
    """Many small notes about one colleague, each with its own specific — the shape of a good 13-source merge."""
    met = _date(rng, -120, -10)
    return Family(
        "fragments",
        "people/colleagues",
        [
            f"{person.name}'s work email is {person.email}.",
            f"{person.name} also uses {person.first.lower()}{person.last[0].lower()}@bellsouth.example at home.",
            f"{person.name}'s mobile is {person.phone}.",
            f"{person.name} is a {person.role} at {person.company}.",
            f"{person.name} speaks at VS Live most years.",
            f"{person.name} lives in {person.city} and is two hours ahead of {USER_FIRST} in winter.",
            f"{USER_FIRST} and {person.name} last had lunch on {met:%Y-%m-%d}.",
        ],
        0.6,
        ["contact"],
    )


def knowledge_families(rng: random.Random, count: int) -> list[Family]:
    """What the agent learned about its tools and infrastructure: hostnames, ports, versions, quirks."""
    families = []
    for index in range(count):
        host = f"{rng.choice(['nas', 'rpi', 'nuc', 'gpu'])}-{rng.randint(1, 12):02d}"
        ip = f"10.0.{rng.choice([10, 20, 40])}.{rng.randint(2, 250)}"
        port = rng.choice([5432, 6379, 8080, 8443, 9000, 11434])
        version = f"{rng.randint(1, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
        tool = rng.choice(["the mail tool", "the calendar tool", "the web search tool", "the Tripit importer"])
        limit = rng.choice([25, 50, 100, 250])
        options = [
            (
                "agent-knowledge/infrastructure",
                f"Host {host} ({ip}) serves Ollama on port {port}; it is the fallback when the cloud model is down.",
                f"Ollama fallback: {host} at {ip}, port {port}, used when the cloud model is unavailable.",
                f"Host {host} ({ip}) serves Ollama on port {port} with 24 GB of VRAM; it is the fallback when the "
                "cloud model is down.",
            ),
            (
                "agent-knowledge/tools",
                f"{tool.capitalize()} returns at most {limit} results per call; page with the cursor for more.",
                f"{tool.capitalize()} caps results at {limit} per call — use the cursor to page.",
                f"{tool.capitalize()} returns at most {limit} results per call (since version {version}); page "
                "with the cursor for more.",
            ),
            (
                "agent-knowledge/infrastructure",
                f"Postgres {version} for the agent's episode store runs on {host} ({ip}:5432), database episodes.",
                f"The episode store is Postgres {version} on {host}, {ip}:5432, database episodes.",
                f"Postgres {version} for the agent's episode store runs on {host} ({ip}:5432), database episodes, "
                "backed up by Longhorn snapshot every 6 hours.",
            ),
        ]
        category, canonical, restated, elaborated = rng.choice(options)
        families.append(
            Family(
                f"knowledge-{index}",
                category,
                [canonical, restated],
                round(rng.uniform(0.5, 0.9), 2),
                [category.split("/")[1]],
                elaborations=[elaborated],
            )
        )
    return families


def preference_families(rng: random.Random, count: int) -> list[Family]:
    """Inferred preferences: the entries RockBot's #580 save-time dedupe found copied most often."""
    pool = [
        (
            "user-preferences/communication",
            f"{USER_FIRST} prefers email over phone calls for anything that needs a written record.",
            f"For anything needing a paper trail, {USER_FIRST} would rather get an email than a call.",
        ),
        (
            "user-preferences/scheduling",
            f"{USER_FIRST} does not take meetings before 09:00 America/Chicago.",
            f"No meetings for {USER_FIRST} before 09:00 Central.",
        ),
        (
            "user-preferences/tools",
            f"{USER_FIRST} uses Obsidian for notes and keeps the vault in the Notes folder on OneDrive.",
            f"Notes live in Obsidian; {USER_FIRST}'s vault is in the OneDrive Notes folder.",
        ),
        (
            "user-preferences/music",
            f"{USER_FIRST} listens to Khruangbin and Nils Frahm while writing.",
            f"While writing, {USER_FIRST} puts on Khruangbin or Nils Frahm.",
        ),
        (
            "user-preferences/travel",
            f"{USER_FIRST} wants hotel bookings within walking distance of the venue, under $250 a night.",
            f"Book {USER_FIRST} hotels walkable to the venue and below $250 per night.",
        ),
        (
            "user-preferences/finance",
            f"{USER_FIRST} pays conference fees with the Woodgrove Bank card ending 4417.",
            f"Conference fees go on {USER_FIRST}'s Woodgrove Bank card ending 4417.",
        ),
    ]
    rng.shuffle(pool)
    return [
        Family(f"pref-{index}", category, [canonical, restated], round(rng.uniform(0.6, 0.9), 2), ["preference"])
        for index, (category, canonical, restated) in enumerate(pool[:count])
    ]
