"""The placebo arm's notes: as many as the memory it stands beside, each as long as one of
its notes, drawn from domains no coding task touches (baking, sailing, beekeeping...).

They are shaped like lessons (title, when it applies, 1-3 sentences, a category), so the
model sees the same kind and amount of text; only their relevance to the task differs.
The choice is deterministic given the seed.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from mtl_mcp.schemas import CONTENT_MAX, DESCRIPTION_MAX, TITLE_MAX, Insight


@dataclass(frozen=True)
class Shape:
    """The lengths (characters) of one note to imitate, and its category."""

    title: int
    description: int
    content: int
    category: str = "other"
    polarity: str = "success"


# domain -> (title, when it applies, the lesson, more sentences to reach a length)
_BANK: dict[str, tuple[tuple[str, str, str], ...]] = {
    "sourdough-baking": (
        (
            "Feed the starter before it peaks",
            "When a sourdough starter is used for a bake the next morning.",
            "A starter fed at its peak rises the dough evenly; one left to collapse gives a dense "
            "crumb and a sour edge.",
        ),
        (
            "Let the dough tell you when bulk is done",
            "When bulk fermentation times from a recipe do not match the kitchen.",
            "Judge bulk by volume, bubbles and jiggle rather than the clock; warm kitchens finish "
            "hours early and cold ones late.",
        ),
    ),
    "vegetable-gardening": (
        (
            "Harden off seedlings over a week",
            "When moving seedlings raised indoors out into the garden.",
            "Seedlings moved out in one day scorch and stall; a week of longer daily visits "
            "outside lets them toughen first.",
        ),
        (
            "Water deeply and less often",
            "When a vegetable bed dries out between summer showers.",
            "A deep soak twice a week grows roots that reach down; a daily sprinkle keeps them "
            "shallow and thirsty.",
        ),
    ),
    "dinghy-sailing": (
        (
            "Ease the sheet before the gust arrives",
            "When sailing a small dinghy on a lake with gusty wind.",
            "Watch the dark patches on the water upwind and ease out as they reach the boat; "
            "waiting for the heel is too late.",
        ),
        (
            "Rig the boat on the shore, facing the wind",
            "When preparing a dinghy for launch from a beach.",
            "A boat rigged side-on to the wind fills its sail and tips on the trolley; pointing it "
            "into the wind keeps it calm.",
        ),
    ),
    "woodworking": (
        (
            "Cut on the waste side of the line",
            "When sawing a board to a marked length by hand.",
            "The kerf takes a millimetre or two, so saw beside the line in the offcut and plane "
            "down to it afterwards.",
        ),
        (
            "Let glue joints cure before planing",
            "When gluing up boards into a panel for a table top.",
            "Planing a fresh joint flush leaves a dip once the swollen wood dries; a day of cure "
            "keeps the surface flat.",
        ),
    ),
    "film-photography": (
        (
            "Meter for the shadows on negative film",
            "When exposing colour negative film in harsh light.",
            "Negative film forgives overexposure far more than under; give the shadows enough "
            "light and the highlights survive.",
        ),
        (
            "Load film in the shade of your body",
            "When changing a roll of film outdoors in bright sun.",
            "Direct sun fogs the edge of the leader; turning your back to the light while loading "
            "protects the first frames.",
        ),
    ),
    "choir-singing": (
        (
            "Breathe at the phrase marks, not when empty",
            "When learning a long phrase in a choir piece.",
            "Planned breaths at the marks keep the line together; breathing when the air runs out "
            "breaks the phrase mid-word.",
        ),
        (
            "Listen to the section beside you",
            "When a choir drifts flat during unaccompanied singing.",
            "Tuning to the neighbouring part rather than your own voice keeps the chord in tune as "
            "the piece goes on.",
        ),
    ),
    "beekeeping": (
        (
            "Inspect the hive on a warm calm afternoon",
            "When planning a routine hive inspection.",
            "Most foragers are out in warm still weather, so the hive is calmer and fewer bees are "
            "in the way of the frames.",
        ),
        (
            "Leave enough honey for the winter",
            "When harvesting honey late in the season.",
            "A colony needs its own stores to survive the cold months; take only the surplus above "
            "what the cluster will eat.",
        ),
    ),
    "distance-running": (
        (
            "Run most miles at an easy pace",
            "When training for a first long-distance race.",
            "Easy runs build the base without the fatigue that derails training; hard sessions "
            "work best as a small share of the week.",
        ),
        (
            "Practise race-day breakfast in training",
            "When preparing food and drink for a long race morning.",
            "A breakfast tried before on long runs sits well; something new on race day is a "
            "gamble with the stomach.",
        ),
    ),
    "pottery": (
        (
            "Wedge the clay until the air is gone",
            "When preparing clay for throwing on the wheel.",
            "Air pockets left in the clay blow out in the kiln; wedging until a cut face shows no "
            "holes prevents it.",
        ),
        (
            "Dry pieces slowly under loose plastic",
            "When a freshly thrown pot has thin and thick parts.",
            "Uneven drying cracks the thin parts first; a loose cover slows them so the whole "
            "piece dries together.",
        ),
    ),
    "birdwatching": (
        (
            "Learn the calls of the common birds first",
            "When starting to identify birds by ear.",
            "Knowing the everyday calls makes an unusual one stand out; rare songs are hard to "
            "place without that background.",
        ),
        (
            "Keep the sun behind you when watching",
            "When watching birds across open water or fields.",
            "Backlit birds show only silhouettes; with the sun behind you their colours and marks "
            "are easy to see.",
        ),
    ),
    "knitting": (
        (
            "Knit a gauge swatch before the garment",
            "When starting a sweater from a pattern with a new yarn.",
            "Stitch counts vary with yarn and hands; a washed swatch tells whether the needles "
            "give the size the pattern expects.",
        ),
        (
            "Join a new ball at the edge of the work",
            "When a ball of yarn runs out in the middle of a row.",
            "Joins at the edge weave in invisibly; one in the middle of a row shows as a lump on "
            "the front of the fabric.",
        ),
    ),
    "home-brewing": (
        (
            "Sanitise everything the cooled wort touches",
            "When moving cooled wort into the fermenter.",
            "Boiling kills what is in the pot, but every spoon and tube after it can bring in wild "
            "yeast that spoils the batch.",
        ),
        (
            "Control the fermentation temperature",
            "When fermenting ale in a warm room in summer.",
            "Yeast running warm makes harsh flavours; a cool spot or a water bath keeps it in the "
            "range the style needs.",
        ),
    ),
}
_QUALIFIERS = (
    "", "in cold weather", "on a small budget", "for beginners", "before a long day",
    "with borrowed tools", "when time is short", "in a crowded space", "after a long break",
    "with a friend helping", "on the first attempt", "in damp conditions",
)  # fmt: skip
_FILLER = (
    "Experienced hands say the same, and the difference shows within a season.",
    "It costs a few minutes and saves the whole effort more often than not.",
    "Most mistakes here come from hurry rather than from a lack of skill.",
    "Write down what was done so that the next attempt can start from it.",
    "Small, steady habits matter more than the choice of equipment.",
)
DOMAINS: tuple[str, ...] = tuple(_BANK)


def placebo_notes(shapes: Sequence[Shape], seed: int) -> list[Insight]:
    """One unrelated note per shape, of about its lengths (within a few characters)."""
    rng = random.Random(seed)
    atoms = [(domain, atom) for domain, entries in _BANK.items() for atom in entries]
    rng.shuffle(atoms)
    notes = []
    for n, shape in enumerate(shapes):
        domain, (title, description, content) = atoms[n % len(atoms)]
        qualifier = _QUALIFIERS[(n // len(atoms)) % len(_QUALIFIERS)]
        round_ = n // (len(atoms) * len(_QUALIFIERS))
        if qualifier:
            title = f"{title} {qualifier}"
        if round_:
            title = f"{title} ({round_ + 1})"
        fillers = [_FILLER[(n + i) % len(_FILLER)] for i in range(len(_FILLER))]
        identity = f"placebo\n{seed}\n{n}\n{title}"
        notes.append(
            Insight.model_validate(
                {
                    "id": "ins_" + hashlib.sha256(identity.encode()).hexdigest()[:16],
                    "title": _fit(title, shape.title, TITLE_MAX, ()),
                    "description": _fit(description, shape.description, DESCRIPTION_MAX, fillers),
                    "content": _fit(content, shape.content, CONTENT_MAX, fillers),
                    "polarity": shape.polarity,
                    "category": shape.category,
                    "domain": domain,
                    "tags": ["placebo"],
                }
            )
        )
    return notes


def _fit(text: str, target: int, limit: int, more: Sequence[str]) -> str:
    """`text` grown with `more` sentences, then cut at a word, to about `target` chars."""
    target = max(12, min(target, limit))
    for sentence in more:
        if len(text) >= target:
            break
        text = f"{text} {sentence}"
    while len(text) < target:  # a very long target: repeat the sentences
        text = f"{text} {more[len(text) % len(more)] if more else text}"
    if len(text) > target:
        cut = text[:target].rsplit(" ", 1)[0].rstrip(",;: ")
        text = cut if len(cut) >= 8 else text[:target]
        if more and not text.endswith("."):
            text = text[: max(8, target - 1)].rstrip(",;: ") + "."
    return text[:limit]
