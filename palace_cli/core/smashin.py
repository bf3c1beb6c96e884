"""The SMASHIN SCOPE scorer: which of the twelve memorability factors an Image uses, and where.

Each factor is detected by cue phrases (lexicons and a few patterns) in the Image text. It is a
heuristic with measured agreement against hand labels (docs/study.md), not a judge of taste.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from palace_cli.core.notes import Memory
from palace_cli.core.text import ALNUM

DEFAULT_THRESHOLD = 5


VOWELS = "aeiou"
GAP = re.compile(r"[\s-]+")


def inflections(word: str) -> set[str]:
    """A word and its regular inflections: -s, -es, -ed, -ing, with e-dropping and doubling (irregular forms are listed)."""
    forms = {word, word + "s", word + "es", word + "ed", word + "ing"}
    if word.endswith("e"):
        forms |= {word + "d", word[:-1] + "ing"}
    if word.endswith("y") and len(word) > 2 and word[-2] not in VOWELS:
        forms |= {word[:-1] + "ies", word[:-1] + "ied"}
    if len(word) >= 3 and word[-1] not in VOWELS + "wxy" and word[-2] in VOWELS and word[-3] not in VOWELS:
        forms |= {word + word[-1] + "ing", word + word[-1] + "ed"}  # trip -> tripped, run -> running
    return forms


@dataclass(frozen=True)
class Lexicon:
    """Cue words (matched as whole tokens) and cue phrases (consecutive tokens)."""

    singles: frozenset
    phrases: dict  # first word -> phrases (tuples of words) starting with it, longest first


def _words(*groups: str) -> Lexicon:
    """Listed words with their inflections; `_` joins a multi-word cue (its first word inflects); `=` takes a word as is."""
    singles, phrases = set(), set()
    for group in groups:
        for item in group.split():
            exact = item.startswith("=")
            parts = ALNUM.findall(item.lstrip("=").replace("_", " ").lower())
            firsts = {parts[0]} if exact else inflections(parts[0])
            for first in firsts:
                if len(parts) == 1:
                    singles.add(first)
                else:
                    phrases.add((first, *parts[1:]))
    by_first: dict[str, list] = {}
    for phrase in sorted(phrases, key=lambda p: (-len(p), p)):
        by_first.setdefault(phrase[0], []).append(phrase)
    return Lexicon(frozenset(singles), {k: tuple(v) for k, v in by_first.items()})


@dataclass(frozen=True)
class Factor:
    """One of the twelve factors: its name, its letter, what it asks for, and how it is detected."""

    key: str
    name: str
    letter: str
    technique: str
    patterns: tuple  # Lexicon, regex strings, or rule functions over tokens
    min_hits: int = 1


ANIMALS = ("dog cat parrot bird owl crow raven pigeon horse pony donkey cow bull ox goat sheep pig =mouse =mice rat "
           "rabbit squirrel fox =wolf =wolves bear lion tiger elephant monkey ape gorilla snake frog toad fish shark "
           "whale octopus crab lobster ant bee wasp hornet spider beetle butterfly moth duck =goose =geese chicken hen "
           "rooster penguin camel giraffe zebra hippo rhino rhinoceros crocodile alligator kangaroo koala panda "
           "raccoon badger beaver otter seal walrus hamster turtle tortoise snail worm buffalo bison mole hare "
           "pelican flamingo woodpecker canary swan llama sloth hedgehog weasel ferret lizard dragon unicorn troll "
           "goblin ghost robot dinosaur calf")
PEOPLE = ("clerk librarian waiter waitress chef cook butler porter bellboy guard soldier knight king queen prince "
          "princess priest officiant judge referee pilot sailor captain admiral farmer baker =postman =postmen "
          "courier messenger janitor doctor nurse surgeon teacher student =child =children kid crowd audience clown "
          "juggler magician wizard monk nun mayor sheriff detective runner athlete dancer singer choir chorister "
          "band couple bride groom guest customer shopper traveller passenger driver conductor twin sister brother "
          "cousin grandmother grandma granny worker builder plumber electrician firefighter lifeguard jester "
          "accountant cashier teller bartender barista notary secretary receptionist bouncer usher guide scribe "
          "servant maid stagehand actor courtier drummer rower newsboy crier taster keeper engineer mechanic "
          "cop officer marshal dj")
THINGS = ("lobby hotel library =libraries kitchen restaurant bakery castle tower bridge harbour harbor station "
          "platform train bus truck ship boat rowboat raft ferry warehouse factory stadium theatre theater stage "
          "church altar wedding market shop store bank vault mailbox letter envelope parcel package box crate jar "
          "bucket barrel bottle cup mug plate cake pie bread =loaf =loaves soup coin ticket key lock padlock door "
          "gate window ladder rope chain bell lamp bulb candle clock hourglass mirror book notebook ledger scroll "
          "diary map chair armchair table desk =shelf =shelves drawer bed pillow umbrella hat coat tuxedo glove shoe "
          "boot baton ball balloon drum trumpet whistle hammer sword shield wagon cart conveyor belt hose bathtub "
          "river lake pond dam fountain garden tree forest mountain island stamp sticker tag card deck =dice domino "
          "puzzle statue doll toy sandwich pizza cookie apple banana orange egg bowl tray basket suitcase backpack "
          "tent bench lever spotlight seat throne crown freezer newspaper kiosk trophy apron clicker abacus quill "
          "tablet canvas portrait painting folder sock laundromat camel caravan podium megaphone balcony carousel "
          "polaroid forklift scalpel skates cushion beanbag trough well bracelet bead")
CLOTHES = ("hat cap helmet beret wig crown tuxedo bowtie bow_tie tie vest cloak robe apron scarf collar gloves "
           "spectacles glasses monocle headphones skates mask costume uniform jacket tutu boots")
TOOLS = ("crowbar hammer clipboard ledger megaphone stethoscope broom calculator abacus shovel wrench clicker "
         "briefcase quill notebook")
_ANIMAL = _words(ANIMALS).singles
_ROLE = _words(PEOPLE).singles
_GEAR = _words(CLOTHES, TOOLS)
_SPEECH = _words("say =said shout whisper read =wrote write count type juggle argue sing wear recite announce "
                 "check stamp sign hand").singles
_SPEECH_WITH = {"calls": {"out"}, "call": {"out"}, "holds": {"up"}, "hold": {"up"},
                "squawks": {"a", "the", "out"}, "squawk": {"a", "the", "out"}}


def animal_role(tokens: list) -> list[tuple[int, int]]:
    """An animal in a human job: "badger electrician", "courier pelican"."""
    hits = []
    for i, (word, _, _) in enumerate(tokens):
        if word not in _ANIMAL:
            continue
        after = next((j for j in (i + 1, i + 2) if j < len(tokens) and tokens[j][0] in _ROLE), None)
        if after is not None:
            hits.append((i, after))
        elif i and tokens[i - 1][0] in _ROLE:
            hits.append((i - 1, i))
    return hits


def animal_dressed(tokens: list) -> list[tuple[int, int]]:
    """An animal in clothes or with a tool: "kangaroo in roller skates", "raccoon with a crowbar"."""
    hits = []
    for i, (word, _, _) in enumerate(tokens):
        if word not in _ANIMAL:
            continue
        for j in range(i + 1, min(i + 4, len(tokens))):
            if tokens[j][0] in ("in", "wearing", "with"):
                for k in range(j + 1, min(j + 5, len(tokens))):
                    end = _lexicon_end(tokens, k, _GEAR)
                    if end is not None:
                        hits.append((i, end))
                        break
                break
    return hits


def animal_speaks(tokens: list) -> list[tuple[int, int]]:
    """An animal doing what people do with words: "the parrot squawks the number", "the badger counts"."""
    hits = []
    for i, (word, _, _) in enumerate(tokens):
        if word not in _ANIMAL:
            continue
        for j in range(i + 1, min(i + 5, len(tokens))):
            verb = tokens[j][0]
            follow = tokens[j + 1][0] if j + 1 < len(tokens) else ""
            if verb in _SPEECH or follow in _SPEECH_WITH.get(verb, ()):
                hits.append((i, j))
                break
    return hits


def _lexicon_end(tokens: list, i: int, lexicon: Lexicon, text: str | None = None) -> int | None:
    """The index of the last token of a cue starting at token i, or None."""
    for phrase in lexicon.phrases.get(tokens[i][0], ()):
        n = len(phrase)
        if tuple(t[0] for t in tokens[i : i + n]) == phrase and (
                text is None or all(GAP.fullmatch(text[tokens[k][2] : tokens[k + 1][1]])
                                    for k in range(i, i + n - 1))):
            return i + n - 1
    return i if tokens[i][0] in lexicon.singles else None


FACTORS: tuple[Factor, ...] = (
    Factor("substitute", "Substitute", "S", "replace the abstract idea with concrete objects or characters "
           "(nodes become couples, a cache becomes a notebook)",
           (_words(PEOPLE, ANIMALS, THINGS),), min_hits=2),
    Factor("movement", "Movement", "M", "add action: things run, swing, burst, pour, crash",
           (_words("run =ran race sprint dash rush chase flee =fled fly =flies =flew =flying =flown fling =flung "
                   "fall =fell tumble topple collapse crash smash burst explode spin =spun whirl twirl swirl rotate "
                   "roll slide =slid skid glide jump leap hop bounce climb scramble march stride =strode stomp "
                   "charge stampede gallop swing =swung swoop dive =dove plunge pour spill splash flood gush spray "
                   "squirt throw =threw =thrown toss hurl lob catch =caught grab snatch yank pull push shove drag "
                   "haul carry lift heave kick punch slam knock shake =shook wave flap flutter wobble sway dance "
                   "juggle pass hand_over hand_out sweep =swept shovel scoop zoom shoot =shot dart scurry scatter "
                   "swarm crawl stagger trip slip paddle pedal ride =rode drive =drove walk step wander orbit "
                   "hurry stream whizz whoosh drop sail swim =swam jog stroll lumber waddle trudge shuffle "
                   "untie dunk flip chop unroll tear =tore =torn rip wheel descend sink =sank"),
            r"\b(?:rows?|rowed|rowing) (?:over|back|across|away|out|ashore)\b"),
           min_hits=1),
    Factor("absurd", "Absurd", "A", "make it impossible or weird: a dragon in a bowtie, statues that talk",
           (_words("impossible impossibly absurd absurdly bizarre bizarrely weird weirdly strange strangely "
                   "surreal ridiculous ridiculously magic magical magically enchanted miraculous miraculously "
                   "somehow insane preposterous outlandish cursed haunted ghost zombie levitate hover midair "
                   "float teleport clone sprout melt talking dragon unicorn sleepwalk sleepwalking backwards "
                   "invisible vanish"),
            r"\b(?:made|built|carved|woven|knitted) (?:entirely |all |wholly )?(?:of|from) \w+",
            r"\b(?:turns?|turning|turned|transforms?|transforming|morphs?) into\b",
            r"\b(?:come|comes|came|coming) (?:to life|alive)\b",
            r"\bis (?:actually|secretly|really) an? \w+",
            animal_role, animal_dressed, animal_speaks),
           min_hits=1),
    Factor("sensory", "Sensory", "S", "engage a sense beyond sight: sound, smell, taste, touch, temperature",
           (_words("hear =heard sound noise loud loudly quiet silent silence =rang =rung =ringing chime clang "
                   "clank clatter rattle roar rumble thunder boom bang thud crack crackle creak squeak squeal "
                   "screech shriek scream shout yell bellow whisper murmur hum buzz buzzer blare siren hiss "
                   "whistle beep honk echo music sing =sang song squawk bark howl moan groan snore sizzle pop "
                   "click tick tock drum chant jangle clink crunch thump pound gurgle chirp "
                   "smell stink =stank stench reek aroma scent odour odor whiff fragrance fragrant perfume sniff "
                   "taste sour bitter salty sweet spicy tongue lick chew bite =bitten "
                   "cold icy =ice freeze =froze =frozen freezing chill warm hot heat burn scald steam sticky slimy "
                   "slippery rough smooth soft damp wet soggy greasy prickly itch sting numb vibrate tremble "
                   "heavy weight sweat sweaty texture velvet sandpaper"),
            r"\b(?:bell|timer|phone|alarm|clock|buzzer)s?\s+(?:rings?|rang)\b"),
           min_hits=1),
    Factor("humor", "Humor", "H", "include something funny: a joke, a pun, slapstick, a ridiculous situation",
           (_words("laugh laughter giggle chuckle snicker grin joke pun silly hilarious hilariously comic comical "
                   "comedy comedian funny clown prank slapstick pratfall banana_peel embarrass embarrassed "
                   "embarrassing sheepish sheepishly wink mock tease cartoon goofy parody whoopee custard_pie "
                   "tutu clumsy clumsily smug sulk sulking snort yawn doze nap sleepwalking faint =fainted "
                   "monocle =monocled rubber_duck wig bowtie bow_tie"),
            r"\b(?:trips?|tripped|tripping|slips?|slipped|slipping) (?:on|over)\b",
            r"\b(?:named|called) (?-i:[A-Z][a-z]+)\b",
            r"(?-i:\b(?:Mrs?|Ms|Dr|Sir|Lady)\.? [A-Z][a-z]+)",
            animal_dressed),
           min_hits=1),
    Factor("interact", "Interact", "I", "put yourself in the scene: you push, you shout, you hold",
           (r"\byou(?:r|rself)?\b",), min_hits=1),
    Factor("numbers", "Numbers", "N", "encode quantities: forty-seven couples, three parrots, a 10-second timer",
           (r"\b\d[\d,.]*\b",
            _words("=two =three =four =five =six =seven =eight =nine =ten =eleven =twelve =thirteen =fourteen "
                   "=fifteen =sixteen =seventeen =eighteen =nineteen =twenty =thirty =forty =fifty =sixty =seventy "
                   "=eighty =ninety hundred thousand million billion dozen =half =halves double triple =twice "
                   "=thrice pair =trio =quartet"),),
           min_hits=1),
    Factor("symbols", "Symbols", "S", "use visual puns, letters, logos, icons, labels and signs",
           (_words("=letters sign signpost logo symbol icon label sticker badge flag banner emblem tattoo "
                   "arrow placard poster billboard inscription inscribed engrave engraved embroider embroidered "
                   "monogram =initials crest seal graffiti trophy crown medal tag barcode number_plate "
                   "scoreboard chalkboard blackboard whiteboard stamped notch cross"),
            r"\b(?:spell(?:s|ed|ing)? out|shaped like|in the shape of|the (?:word|letters?)|marked|labell?ed|"
            r"reads?|reading|saying|says|stamps?|stamped|engraved|painted|paints?|scrawls?|scrawled|chalks?|"
            r"chalked|writes?|wrote|written)(?:\s+(?:it|them|with|on|onto|in|the|a|your|his|her))*\s+[\"“'‘]",
            r"(?-i:\b[A-Z]{3,}(?:\s+[A-Z]{2,})*\b)",
            r"\b(?:stamp|stamps|stamped|paint|paints|painted|chalk|chalks|chalked|engraved|tattooed|numbered)\b"
            r"(?:\W+\w+){0,5}?\W+(?:number|numeral|date|letters?|word|name|rule|minute)s?\b"),
           min_hits=1),
    Factor("color", "Color", "C", "add vivid, unusual colours: mustard-yellow, neon pink, electric blue",
           (_words("red =reddish crimson scarlet ruby cherry maroon orange tangerine yellow mustard golden =gold "
                   "amber green emerald =lime mint turquoise =teal =cyan blue =navy azure sapphire indigo violet "
                   "purple lilac lavender magenta pink bubblegum coral =brown =beige =ivory white grey gray "
                   "silver copper rainbow neon colour color colourful colorful pastel fluorescent dye"),
            r"\bblack(?!\s+out)\b"),
           min_hits=1),
    Factor("oversize", "Oversize", "O", "change the scale dramatically: a fifty-foot dragon, a thimble-sized city",
           (_words("giant gigantic huge enormous colossal towering tower_over massive immense vast titanic "
                   "monstrous mammoth jumbo mountainous mountain_of skyscraper endless infinite bottomless tiny "
                   "=tinier =tiniest miniature microscopic minuscule thimble ant-sized pocket-sized dwarf dwarfed "
                   "loom looming sky-high oversized outsized"),
            r"\b\d+[- ](?:foot|feet|metre|meter|storey|story|mile|kilometre)s?[- ](?:tall|high|long|wide|deep)\b",
            r"\b(?:the size of|as (?:big|tall|large|high|wide) as|bigger than|taller than|larger than|"
            r"stretch(?:es|ing)? to the horizon|reaching the ceiling|up to the sky|times (?:bigger|larger|taller)|"
            r"twice as (?:tall|big|large|high)|absurdly (?:wide|tall|long|big|large|high|deep))\b"),
           min_hits=1),
    Factor("position", "Position", "P", "place things precisely: on the left, on top of, behind, in a row",
           (_words("=above =below =beneath =underneath =behind in_front_of on_top_of at_the_top at_the_bottom "
                   "=opposite =overhead =upstairs =downstairs side_by_side =atop far_end near_end at_the_front "
                   "at_the_back at_the_head_of next_to =beside =between"),
            r"\b(?:the|on|to|at|your|his|her|its|their|far)[\s-]+(?:left|right)\b",
            r"\b(?:left|right)[\s-]+(?:side|bank|hand|hook|door|stage|wall|edge|corner|wing|one|room)\b",
            r"\b(?:left|right)-hand\b",
            _words("=corner =center =centre =middle =edge =row =rows =column =ceiling =floor =wall =doorway "
                   "=entrance =aisle =front =rear =inside =outside =top =bottom =north =south =east =west")),
           min_hits=2),
    Factor("emotion", "Emotion", "E", "evoke a strong feeling: fear, joy, disgust, surprise, relief",
           (_words("fear fearful afraid terror terrified terrifying panic =panicked =panicking dread horror "
                   "horrified scared scary frighten frightened frightening anxious anxiety nervous nervously worry "
                   "worried tense tension joy joyful delight delighted thrill thrilled cheer ecstatic elated relief "
                   "relieved proud pride triumph triumphant glee gleeful happy happiness love adore hate anger "
                   "angry angrily furious fury rage livid disgust disgusted disgusting gross revolting nausea "
                   "nauseous sick surprise surprised shock shocked astonish astonished amaze amazed gasp sob "
                   "=cry =cries =cried =crying weep =wept despair desperate desperately frantic "
                   "frantically frustrate frustrated humiliate humiliated shame ashamed guilt guilty lonely "
                   "heartbroken grief grieve mourn sorrow sad sadly sadness =awe nightmare dismay heart_pounding "
                   "heart_racing shiver pray plead beg hope hopeful sulk sulking groan groaning scandal "
                   "stomach_drops beloved impatient impatiently"),
            r"\b(?:in|into|burst(?:s|ing)? into) tears\b"),
           min_hits=1),
)
FACTOR_KEYS = tuple(f.key for f in FACTORS)
_COMPILED = {f.key: [re.compile(p, re.IGNORECASE) if isinstance(p, str) else p for p in f.patterns] for f in FACTORS}
QUOTED = re.compile(r"[\"“][^\"“”]*[\"”]")


def _mask_quotes(text: str) -> str:
    """Blank out quoted speech (keeping offsets): a "you" that a character says is not the learner acting."""
    return QUOTED.sub(lambda m: " " * len(m.group(0)), text)


@dataclass
class Evidence:
    """A cue phrase found in the Image, with its file line and column when known."""

    text: str
    offset: int
    line: int = 0
    column: int = 0

    def as_dict(self) -> dict:
        return {"text": self.text, "line": self.line, "column": self.column}


@dataclass
class FactorResult:
    """Whether one factor is present, and the cues that say so."""

    key: str
    name: str
    present: bool
    evidence: list[Evidence] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"factor": self.key, "name": self.name, "present": self.present,
                "evidence": [e.as_dict() for e in self.evidence]}


@dataclass
class SmashinScore:
    """The twelve factors of one memory's Image and their sum (0-12)."""

    memory_id: str
    path: str
    factors: list[FactorResult]

    @property
    def score(self) -> int:
        return sum(f.present for f in self.factors)

    @property
    def present(self) -> list[str]:
        return [f.key for f in self.factors if f.present]

    @property
    def missing(self) -> list[str]:
        return [f.key for f in self.factors if not f.present]

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"id": self.memory_id, "path": self.path, "score": self.score, "max": len(FACTORS),
                "level": level(self.score), "missing": self.missing,
                "factors": [f.as_dict() for f in self.factors]}


def level(score: int) -> str:
    """The appendix's quality band: poor (0-3), moderate (4-6), good (7-9), excellent (10-12)."""
    return "poor" if score <= 3 else "moderate" if score <= 6 else "good" if score <= 9 else "excellent"


def factor(key: str) -> Factor:
    """A factor by key (`substitute` ... `emotion`)."""
    for item in FACTORS:
        if item.key == key:
            return item
    raise KeyError(key)


def tokenize(text: str) -> list[tuple[str, int, int]]:
    """(lowercased word, start, end) for each run of letters and digits."""
    return [(m.group(0).lower(), m.start(), m.end()) for m in ALNUM.finditer(text)]


def _matches(pattern, text: str, tokens: list) -> list[tuple[int, int]]:
    """(start, end) character spans where a pattern (Lexicon, compiled regex, or token rule) matches."""
    if isinstance(pattern, Lexicon):
        spans = []
        for i, (word, start, _) in enumerate(tokens):
            if word in pattern.singles or word in pattern.phrases:
                end = _lexicon_end(tokens, i, pattern, text)
                if end is not None:
                    spans.append((start, tokens[end][2]))
        return spans
    if isinstance(pattern, re.Pattern):
        return [(m.start(), m.end()) for m in pattern.finditer(text)]
    return [(tokens[i][1], tokens[j][2]) for i, j in pattern(tokens)]


def detect(image: str) -> list[FactorResult]:
    """Each factor with the distinct cues found for it in the image text (offsets into `image`)."""
    tokens = tokenize(image)
    masked = _mask_quotes(image)
    masked_tokens = tokenize(masked)
    results = []
    for item in FACTORS:
        found: dict[str, Evidence] = {}
        text, words_ = (masked, masked_tokens) if item.key == "interact" else (image, tokens)
        for pattern in _COMPILED[item.key]:
            for start, end in _matches(pattern, text, words_):
                cue = image[start:end].strip()
                if cue and cue.lower() not in found:
                    found[cue.lower()] = Evidence(cue, start)
        evidence = sorted(found.values(), key=lambda e: e.offset)
        results.append(FactorResult(item.key, item.name, len(evidence) >= item.min_hits, evidence))
    return results


def _image_start(memory: Memory) -> tuple[int, int]:
    """(offset of the Image text in the body, file line of the body's first line)."""
    heading = re.search(r"^##[ \t]+image[ \t]*$", memory.body, re.IGNORECASE | re.MULTILINE)
    if heading is None or not memory.image:
        return -1, 0
    body_first_line = memory.image_line - memory.body[: heading.start()].count("\n")
    return memory.body.find(memory.image, heading.end()), body_first_line


def score_memory(memory: Memory) -> SmashinScore:
    """Score a memory's Image; evidence carries file line and column."""
    results = detect(memory.image)
    start, first_line = _image_start(memory)
    if start >= 0:
        for result in results:
            for evidence in result.evidence:
                absolute = start + evidence.offset
                evidence.line = first_line + memory.body[:absolute].count("\n")
                evidence.column = absolute - (memory.body.rfind("\n", 0, absolute) + 1) + 1
    return SmashinScore(memory.id, memory.path, results)


def weak_image_problems(scan, settings: dict | None = None) -> list:
    """Lint warnings (`smashin-weak`) for Images scoring below palace.toml `[study] smashin_threshold`."""
    from palace_cli.core.layout import Problem

    limit = threshold(settings)
    problems = []
    for memory in sorted(scan.memories.values(), key=lambda m: m.path):
        if not memory.image:
            continue  # a missing Image is already reported by the parser
        result = score_memory(memory)
        if result.score < limit:
            names = ", ".join(factor(k).name for k in result.missing[:6])
            problems.append(Problem(memory.path, memory.image_line or None, "warning", "smashin-weak",
                                    f"Image scores {result.score}/12 on SMASHIN SCOPE (threshold {limit}); "
                                    f"missing {names}; try `palace evolve {memory.id}`"))
    return problems


def threshold(settings: dict | None) -> int:
    """The lint threshold from palace.toml `[study] smashin_threshold` (default 5)."""
    value = (settings or {}).get("smashin_threshold", DEFAULT_THRESHOLD)
    try:
        return max(0, min(12, int(value)))
    except (TypeError, ValueError):
        return DEFAULT_THRESHOLD


# ---- agreement with hand labels ------------------------------------------------------------


def _kappa(pairs: list[tuple[int, int]]) -> float | None:
    """Cohen's kappa of two binary raters; None when chance agreement is total (nothing to learn)."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(a == b for a, b in pairs) / n
    pa = sum(a for a, _ in pairs) / n
    pb = sum(b for _, b in pairs) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


def _binary_stats(pairs: list[tuple[int, int]]) -> dict:
    """pairs are (label, predicted)."""
    n = len(pairs)
    tp = sum(1 for a, b in pairs if a and b)
    fp = sum(1 for a, b in pairs if not a and b)
    fn = sum(1 for a, b in pairs if a and not b)
    kappa = _kappa(pairs)
    return {"n": n, "accuracy": round(sum(a == b for a, b in pairs) / n, 3) if n else None,
            "kappa": round(kappa, 3) if kappa is not None else None,
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None,
            "labelled_present": sum(a for a, _ in pairs), "detected_present": sum(b for _, b in pairs)}


def agreement(labels: dict[str, dict[str, int]], scores: dict[str, SmashinScore]) -> dict:
    """Scorer vs hand labels: per factor and overall accuracy, Cohen's kappa, precision, recall; total-score error."""
    ids = sorted(i for i in labels if i in scores)
    per_factor = {}
    every: list[tuple[int, int]] = []
    for key in FACTOR_KEYS:
        pairs = [(int(bool(labels[i][key])), int(key in scores[i].present)) for i in ids]
        per_factor[key] = _binary_stats(pairs)
        every += pairs
    totals = [(sum(int(bool(labels[i][k])) for k in FACTOR_KEYS), scores[i].score) for i in ids]
    mae = sum(abs(a - b) for a, b in totals) / len(totals) if totals else None
    return {"memories": len(ids), "missing": sorted(set(labels) - set(scores)), "factors": per_factor,
            "overall": _binary_stats(every),
            "total_score": {"mean_abs_error": round(mae, 3) if mae is not None else None,
                            "pearson": _pearson(totals),
                            "mean_label": round(sum(a for a, _ in totals) / len(totals), 2) if totals else None,
                            "mean_scorer": round(sum(b for _, b in totals) / len(totals), 2) if totals else None}}


def _pearson(pairs: list[tuple[int, int]]) -> float | None:
    if len(pairs) < 2:
        return None
    xs, ys = [a for a, _ in pairs], [b for _, b in pairs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sx = sum((x - mx) ** 2 for x in xs) ** 0.5
    sy = sum((y - my) ** 2 for y in ys) ** 0.5
    if not sx or not sy:
        return None
    return round(sum((x - mx) * (y - my) for x, y in pairs) / (sx * sy), 3)
